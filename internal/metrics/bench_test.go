package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/skill"
)

// What a dispatcher adds per tool call: a release, and an applied
// attempt with its duration.
func BenchmarkDispatcherPerCall(b *testing.B) {
	d := metrics.New().Dispatcher()
	for b.Loop() {
		d.Released("echo")
		d.Attempt("echo", planbus.ToolSucceeded, 3*time.Millisecond)
	}
}

// What a worker adds per call: the middleware around a handler that does
// nothing.
func BenchmarkWorkerMiddleware(b *testing.B) {
	h := metrics.New().Worker().Middleware()(skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
		return skill.Result{}, nil
	}))
	call := &skill.Call{Skill: "echo", ReleasedAt: time.Now()}
	ctx := context.Background()
	for b.Loop() {
		_, _ = h.Handle(ctx, call)
	}
}

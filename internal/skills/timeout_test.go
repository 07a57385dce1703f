package skills_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/skills"
)

// blocked returns a handler that ignores ctx and waits for a channel the
// test closes only at cleanup.
func blocked(t *testing.T) skills.Handler {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return skills.HandlerFunc(func(context.Context, *plan.ToolCall) (skills.Result, error) {
		<-release
		return skills.Result{Output: []byte(`"too late"`)}, nil
	})
}

func timedCall(ms int64) *plan.ToolCall {
	call := newCall("demo", `{}`)
	call.TimeoutMs = ms
	return call
}

func TestTimeout(t *testing.T) {
	honours := skills.HandlerFunc(func(ctx context.Context, _ *plan.ToolCall) (skills.Result, error) {
		<-ctx.Done()
		return skills.Result{}, ctx.Err()
	})
	tests := []struct {
		name    string
		handler skills.Handler
	}{
		{"handler ignores ctx", blocked(t)},
		{"handler honours ctx", honours},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := skills.Timeout(tt.handler).Handle(t.Context(), timedCall(20))
			wantError(t, err, plan.CategoryTimeout, plan.CodeToolTimeout)
			wantMessage(t, err, "Tool exceeded 20ms timeout")
			if res.Output != nil {
				t.Errorf("got output %s, want none", res.Output)
			}
		})
	}
}

func TestTimeoutParentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := skills.Timeout(blocked(t)).Handle(ctx, timedCall(60_000))
	wantError(t, err, plan.CategoryCancelled, plan.CodeCancelled)
}

func TestTimeoutPassesThrough(t *testing.T) {
	failure := &skills.Error{Code: "NO_USER", Category: plan.CategoryPermanent, Message: "no user"}
	tests := []struct {
		name      string
		timeoutMs int64
		err       error
	}{
		{"result with deadline", 60_000, nil},
		{"error with deadline", 60_000, failure},
		{"result without deadline", 0, nil},
		{"error without deadline", 0, failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hasDeadline bool
			h := skills.Timeout(skills.HandlerFunc(func(ctx context.Context, _ *plan.ToolCall) (skills.Result, error) {
				_, hasDeadline = ctx.Deadline()
				if tt.err != nil {
					return skills.Result{}, tt.err
				}
				return skills.Result{Output: []byte(`1`)}, nil
			}))
			res, err := h.Handle(t.Context(), timedCall(tt.timeoutMs))
			if err != tt.err {
				t.Errorf("got error %v, want %v", err, tt.err)
			}
			if tt.err == nil && string(res.Output) != "1" {
				t.Errorf("got output %s, want 1", res.Output)
			}
			if want := tt.timeoutMs > 0; hasDeadline != want {
				t.Errorf("handler saw a deadline: %v, want %v", hasDeadline, want)
			}
		})
	}
}

// TestTimeoutRecoversPanics covers the worker's order, Recover outside
// Timeout: the handler runs on Timeout's goroutine, out of Recover's reach,
// so Timeout must catch the panic itself or the whole process dies.
func TestTimeoutRecoversPanics(t *testing.T) {
	panics := skills.HandlerFunc(func(context.Context, *plan.ToolCall) (skills.Result, error) { panic("boom") })
	for _, order := range []struct {
		name string
		mw   []skills.Middleware
	}{
		{"Recover outside", []skills.Middleware{skills.Recover, skills.Timeout}},
		{"Timeout outside", []skills.Middleware{skills.Timeout, skills.Recover}},
	} {
		t.Run(order.name, func(t *testing.T) {
			_, err := skills.Chain(panics, order.mw...).Handle(t.Context(), timedCall(60_000))
			wantError(t, err, plan.CategoryInternal, plan.CodeToolPanic)
			wantMessage(t, err, "skill demo panicked: boom")
		})
	}
}

func TestChainOrder(t *testing.T) {
	var trace []string
	record := func(name string) skills.Middleware {
		return func(next skills.Handler) skills.Handler {
			return skills.HandlerFunc(func(ctx context.Context, call *plan.ToolCall) (skills.Result, error) {
				trace = append(trace, name+" in")
				res, err := next.Handle(ctx, call)
				trace = append(trace, name+" out")
				return res, err
			})
		}
	}
	h := skills.HandlerFunc(func(context.Context, *plan.ToolCall) (skills.Result, error) {
		trace = append(trace, "handler")
		return skills.Result{}, errors.New("done")
	})
	if _, err := skills.Chain(h, record("a"), record("b"), record("c")).Handle(t.Context(), newCall("demo", `{}`)); err == nil {
		t.Fatal("got no error, want the handler's")
	}
	want := []string{"a in", "b in", "c in", "handler", "c out", "b out", "a out"}
	if diff := cmp.Diff(want, trace); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	trace = nil
	if _, err := skills.Chain(h).Handle(t.Context(), newCall("demo", `{}`)); err == nil {
		t.Fatal("got no error, want the handler's")
	}
	if diff := cmp.Diff([]string{"handler"}, trace); diff != "" {
		t.Errorf("no middleware (-want +got):\n%s", diff)
	}
}

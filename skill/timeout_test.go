package skill_test

import (
	"context"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// blocked returns a handler that ignores ctx and waits for a channel the
// test closes only at cleanup.
func blocked(t *testing.T) skill.Handler {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
		<-release
		return skill.Result{Output: []byte(`"too late"`)}, nil
	})
}

func timedCall(ms int64) *skill.Call {
	call := newCall("demo", `{}`)
	call.TimeoutMs = ms
	return call
}

func TestTimeout(t *testing.T) {
	honours := skill.HandlerFunc(func(ctx context.Context, _ *skill.Call) (skill.Result, error) {
		<-ctx.Done()
		return skill.Result{}, ctx.Err()
	})
	tests := []struct {
		name    string
		handler skill.Handler
	}{
		{"handler ignores ctx", blocked(t)},
		{"handler honours ctx", honours},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := skill.Timeout(tt.handler).Handle(t.Context(), timedCall(20))
			wantError(t, err, planbus.CategoryTimeout, planbus.CodeToolTimeout)
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
	_, err := skill.Timeout(blocked(t)).Handle(ctx, timedCall(60_000))
	wantError(t, err, planbus.CategoryCancelled, planbus.CodeCancelled)
}

func TestTimeoutPassesThrough(t *testing.T) {
	failure := &skill.Error{Code: "NO_USER", Category: string(planbus.CategoryPermanent), Message: "no user"}
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
			h := skill.Timeout(skill.HandlerFunc(func(ctx context.Context, _ *skill.Call) (skill.Result, error) {
				_, hasDeadline = ctx.Deadline()
				if tt.err != nil {
					return skill.Result{}, tt.err
				}
				return skill.Result{Output: []byte(`1`)}, nil
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
	panics := skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) { panic("boom") })
	for _, order := range []struct {
		name string
		mw   []skill.Middleware
	}{
		{"Recover outside", []skill.Middleware{skill.Recover, skill.Timeout}},
		{"Timeout outside", []skill.Middleware{skill.Timeout, skill.Recover}},
	} {
		t.Run(order.name, func(t *testing.T) {
			_, err := skill.Chain(panics, order.mw...).Handle(t.Context(), timedCall(60_000))
			wantError(t, err, planbus.CategoryInternal, planbus.CodeToolPanic)
			wantMessage(t, err, "skill demo panicked: boom")
		})
	}
}

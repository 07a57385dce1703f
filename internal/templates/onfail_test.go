package templates

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	fallbackStep := OnFail{Retries: 1, Then: ActionFallback, Step: "alt"}
	fallbackPlan := OnFail{Then: ActionFallback, Plan: "other"}
	tests := []struct {
		name      string
		onFail    OnFail
		attempt   int
		retryable bool
		want      Decision
	}{
		{"default retries first", DefaultOnFail(), 1, true, Decision{Action: ActionRetry, DelayMs: 100, Reason: "attempt 1 of 3 failed; retrying"}},
		{"default backoff doubles", DefaultOnFail(), 2, true, Decision{Action: ActionRetry, DelayMs: 200, Reason: "attempt 2 of 3 failed; retrying"}},
		{"default aborts at the end", DefaultOnFail(), 3, true, Decision{Action: ActionAbort, Reason: "attempt 3 of 3 failed; aborting the plan"}},
		{"not retryable goes to then", DefaultOnFail(), 1, false, Decision{Action: ActionAbort, Reason: "attempt 1 failed and is not worth retrying; aborting the plan"}},
		{"own backoff", OnFail{Retries: 3, BackoffMs: 1000}, 3, true, Decision{Action: ActionRetry, DelayMs: 4000, Reason: "attempt 3 of 4 failed; retrying"}},
		{"zero value aborts at once", OnFail{}, 1, true, Decision{Action: ActionAbort, Reason: "attempt 1 of 1 failed; aborting the plan"}},
		{"skip", OnFail{Then: ActionSkip}, 1, true, Decision{Action: ActionSkip, Reason: "attempt 1 of 1 failed; skipping the step"}},
		{"skip after retries", OnFail{Retries: 2, Then: ActionSkip}, 3, true, Decision{Action: ActionSkip, Reason: "attempt 3 of 3 failed; skipping the step"}},
		{"fallback step retries first", fallbackStep, 1, true, Decision{Action: ActionRetry, DelayMs: 100, Reason: "attempt 1 of 2 failed; retrying"}},
		{"fallback step", fallbackStep, 2, true, Decision{Action: ActionFallback, Step: "alt", Reason: `attempt 2 of 2 failed; falling back to step "alt"`}},
		{"fallback step when not retryable", fallbackStep, 1, false, Decision{Action: ActionFallback, Step: "alt", Reason: `attempt 1 failed and is not worth retrying; falling back to step "alt"`}},
		{"fallback plan", fallbackPlan, 1, true, Decision{Action: ActionFallback, Plan: "other", Reason: `attempt 1 of 1 failed; falling back to plan "other"`}},
		{"attempt past the end", OnFail{Retries: 1, Then: ActionSkip}, 7, true, Decision{Action: ActionSkip, Reason: "attempt 7 of 2 failed; skipping the step"}},
		{"attempt 0 counts as 1", OnFail{Retries: 1}, 0, true, Decision{Action: ActionRetry, DelayMs: 100, Reason: "attempt 1 of 2 failed; retrying"}},
		{"huge backoff is capped", OnFail{Retries: 40, BackoffMs: 3_000_000}, 30, true, Decision{Action: ActionRetry, DelayMs: 3_600_000, Reason: "attempt 30 of 41 failed; retrying"}},
		{"unknown then aborts", OnFail{Then: "explode", Step: "x"}, 1, true, Decision{Action: ActionAbort, Reason: "attempt 1 of 1 failed; aborting the plan"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.onFail.Resolve(tt.attempt, tt.retryable)); diff != "" {
				t.Errorf("Resolve(%d, %v) (-want +got):\n%s", tt.attempt, tt.retryable, diff)
			}
		})
	}
}

func TestOnFailJSON(t *testing.T) {
	tests := []struct {
		doc  string
		want OnFail
		err  string
	}{
		{`"retry"`, OnFail{Retries: 2, Then: ActionAbort}, ""},
		{`"skip"`, OnFail{Then: ActionSkip}, ""},
		{`"abort"`, OnFail{Then: ActionAbort}, ""},
		{`"warn"`, OnFail{Retries: 2, Then: ActionAbort, Guided: ActionWarn}, ""},
		{`"block"`, OnFail{Retries: 2, Then: ActionAbort, Guided: ActionBlock}, ""},
		{`"maybe"`, OnFail{}, `onFail "maybe": want "retry", "skip", "abort", "warn", "block" or an object`},
		{`{"then":"skip","guided":"warn"}`, OnFail{Then: ActionSkip, Guided: ActionWarn}, ""},
		{`{"retries":1,"backoffMs":50,"then":"fallback","step":"s"}`, OnFail{Retries: 1, BackoffMs: 50, Then: ActionFallback, Step: "s"}, ""},
		{`{"then":"skip"}`, OnFail{Then: ActionSkip}, ""},
		{`{"then":"skip","retry":1}`, OnFail{}, `unknown field "retry"`},
	}
	for _, tt := range tests {
		var got OnFail
		err := json.Unmarshal([]byte(tt.doc), &got)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.doc, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.doc, got, err, tt.want)
		}
	}
	// A step without onFail gets the default; with it, exactly what it says.
	var s Step
	if err := json.Unmarshal([]byte(`{"id":"a","skill":"echo"}`), &s); err != nil || s.OnFail != DefaultOnFail() {
		t.Errorf("step without onFail: %+v, %v", s.OnFail, err)
	}
	b, _ := json.Marshal(OnFail{Then: ActionSkip})
	if string(b) != `{"then":"skip"}` {
		t.Errorf("marshal = %s", b)
	}
}

func TestOnFailCheck(t *testing.T) {
	tests := []struct {
		o    OnFail
		want string
	}{
		{OnFail{Then: ActionSkip, Step: "x"}, `step and plan are only for then "fallback", not "skip"`},
		{OnFail{Then: ActionFallback}, "needs exactly one of step"},
		{OnFail{Then: ActionFallback, Step: "a", Plan: "b"}, "needs exactly one of step"},
		{OnFail{Then: ActionRetry}, `then "retry": want skip, abort or fallback`},
		{OnFail{Retries: 100}, "retries 100: want 0..99"},
		{OnFail{BackoffMs: -1}, "backoffMs -1"},
		{OnFail{Guided: ActionRetry}, `guided "retry": want warn or block`},
	}
	for _, tt := range tests {
		if err := tt.o.check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.o, err, tt.want)
		}
	}
}

// In a guided session warn and block keep the step whatever the attempt;
// without them the retries and then apply, with no delay (the agent's
// next turn is the retry).
func TestResolveGuided(t *testing.T) {
	tests := []struct {
		name    string
		onFail  OnFail
		attempt int
		want    Action
	}{
		{"warn", OnFail{Then: ActionSkip, Guided: ActionWarn}, 1, ActionWarn},
		{"warn has no limit", OnFail{Guided: ActionWarn}, 1000, ActionWarn},
		{"block has no limit", OnFail{Retries: 2, Then: ActionAbort, Guided: ActionBlock}, 1000, ActionBlock},
		{"retries first", DefaultOnFail(), 2, ActionRetry},
		{"then abort", DefaultOnFail(), 3, ActionAbort},
		{"skip", OnFail{Then: ActionSkip}, 1, ActionSkip},
		{"fallback step", OnFail{Then: ActionFallback, Step: "f"}, 1, ActionFallback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.onFail.ResolveGuided(tt.attempt)
			if d.Action != tt.want || d.DelayMs != 0 {
				t.Errorf("ResolveGuided(%d) = %+v, want %s without delay", tt.attempt, d, tt.want)
			}
		})
	}
}

package execution

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/planbus/planbus/internal/plan"
)

// out is a succeeded result of tool A with an output.
func out(attempt int, output string) *plan.ToolResult {
	return &plan.ToolResult{ToolID: "A", Attempt: attempt, State: plan.ToolSucceeded, Output: json.RawMessage(output)}
}

// summary lists what effects ask for, in words: "release A#2 (fallback)",
// "retry A#2 in 100ms", "applied A#1 VERIFY_FAILED final", "done failed
// VERIFY_FAILED".
func summary(e *Engine, fx Effects, now time.Time) []string {
	var s []string
	for _, a := range fx.Applied {
		code := "ok"
		if a.Result.Error != nil {
			code = a.Result.Error.Code
		}
		line := fmt.Sprintf("applied %s#%d %s", e.plan.Tools[a.Index].ToolID, a.Result.Attempt, code)
		if a.Final {
			line += " final"
		}
		s = append(s, line)
	}
	for _, r := range fx.Releases {
		t := e.plan.Tools[r.Index]
		line := fmt.Sprintf("release %s#%d", t.ToolID, r.Attempt)
		if t.Variant(r.Attempt).Fallback {
			line += " (fallback)"
		}
		s = append(s, line)
	}
	for _, tm := range fx.Timers {
		if tm.Kind == TimerRetry {
			s = append(s, fmt.Sprintf("retry %s#%d in %s", e.plan.Tools[tm.Index].ToolID, tm.Attempt, tm.FireAt.Sub(now)))
		}
	}
	if fx.Done != nil {
		line := "done " + fx.Done.State
		if fx.Done.Error != nil {
			line += " " + fx.Done.Error.Code
		}
		s = append(s, line)
	}
	return s
}

// TestGates plays tool A's results through its gates: each result's
// effects, then A's outcome.
func TestGates(t *testing.T) {
	const (
		gateYes = `"verify":{"type":"contains","path":"/x","value":"yes"}`
		primary = `"verify":{"type":"equals","path":"/from","value":"primary"}`
		cache   = `"verify":{"type":"equals","path":"/from","value":"cache"}`
	)
	type outcome struct {
		State, Skill, Code string
		Attempts           int
		Output             string
	}
	tests := []struct {
		name    string
		tools   string // A first; B depends on A
		results []*plan.ToolResult
		want    [][]string // per result, its effects
		outcome outcome    // A's
	}{
		{
			name:    "passes",
			tools:   `{"toolId":"A","skill":"s",` + gateYes + `}`,
			results: []*plan.ToolResult{out(1, `{"x":"oh yes"}`)},
			want:    [][]string{{"applied A#1 ok", "release B#1"}},
			outcome: outcome{plan.ToolSucceeded, "s", "", 1, `{"x":"oh yes"}`},
		},
		{
			name:    "refused, then passes on the retry",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":3,"backoffMs":100},` + gateYes + `}`,
			results: []*plan.ToolResult{out(1, `{"x":"no"}`), out(2, `{"x":"yes"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED", "retry A#2 in 100ms"}, {"applied A#2 ok", "release B#1"}},
			outcome: outcome{plan.ToolSucceeded, "s", "", 2, `{"x":"yes"}`},
		},
		{
			name:    "refused until the attempts run out: the plan fails",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":3,"backoffMs":100},` + gateYes + `}`,
			results: []*plan.ToolResult{out(1, `{"x":"no"}`), out(2, `{}`), out(3, `{"x":"nope"}`)},
			want: [][]string{{"applied A#1 VERIFY_FAILED", "retry A#2 in 100ms"}, {"applied A#2 VERIFY_FAILED", "retry A#3 in 200ms"},
				{"applied A#3 VERIFY_FAILED final", "done failed VERIFY_FAILED"}},
			outcome: outcome{plan.ToolFailed, "s", plan.CodeVerifyFailed, 3, `{"x":"nope"}`},
		},
		{
			name:    "refused, optional: its dependents run",
			tools:   `{"toolId":"A","skill":"s","required":false,"retryPolicy":{"maxAttempts":1},` + gateYes + `}`,
			results: []*plan.ToolResult{out(1, `{"x":"no"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "release B#1"}},
			outcome: outcome{plan.ToolFailed, "s", plan.CodeVerifyFailed, 1, `{"x":"no"}`},
		},
		{
			name:    "a failure is not checked",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + gateYes + `}`,
			results: []*plan.ToolResult{fail("A", 1, plan.CategoryPermanent)},
			want:    [][]string{{"applied A#1 X final", "done failed X"}},
			outcome: outcome{plan.ToolFailed, "s", "X", 1, ""},
		},
		{
			name: "each variant has its own gate: the fallback's passes what the tool's refused",
			tools: `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + primary + `,
				"fallback":{"skill":"f","retryPolicy":{"maxAttempts":1},` + cache + `}}`,
			results: []*plan.ToolResult{out(1, `{"from":"cache"}`), out(2, `{"from":"cache"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "release A#2 (fallback)"}, {"applied A#2 ok", "release B#1"}},
			outcome: outcome{plan.ToolSucceeded, "f", "", 2, `{"from":"cache"}`},
		},
		{
			name: "each variant has its own gate: the fallback's refuses what the tool's would pass",
			tools: `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + primary + `,
				"fallback":{"skill":"f","retryPolicy":{"maxAttempts":2,"backoffMs":50},` + cache + `}}`,
			results: []*plan.ToolResult{fail("A", 1, plan.CategoryNetwork), out(2, `{"from":"primary"}`), out(3, `{"from":"primary"}`)},
			want: [][]string{{"applied A#1 X final", "release A#2 (fallback)"}, {"applied A#2 VERIFY_FAILED", "retry A#3 in 50ms"},
				{"applied A#3 VERIFY_FAILED final", "done failed VERIFY_FAILED"}},
			outcome: outcome{plan.ToolFailed, "f", plan.CodeVerifyFailed, 3, `{"from":"primary"}`},
		},
		{
			name:    "a fallback without a gate takes any output",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + primary + `,"fallback":{"skill":"f"}}`,
			results: []*plan.ToolResult{out(1, `{}`), out(2, `{}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "release A#2 (fallback)"}, {"applied A#2 ok", "release B#1"}},
			outcome: outcome{plan.ToolSucceeded, "f", "", 2, `{}`},
		},
		{
			name:    "a gate in metadata.verify, as plans carried them before",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},"metadata":{` + gateYes + `}}`,
			results: []*plan.ToolResult{out(1, `{"x":"no"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "done failed VERIFY_FAILED"}},
			outcome: outcome{plan.ToolFailed, "s", plan.CodeVerifyFailed, 1, `{"x":"no"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := Start(mustPlan(t, `{"tools":[`+tt.tools+`,{"toolId":"B","skill":"s","dependencies":["A"]}]}`), t0, 8, nil)
			now := t0
			var got [][]string
			for _, r := range tt.results {
				given := *r
				fx := e.OnResult(r, now)
				if !cmp.Equal(*r, given) {
					t.Errorf("OnResult changed its argument (-before +after):\n%s", cmp.Diff(given, *r))
				}
				got = append(got, summary(e, fx, now))
				for _, tm := range fx.Timers {
					if tm.Kind == TimerRetry {
						now = tm.FireAt
						e.OnTimer(tm, now)
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("effects (-want +got):\n%s", diff)
			}
			a := e.Result().Tools[0]
			o := outcome{State: a.State, Skill: a.Skill, Attempts: a.Attempts, Output: string(a.Output)}
			if a.Error != nil {
				o.Code = a.Error.Code
				if a.Error.Code == plan.CodeVerifyFailed && a.Error.Category != plan.CategoryTransient {
					t.Errorf("a refused output's category %s, want transient", a.Error.Category)
				}
			}
			if diff := cmp.Diff(tt.outcome, o); diff != "" {
				t.Errorf("A's outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// A refused output's error is not stored: a state rebuilt from KV and
// the results stream gets it back by checking the result again.
func TestLoadChecksResultsAgainstTheirGates(t *testing.T) {
	p := mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":3},"verify":{"type":"exitCode"}}]}`)
	e, _ := Start(p, t0, 8, nil)
	results := map[uint64]*plan.ToolResult{7: out(1, `{"exitCode":2}`)}
	fx := e.OnResultSeq(results[7], 7, t0)
	if len(fx.Timers) != 1 || e.State().Tools[0].State != plan.ToolRetrying {
		t.Fatalf("refused output: state %s, timers %+v; want a retry", e.State().Tools[0].State, fx.Timers)
	}
	b, err := e.State().Store().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored Stored
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	st, err := Load(p, &stored, func(seq uint64) (*plan.ToolResult, error) { return results[seq], nil })
	if err != nil {
		t.Fatal(err)
	}
	// (A retrying tool's state keeps when its retry is due, not when it ran.)
	if diff := cmp.Diff(e.State().Tools[0], st.Tools[0], cmpopts.IgnoreFields(ToolState{}, "ReleasedAt")); diff != "" {
		t.Errorf("loaded tool state (-engine +loaded):\n%s", diff)
	}
	if st.Tools[0].Error == nil || st.Tools[0].Error.Code != plan.CodeVerifyFailed {
		t.Errorf("loaded error %+v, want VERIFY_FAILED", st.Tools[0].Error)
	}
	if results[7].State != plan.ToolSucceeded || results[7].Error != nil {
		t.Error("Load changed the result it read")
	}
}

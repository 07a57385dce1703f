package execution

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/gate"
)

// out is a succeeded result of tool A with an output.
func out(attempt int, output string) *planbus.ToolResult {
	return &planbus.ToolResult{ToolID: "A", Attempt: attempt, State: planbus.ToolSucceeded, Output: json.RawMessage(output)}
}

// summary lists what effects ask for, in words: "release A#2 (fallback)",
// "retry A#2 in 100ms", "applied A#1 VERIFY_FAILED final", "done failed
// VERIFY_FAILED".
func summary(e *Engine, fx Effects, now time.Time) []string {
	var s []string
	for _, a := range fx.Applied {
		code := "ok"
		if a.Result.Error != nil {
			code = string(a.Result.Error.Code)
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
		line := "done " + string(fx.Done.State)
		if fx.Done.Error != nil {
			line += " " + string(fx.Done.Error.Code)
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
		State    planbus.ToolState
		Skill    string
		Code     planbus.Code
		Attempts int
		Output   string
	}
	tests := []struct {
		name    string
		tools   string // A first; B depends on A
		results []*planbus.ToolResult
		want    [][]string // per result, its effects
		outcome outcome    // A's
	}{
		{
			name:    "passes",
			tools:   `{"toolId":"A","skill":"s",` + gateYes + `}`,
			results: []*planbus.ToolResult{out(1, `{"x":"oh yes"}`)},
			want:    [][]string{{"applied A#1 ok", "release B#1"}},
			outcome: outcome{planbus.ToolSucceeded, "s", "", 1, `{"x":"oh yes"}`},
		},
		{
			name:    "refused, then passes on the retry",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":3,"backoffMs":100},` + gateYes + `}`,
			results: []*planbus.ToolResult{out(1, `{"x":"no"}`), out(2, `{"x":"yes"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED", "retry A#2 in 100ms"}, {"applied A#2 ok", "release B#1"}},
			outcome: outcome{planbus.ToolSucceeded, "s", "", 2, `{"x":"yes"}`},
		},
		{
			name:    "refused until the attempts run out: the plan fails",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":3,"backoffMs":100},` + gateYes + `}`,
			results: []*planbus.ToolResult{out(1, `{"x":"no"}`), out(2, `{}`), out(3, `{"x":"nope"}`)},
			want: [][]string{{"applied A#1 VERIFY_FAILED", "retry A#2 in 100ms"}, {"applied A#2 VERIFY_FAILED", "retry A#3 in 200ms"},
				{"applied A#3 VERIFY_FAILED final", "done failed VERIFY_FAILED"}},
			outcome: outcome{planbus.ToolFailed, "s", planbus.CodeVerifyFailed, 3, `{"x":"nope"}`},
		},
		{
			name:    "refused, optional: its dependents run",
			tools:   `{"toolId":"A","skill":"s","required":false,"retryPolicy":{"maxAttempts":1},` + gateYes + `}`,
			results: []*planbus.ToolResult{out(1, `{"x":"no"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "release B#1"}},
			outcome: outcome{planbus.ToolFailed, "s", planbus.CodeVerifyFailed, 1, `{"x":"no"}`},
		},
		{
			name:    "a failure is not checked",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + gateYes + `}`,
			results: []*planbus.ToolResult{fail("A", 1, planbus.CategoryPermanent)},
			want:    [][]string{{"applied A#1 X final", "done failed X"}},
			outcome: outcome{planbus.ToolFailed, "s", "X", 1, ""},
		},
		{
			name: "each variant has its own gate: the fallback's passes what the tool's refused",
			tools: `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + primary + `,
				"fallback":{"skill":"f","retryPolicy":{"maxAttempts":1},` + cache + `}}`,
			results: []*planbus.ToolResult{out(1, `{"from":"cache"}`), out(2, `{"from":"cache"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "release A#2 (fallback)"}, {"applied A#2 ok", "release B#1"}},
			outcome: outcome{planbus.ToolSucceeded, "f", "", 2, `{"from":"cache"}`},
		},
		{
			name: "each variant has its own gate: the fallback's refuses what the tool's would pass",
			tools: `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + primary + `,
				"fallback":{"skill":"f","retryPolicy":{"maxAttempts":2,"backoffMs":50},` + cache + `}}`,
			results: []*planbus.ToolResult{fail("A", 1, planbus.CategoryNetwork), out(2, `{"from":"primary"}`), out(3, `{"from":"primary"}`)},
			want: [][]string{{"applied A#1 X final", "release A#2 (fallback)"}, {"applied A#2 VERIFY_FAILED", "retry A#3 in 50ms"},
				{"applied A#3 VERIFY_FAILED final", "done failed VERIFY_FAILED"}},
			outcome: outcome{planbus.ToolFailed, "f", planbus.CodeVerifyFailed, 3, `{"from":"primary"}`},
		},
		{
			name:    "a fallback without a gate takes any output",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},` + primary + `,"fallback":{"skill":"f"}}`,
			results: []*planbus.ToolResult{out(1, `{}`), out(2, `{}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "release A#2 (fallback)"}, {"applied A#2 ok", "release B#1"}},
			outcome: outcome{planbus.ToolSucceeded, "f", "", 2, `{}`},
		},
		{
			name:    "a gate in metadata.verify, as plans carried them before",
			tools:   `{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1},"metadata":{` + gateYes + `}}`,
			results: []*planbus.ToolResult{out(1, `{"x":"no"}`)},
			want:    [][]string{{"applied A#1 VERIFY_FAILED final", "done failed VERIFY_FAILED"}},
			outcome: outcome{planbus.ToolFailed, "s", planbus.CodeVerifyFailed, 1, `{"x":"no"}`},
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
				if a.Error.Code == planbus.CodeVerifyFailed && a.Error.Category != planbus.CategoryTransient {
					t.Errorf("a refused output's category %s, want transient", a.Error.Category)
				}
			}
			if diff := cmp.Diff(tt.outcome, o); diff != "" {
				t.Errorf("A's outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// A refused output's verdict is stored with the state: a state rebuilt
// from KV and the results stream takes it back without checking the
// result again (a gate may take its whole budget); a state stored before
// verdicts were gets it by checking the result again.
func TestLoadTakesTheStoredVerdict(t *testing.T) {
	p := mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":3},"verify":{"type":"exitCode"}}]}`)
	e, _ := Start(p, t0, 8, nil)
	results := map[uint64]*planbus.ToolResult{7: out(1, `{"exitCode":2}`)}
	fx := e.OnResultSeq(results[7], 7, t0)
	if len(fx.Timers) != 1 || e.State().Tools[0].State != planbus.ToolRetrying {
		t.Fatalf("refused output: state %s, timers %+v; want a retry", e.State().Tools[0].State, fx.Timers)
	}
	if e.State().GateSteps <= 0 {
		t.Errorf("GateSteps = %d after a check, want it charged", e.State().GateSteps)
	}
	load := func(stored Stored, results map[uint64]*planbus.ToolResult) *State {
		t.Helper()
		st, err := Load(p, &stored, func(seq uint64) (*planbus.ToolResult, error) { return results[seq], nil })
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	b, err := e.State().Store().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored Stored
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	st := load(stored, results)
	// (A retrying tool's state keeps when its retry is due, not when it ran.)
	if diff := cmp.Diff(e.State().Tools[0], st.Tools[0], cmpopts.IgnoreFields(ToolState{}, "ReleasedAt")); diff != "" {
		t.Errorf("loaded tool state (-engine +loaded):\n%s", diff)
	}
	if st.GateSteps != e.State().GateSteps {
		t.Errorf("loaded GateSteps = %d, want %d", st.GateSteps, e.State().GateSteps)
	}
	if results[7].State != planbus.ToolSucceeded || results[7].Error != nil {
		t.Error("Load changed the result it read")
	}
	// The verdict is the stored one: a result the gate would pass now
	// (as if checked again) keeps it.
	passing := map[uint64]*planbus.ToolResult{7: out(1, `{"exitCode":0}`)}
	if got := load(stored, passing).Tools[0].Error; got == nil || got.Code != planbus.CodeVerifyFailed {
		t.Errorf("loaded error %+v, want the stored VERIFY_FAILED", got)
	}
	// A state stored before verdicts were checks the result again.
	legacy := stored
	legacy.Tools = slices.Clone(stored.Tools)
	legacy.Tools[0].Error = nil
	if got := load(legacy, results).Tools[0]; got.Error == nil || got.Error.Code != planbus.CodeVerifyFailed || !got.Refused {
		t.Errorf("legacy state: loaded %+v, want VERIFY_FAILED by checking again", got)
	}
}

// A plan's gates share one budget, a share of its timeout: once used up,
// a gate is not checked and its result fails for good, naming the budget.
func TestThePlansGatesShareOneBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for i := range 100_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('1')
	}
	b.WriteString(`]}`)
	big := b.String()
	heavy := `"verify":{"type":"expr","expr":"` + strings.Repeat("count(output.a, # == 1) + ", 7) + `count(output.a, # == 1) > 0"}`
	var tools []string
	for _, id := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
		tools = append(tools, `{"toolId":"`+id+`","skill":"s","required":false,`+heavy+`}`)
	}
	// A one-second plan: a budget of gate.DefaultSteps, about five checks
	// of 800,000 steps.
	p := mustPlan(t, `{"timeoutMs":1000,"parallel":true,"maxConcurrency":8,"tools":[`+strings.Join(tools, ",")+`]}`)
	e, _ := Start(p, t0, 8, nil)
	if e.GateBudget() != gate.DefaultSteps {
		t.Fatalf("GateBudget = %d, want %d", e.GateBudget(), gate.DefaultSteps)
	}
	var succeeded, refused int
	for i, id := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
		r := &planbus.ToolResult{ToolID: id, Attempt: 1, State: planbus.ToolSucceeded, Output: json.RawMessage(big)}
		e.OnResultSeq(r, uint64(i+1), t0)
		ts := e.State().Tools[i]
		switch {
		case ts.State == planbus.ToolSucceeded:
			succeeded++
		case ts.Error != nil && ts.Error.Code == planbus.CodeVerifyFailed && ts.Error.Category == planbus.CategoryPermanent:
			refused++
			if refused == 1 && !strings.Contains(ts.Error.Message, "budget") {
				t.Errorf("%s: %q does not name the budget", id, ts.Error.Message)
			}
		default:
			t.Fatalf("%s: state %s, error %+v", id, ts.State, ts.Error)
		}
	}
	if succeeded == 0 || refused == 0 {
		t.Errorf("%d succeeded, %d refused; want the budget to end in the middle", succeeded, refused)
	}
	if e.State().GateSteps > e.GateBudget() {
		t.Errorf("GateSteps = %d, over the budget %d", e.State().GateSteps, e.GateBudget())
	}
	// A longer plan has a larger budget.
	long := mustPlan(t, `{"timeoutMs":60000,"tools":[{"toolId":"A","skill":"s"}]}`)
	if e, _ := Start(long, t0, 8, nil); e.GateBudget() != 60*GateStepsPerSecond {
		t.Errorf("GateBudget of a minute's plan = %d, want %d", e.GateBudget(), 60*GateStepsPerSecond)
	}
}

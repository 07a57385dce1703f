package execution

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustPlan(t *testing.T, doc string) *plan.Plan {
	t.Helper()
	p, err := plan.Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.PlanID == "" {
		p.PlanID, p.RequestID = "p", "r"
	}
	return p
}

func ids(e *Engine, rs []Release) []string {
	var out []string
	for _, r := range rs {
		out = append(out, e.plan.Tools[r.Index].ToolID)
	}
	return out
}

func ok(id string, attempt int) *planbus.ToolResult {
	return &planbus.ToolResult{ToolID: id, Attempt: attempt, State: planbus.ToolSucceeded, Output: json.RawMessage(`{"id":"` + id + `"}`)}
}

func fail(id string, attempt int, category planbus.Category) *planbus.ToolResult {
	return &planbus.ToolResult{ToolID: id, Attempt: attempt, State: planbus.ToolFailed,
		Error: &planbus.ErrorInfo{Code: "X", Message: "boom", Category: category}}
}

const diamond = `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]},
	{"toolId":"C","skill":"s","dependencies":["A"]},{"toolId":"D","skill":"s","dependencies":["B","C"]}]}`

func TestDiamondReleasesEachToolWhenItsDepsFinish(t *testing.T) {
	e, fx := Start(mustPlan(t, diamond), t0, 8, nil)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("start released %v, want [A]", got)
	}
	fx = e.OnResult(ok("A", 1), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"B", "C"}) {
		t.Fatalf("after A released %v, want [B C]", got)
	}
	fx = e.OnResult(ok("C", 1), t0)
	if len(fx.Releases) != 0 {
		t.Fatalf("D released before B finished")
	}
	fx = e.OnResult(ok("B", 1), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"D"}) {
		t.Fatalf("after B, C released %v, want [D]", got)
	}
	fx = e.OnResult(ok("D", 1), t0.Add(time.Second))
	if fx.Done == nil || !fx.Done.Success || fx.Done.State != planbus.PlanSucceeded {
		t.Fatalf("done = %+v, want success", fx.Done)
	}
	if fx.Done.DurationMs != 1000 || string(fx.Done.Tools[3].Output) != `{"id":"D"}` {
		t.Errorf("result duration %v, D output %s", fx.Done.DurationMs, fx.Done.Tools[3].Output)
	}
}

func TestConcurrencyCap(t *testing.T) {
	var tools []string
	for i := range 10 {
		tools = append(tools, `{"toolId":"t`+string(rune('0'+i))+`","skill":"s"}`)
	}
	e, fx := Start(mustPlan(t, `{"maxConcurrency":3,"tools":[`+strings.Join(tools, ",")+`]}`), t0, 8, nil)
	running := ids(e, fx.Releases)
	if len(running) != 3 {
		t.Fatalf("released %d at start, want 3", len(running))
	}
	done := 0
	for len(running) > 0 {
		id := running[0]
		running = running[1:]
		fx = e.OnResult(ok(id, 1), t0)
		done++
		running = append(running, ids(e, fx.Releases)...)
		if len(running) > 3 {
			t.Fatalf("%d in flight, cap 3", len(running))
		}
	}
	if done != 10 || fx.Done == nil {
		t.Fatalf("finished %d tools, done=%v", done, fx.Done != nil)
	}
}

func TestParallelFalseRunsOneAtATimeInKahnOrder(t *testing.T) {
	e, fx := Start(mustPlan(t, `{"parallel":false,"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s"},{"toolId":"C","skill":"s","dependencies":["A"]}]}`), t0, 8, nil)
	var order []string
	for len(fx.Releases) > 0 {
		if len(fx.Releases) != 1 {
			t.Fatalf("released %v at once", ids(e, fx.Releases))
		}
		id := ids(e, fx.Releases)[0]
		order = append(order, id)
		fx = e.OnResult(ok(id, 1), t0)
	}
	if !slices.Equal(order, []string{"A", "B", "C"}) {
		t.Fatalf("order %v, want [A B C]", order)
	}
}

func TestSyncToolRunsAlone(t *testing.T) {
	e, fx := Start(mustPlan(t, `{"tools":[{"toolId":"S","skill":"s","async":false},{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s"}]}`), t0, 8, nil)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"S"}) {
		t.Fatalf("released %v while S runs, want only S", got)
	}
	fx = e.OnResult(ok("S", 1), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("after S released %v, want [A B]", got)
	}
}

func TestRetryBackoff(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":4,"backoffMs":100}}]}`), t0, 8, nil)
	now := t0
	var delays []time.Duration
	for attempt := 1; attempt <= 3; attempt++ {
		fx := e.OnResult(fail("A", attempt, planbus.CategoryNetwork), now)
		if len(fx.Timers) != 1 || fx.Timers[0].Kind != TimerRetry || fx.Timers[0].Attempt != attempt+1 {
			t.Fatalf("attempt %d: timers %+v", attempt, fx.Timers)
		}
		delays = append(delays, fx.Timers[0].FireAt.Sub(now))
		if e.State().Tools[0].State != planbus.ToolRetrying {
			t.Fatalf("state %s, want retrying", e.State().Tools[0].State)
		}
		// An early or stale timer does nothing.
		if fx := e.OnTimer(Timer{Kind: TimerRetry, Index: 0, Attempt: attempt + 2}, now); len(fx.Releases) != 0 {
			t.Fatalf("stale timer released %v", fx.Releases)
		}
		now = fx.Timers[0].FireAt
		fx = e.OnTimer(fx.Timers[0], now)
		if len(fx.Releases) != 1 || fx.Releases[0].Attempt != attempt+1 {
			t.Fatalf("timer released %+v", fx.Releases)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if diff := cmp.Diff(want, delays); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
	fx := e.OnResult(fail("A", 4, planbus.CategoryNetwork), now)
	if fx.Done == nil || fx.Done.State != planbus.PlanFailed || fx.Done.Tools[0].Attempts != 4 {
		t.Fatalf("after last attempt: %+v", fx.Done)
	}
}

func TestNonRetryableFailsAtOnce(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s"}]}`), t0, 8, nil)
	fx := e.OnResult(fail("A", 1, planbus.CategoryInvalidInput), t0)
	if fx.Done == nil || fx.Done.Tools[0].Attempts != 1 || len(fx.Timers) != 0 {
		t.Fatalf("invalid input was retried: %+v", fx)
	}
}

func TestRequiredFailureSkipsDependents(t *testing.T) {
	p := mustPlan(t, `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"f","dependencies":["A"],"retryPolicy":{"maxAttempts":1}},
		{"toolId":"C","skill":"s","dependencies":["A"]},{"toolId":"D","skill":"s","dependencies":["B"]},{"toolId":"E","skill":"s","dependencies":["D"]},
		{"toolId":"F","skill":"s","dependencies":["C"]}]}`)
	e, _ := Start(p, t0, 8, nil)
	e.OnResult(ok("A", 1), t0)
	fx := e.OnResult(fail("B", 1, planbus.CategoryInternal), t0)
	res := fx.Done
	if res == nil || res.Success || !res.CanReplan || res.State != planbus.PlanFailed {
		t.Fatalf("result %+v, want failed with canReplan", res)
	}
	got := map[string]string{}
	for _, o := range res.Tools {
		got[o.ToolID] = string(o.State) + "/" + string(o.Reason)
	}
	want := map[string]string{"A": "succeeded/", "B": "failed/", "C": "cancelled/plan_failed",
		"D": "skipped/dependency_failed", "E": "skipped/dependency_failed", "F": "skipped/plan_failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool states (-want +got):\n%s", diff)
	}
	if !fx.Cancel {
		t.Error("running C was not cancelled")
	}
	if !slices.Equal(res.FailedTools, []string{"B"}) || !slices.Equal(res.FailedSkills, []string{"f"}) {
		t.Errorf("failed tools %v skills %v", res.FailedTools, res.FailedSkills)
	}
	if !strings.Contains(res.Error.Message, `required tool "B"`) {
		t.Errorf("error %q should name B", res.Error.Message)
	}
	// A late result for the cancelled C changes nothing.
	if fx := e.OnResult(ok("C", 1), t0); fx.Changed || fx.Done != nil {
		t.Errorf("late result changed the ended plan: %+v", fx)
	}
}

func TestOptionalFailureContinues(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","required":false,"retryPolicy":{"maxAttempts":1}},
		{"toolId":"B","skill":"s","dependencies":["A"],"input":{"a":{"$ref":"A"}}}]}`), t0, 8, nil)
	fx := e.OnResult(fail("A", 1, planbus.CategoryInternal), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("after optional failure released %v, want [B]", got)
	}
	fx = e.OnResult(ok("B", 1), t0)
	if fx.Done == nil || !fx.Done.Success || fx.Done.Tools[0].State != planbus.ToolFailed {
		t.Fatalf("result %+v, want success with A failed", fx.Done)
	}
}

func TestPlanTimeout(t *testing.T) {
	e, fx := Start(mustPlan(t, `{"timeoutMs":1000,"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]}]}`), t0, 8, nil)
	var timer Timer
	for _, tm := range fx.Timers {
		if tm.Kind == TimerPlanTimeout {
			timer = tm
		}
	}
	if !timer.FireAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("plan timer at %v, want %v", timer.FireAt, t0.Add(time.Second))
	}
	if fx := e.OnTimer(timer, t0.Add(500*time.Millisecond)); fx.Done != nil {
		t.Fatal("plan timed out early")
	}
	fx = e.OnTimer(timer, timer.FireAt)
	if fx.Done == nil || fx.Done.State != planbus.PlanTimeout || fx.Done.Error.Code != planbus.CodePlanTimeout || !fx.Done.CanReplan {
		t.Fatalf("result %+v", fx.Done)
	}
	if fx.Done.Tools[0].State != planbus.ToolCancelled || fx.Done.Tools[1].Reason != planbus.ReasonPlanTimeout {
		t.Errorf("tools %+v", fx.Done.Tools)
	}
}

func TestToolTimeoutState(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":1}}]}`), t0, 8, nil)
	fx := e.OnResult(&planbus.ToolResult{ToolID: "A", Attempt: 1, State: planbus.ToolTimeout,
		Error: &planbus.ErrorInfo{Code: planbus.CodeToolTimeout, Category: planbus.CategoryTimeout, Message: "Tool exceeded 5ms timeout"}}, t0)
	if fx.Done == nil || fx.Done.Tools[0].State != planbus.ToolTimeout || fx.Done.Error.Code != planbus.CodeToolTimeout {
		t.Fatalf("result %+v", fx.Done)
	}
}

func TestEmptyPlanSucceeds(t *testing.T) {
	_, fx := Start(mustPlan(t, `{"tools":[]}`), t0, 8, nil)
	if fx.Done == nil || !fx.Done.Success {
		t.Fatalf("empty plan: %+v", fx.Done)
	}
}

// TestRestoreContinuesIdentically stores the state after every step and
// restores a new engine from it: both must then behave the same.
func TestRestoreContinuesIdentically(t *testing.T) {
	p := mustPlan(t, `{"maxConcurrency":2,"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]},
		{"toolId":"C","skill":"s","dependencies":["A"],"required":false},{"toolId":"D","skill":"s","dependencies":["A"]},
		{"toolId":"E","skill":"s","dependencies":["B","C","D"],"async":false},{"toolId":"F","skill":"s"}]}`)
	e, fx := Start(p, t0, 8, nil)
	queue := ids(e, fx.Releases)
	step := 0
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		b, err := json.Marshal(e.State())
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		r, err := Restore(p, &st, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := ok(id, 1)
		if id == "C" {
			res = fail("C", 1, planbus.CategoryPermanent)
		}
		fx1, fx2 := e.OnResult(res, t0), r.OnResult(res, t0)
		if diff := cmp.Diff(fx1, fx2); diff != "" {
			t.Fatalf("step %d (%s): restored engine differs (-orig +restored):\n%s", step, id, diff)
		}
		e = r
		queue = append(queue, ids(e, fx1.Releases)...)
		step++
	}
	if !e.Done() || e.State().Status != planbus.PlanSucceeded {
		t.Fatalf("status %s", e.State().Status)
	}
}

func TestOutstanding(t *testing.T) {
	e, _ := Start(mustPlan(t, diamond), t0, 8, nil)
	e.OnResult(ok("A", 1), t0)
	e.OnResult(fail("B", 1, planbus.CategoryNetwork), t0)
	fx := e.Outstanding()
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"C"}) {
		t.Errorf("outstanding releases %v, want [C]", got)
	}
	var kinds []string
	for _, tm := range fx.Timers {
		kinds = append(kinds, tm.Kind)
	}
	if !slices.Equal(kinds, []string{TimerPlanTimeout, TimerRetry}) {
		t.Errorf("outstanding timers %v", kinds)
	}
}

// TestStoreLoadRoundTrip stores the state after every step in its compact
// form, loads it back with the results looked up by sequence, and checks
// that a restored engine then behaves exactly like the original.
func TestStoreLoadRoundTrip(t *testing.T) {
	p := mustPlan(t, `{"maxConcurrency":2,"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"],"retryPolicy":{"maxAttempts":2,"backoffMs":10}},
		{"toolId":"C","skill":"s","dependencies":["A"],"required":false,"retryPolicy":{"maxAttempts":1}},{"toolId":"D","skill":"s","dependencies":["B","C"]}]}`)
	results := map[uint64]*planbus.ToolResult{}
	var seq uint64
	e, fx := Start(p, t0, 8, nil)
	queue := ids(e, fx.Releases)
	now := t0
	failedB := false
	for len(queue) > 0 || e.st.Tools[1].State == planbus.ToolRetrying {
		var r *planbus.ToolResult
		if len(queue) == 0 { // B waits for its retry
			now = time.UnixMilli(e.st.Tools[1].RetryAt)
			fx = e.OnTimer(Timer{Kind: TimerRetry, Index: 1, Attempt: 2}, now)
			queue = append(queue, ids(e, fx.Releases)...)
			continue
		}
		id := queue[0]
		queue = queue[1:]
		i, _ := e.Index(id)
		r = ok(id, e.st.Tools[i].Attempt)
		r.WorkerID, r.DurationMs, r.StartedAt = "w-"+id, 1.5, now
		switch {
		case id == "C":
			r = fail("C", 1, planbus.CategoryInternal)
		case id == "B" && !failedB:
			r, failedB = fail("B", 1, planbus.CategoryNetwork), true
		}
		seq++
		results[seq] = r
		b, _ := json.Marshal(e.State().Store())
		var stored Stored
		if err := json.Unmarshal(b, &stored); err != nil {
			t.Fatal(err)
		}
		st, err := Load(p, &stored, func(s uint64) (*planbus.ToolResult, error) { return results[s], nil })
		if err != nil {
			t.Fatal(err)
		}
		restored, err := Restore(p, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		fx1, fx2 := e.OnResultSeq(r, seq, now), restored.OnResultSeq(r, seq, now)
		if diff := cmp.Diff(fx1, fx2); diff != "" {
			t.Fatalf("after %s: restored engine differs (-orig +restored):\n%s", id, diff)
		}
		queue = append(queue, ids(e, fx1.Releases)...)
	}
	if !e.Done() || e.State().Status != planbus.PlanSucceeded {
		t.Fatalf("status %s", e.State().Status)
	}
	b, _ := json.Marshal(e.State().Store())
	var stored Stored
	_ = json.Unmarshal(b, &stored)
	st, err := Load(p, &stored, func(s uint64) (*planbus.ToolResult, error) { return results[s], nil })
	if err != nil {
		t.Fatal(err)
	}
	restored, _ := Restore(p, st, nil)
	if diff := cmp.Diff(e.Result(), restored.Result()); diff != "" {
		t.Errorf("execution result from the stored state differs (-orig +restored):\n%s", diff)
	}
}

func TestStoredJSONRoundTrip(t *testing.T) {
	s := &Stored{PlanID: "p", RequestID: "r", Status: planbus.PlanRunning, MaxConcurrency: 2, StartedAt: 1000, Deadline: 61000,
		Tools: []StoredTool{
			{State: planbus.ToolPending},
			{State: planbus.ToolRunning, Attempt: 2, At: 1005},
			{State: planbus.ToolSucceeded, Attempt: 1, Result: 3, At: 1000},
			{State: planbus.ToolSucceeded, Attempt: 1, Result: 77, At: 1010},
			{State: planbus.ToolSkipped, Reason: planbus.ReasonDependencyFailed, At: 1011},
			{State: planbus.ToolCancelled, Attempt: 1, Reason: planbus.ReasonPlanTimeout, At: 1012,
				Error: &planbus.ErrorInfo{Code: planbus.CodePlanTimeout, Message: `a "quoted" message`, Category: planbus.CategoryTimeout}},
		}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) || !strings.Contains(string(b), `"tools":[["p",0,0,null],["r",2,0,5],["s",1,3,0],["s",1,77,10],["k",0,0,11,"dependency_failed"]`) {
		t.Fatalf("encoding %s", b)
	}
	var back Stored
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, &back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := json.Unmarshal([]byte(`{"tools":[["x",0,0,0]]}`), &back); err == nil {
		t.Error("unknown state code accepted")
	}
}

func TestVerdicts(t *testing.T) {
	e, _ := Start(mustPlan(t, diamond), t0, 8, nil)
	if v := e.ResultVerdict(ok("A", 1)); v != Applies {
		t.Errorf("running A: %v", v)
	}
	if v := e.ResultVerdict(ok("B", 1)); v != Ahead {
		t.Errorf("B before its release: %v, want Ahead", v)
	}
	if v := e.ResultVerdict(ok("Z", 1)); v != Past {
		t.Errorf("unknown tool: %v, want Past", v)
	}
	e.OnResult(ok("A", 1), t0)
	if v := e.ResultVerdict(ok("A", 1)); v != Past {
		t.Errorf("A again: %v, want Past", v)
	}
	e.OnResult(fail("B", 1, planbus.CategoryNetwork), t0)
	if v := e.TimerVerdict(Timer{Kind: TimerRetry, Index: 1, Attempt: 2}); v != Applies {
		t.Errorf("B's retry: %v", v)
	}
	if v := e.TimerVerdict(Timer{Kind: TimerRetry, Index: 2, Attempt: 2}); v != Ahead {
		t.Errorf("a retry of C, which has not failed here: %v, want Ahead", v)
	}
	if v := e.ResultVerdict(ok("B", 2)); v != Ahead {
		t.Errorf("B's second attempt before its release: %v, want Ahead", v)
	}
	e.OnTimer(Timer{Kind: TimerRetry, Index: 1, Attempt: 2}, t0)
	if v := e.TimerVerdict(Timer{Kind: TimerRetry, Index: 1, Attempt: 2}); v != Past {
		t.Errorf("B's retry again: %v, want Past", v)
	}
	if v := e.ResultVerdict(fail("B", 1, planbus.CategoryNetwork)); v != Past {
		t.Errorf("B's first attempt again: %v, want Past", v)
	}
}

func TestFallbackTakesTheSlotWhenAttemptsRunOut(t *testing.T) {
	p := mustPlan(t, `{"tools":[{"toolId":"A","skill":"primary","retryPolicy":{"maxAttempts":2,"backoffMs":10},
		"fallback":{"skill":"backup","input":{"via":"backup"},"retryPolicy":{"maxAttempts":2,"backoffMs":10}}},
		{"toolId":"B","skill":"s","dependencies":["A"]}]}`)
	e, _ := Start(p, t0, 8, nil)
	fx := e.OnResult(fail("A", 1, planbus.CategoryNetwork), t0)
	if len(fx.Timers) != 1 || fx.Timers[0].Attempt != 2 {
		t.Fatalf("attempt 1: %+v, want a retry of the tool itself", fx.Timers)
	}
	e.OnTimer(fx.Timers[0], fx.Timers[0].FireAt)
	fx = e.OnResult(fail("A", 2, planbus.CategoryNetwork), t0)
	if len(fx.Releases) != 1 || fx.Releases[0].Attempt != 3 || len(fx.Timers) != 0 {
		t.Fatalf("attempt 2: releases %+v timers %+v, want attempt 3 at once", fx.Releases, fx.Timers)
	}
	if fx.Applied[0].Final != true {
		t.Error("the primary skill's last attempt should count as its retries exhausted")
	}
	var skills []string
	for _, ev := range fx.Events {
		if ev.Type == planbus.EventToolReleased {
			skills = append(skills, ev.Skill)
		}
	}
	if !slices.Equal(skills, []string{"backup"}) {
		t.Errorf("released skills %v, want [backup]", skills)
	}
	fx = e.OnResult(ok("A", 3), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("after the fallback succeeded released %v", got)
	}
	fx = e.OnResult(ok("B", 1), t0)
	if fx.Done == nil || !fx.Done.Success || fx.Done.Tools[0].Skill != "backup" || fx.Done.Tools[0].Attempts != 3 {
		t.Fatalf("result %+v", fx.Done.Tools[0])
	}

	// A permanent error skips the tool's remaining attempts; the fallback's
	// own failure ends the tool.
	e, _ = Start(p, t0, 8, nil)
	fx = e.OnResult(fail("A", 1, planbus.CategoryPermanent), t0)
	if len(fx.Releases) != 1 || fx.Releases[0].Attempt != 3 {
		t.Fatalf("permanent error: releases %+v, want the fallback's first attempt (3)", fx.Releases)
	}
	fx = e.OnResult(fail("A", 3, planbus.CategoryPermanent), t0)
	if fx.Done == nil || fx.Done.State != planbus.PlanFailed || !slices.Equal(fx.Done.FailedSkills, []string{"backup"}) {
		t.Fatalf("result %+v", fx.Done)
	}
}

// AppendStored writes what Store().MarshalJSON() writes, for any state,
// into the buffer it is given.
func TestAppendStoredIsStoreMarshalled(t *testing.T) {
	for s, c := range stateCodes {
		if stateCode(s) != c {
			t.Errorf("stateCode(%q) = %q, want %q", s, stateCode(s), c)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		states := []planbus.ToolState{planbus.ToolPending, planbus.ToolRunning, planbus.ToolRetrying, planbus.ToolSucceeded, planbus.ToolFailed,
			planbus.ToolTimeout, planbus.ToolSkipped, planbus.ToolCancelled, planbus.ToolWaitingApproval}
		st := &State{PlanID: "p", RequestID: rapid.StringMatching(`[a-z]{0,3}`).Draw(t, "req"), Status: planbus.PlanRunning,
			MaxConcurrency: rapid.IntRange(1, 9).Draw(t, "mc"), StartedAt: 1000, Deadline: 9000,
			FinishedAt: rapid.Int64Range(0, 5000).Draw(t, "fin")}
		if rapid.Bool().Draw(t, "traced") {
			st.Trace = map[string]string{"traceparent": "00-x-y-01"}
		}
		if rapid.Bool().Draw(t, "error") {
			st.Error = &planbus.ErrorInfo{Code: "C", Message: `m "q"`, Category: planbus.CategoryInternal}
		}
		for i := range rapid.IntRange(0, 30).Draw(t, "tools") {
			ts := ToolState{ID: fmt.Sprint(i), State: rapid.SampledFrom(states).Draw(t, "state"),
				Attempt: rapid.IntRange(0, 5).Draw(t, "attempt"), ReleasedAt: rapid.Int64Range(0, 3000).Draw(t, "rel"),
				RetryAt: rapid.Int64Range(0, 3000).Draw(t, "retry"), FinishedAt: rapid.Int64Range(0, 3000).Draw(t, "end"),
				ResultSeq: rapid.Uint64Range(0, 3).Draw(t, "seq"), Reason: rapid.SampledFrom([]planbus.Reason{"", "why", `"q"`}).Draw(t, "reason"),
				Approved: rapid.Bool().Draw(t, "approved"), Reused: rapid.Bool().Draw(t, "reused")}
			if rapid.Bool().Draw(t, "toolErr") {
				ts.Error = &planbus.ErrorInfo{Code: "E", Message: "x", Category: planbus.CategoryNetwork}
			}
			st.Tools = append(st.Tools, ts)
		}
		want, err := st.Store().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		buf := []byte("garbage left by the last write")
		got, err := st.AppendStored(buf[:0])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("AppendStored\n%s\nStore().MarshalJSON\n%s", got, want)
		}
	})
}

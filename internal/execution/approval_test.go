package execution

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus"
)

func eventTypes(fx Effects) []string {
	var out []string
	for _, ev := range fx.Events {
		out = append(out, string(ev.Type)+" "+ev.ToolID)
	}
	return out
}

func approve(i int) Timer { return Timer{Kind: TimerApprove, Index: i, Reason: "looks fine"} }
func reject(i int) Timer  { return Timer{Kind: TimerReject, Index: i, Reason: "not today"} }

// roundTrip stores an engine's state in its compact form and rebuilds an
// engine from it, as a dispatcher that takes the plan over does.
func roundTrip(t *testing.T, e *Engine, results map[uint64]*planbus.ToolResult) *Engine {
	t.Helper()
	b, err := json.Marshal(e.State().Store())
	if err != nil {
		t.Fatal(err)
	}
	var stored Stored
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	st, err := Load(e.Plan(), &stored, func(s uint64) (*planbus.ToolResult, error) { return results[s], nil })
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(e.Plan(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A tool with an approval step waits when it becomes ready, holding no
// slot (the plan's other tools go on); it is released once approved, and
// its dependents after it. A dispatcher that rebuilds the engine while it
// waits finds it waiting.
func TestApprovalHoldsAToolUntilApproved(t *testing.T) {
	p := mustPlan(t, `{"maxConcurrency":1,"tools":[{"toolId":"A","skill":"s"},
		{"toolId":"B","skill":"deploy","dependencies":["A"],"approval":{"prompt":"Deploy to production?"}},
		{"toolId":"C","skill":"s","dependencies":["B"]},{"toolId":"D","skill":"s"}]}`)
	e, fx := Start(p, t0, 8, nil)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("released %v, want [A]", got)
	}
	fx = e.OnResult(ok("A", 1), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"D"}) {
		t.Fatalf("after A: released %v, want [D] (B waits without a slot)", got)
	}
	if diff := cmp.Diff([]string{"tool.succeeded A", "tool.waiting B", "tool.released D"}, eventTypes(fx)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if ev := fx.Events[1]; ev.Message != "Deploy to production?" || ev.Skill != "deploy" || ev.Attempt != 0 {
		t.Errorf("waiting event %+v, want the prompt", ev)
	}
	if !fx.Changed || e.State().Tools[1].State != planbus.ToolWaitingApproval {
		t.Fatalf("B is %s, want waiting_approval", e.State().Tools[1].State)
	}
	fx = e.OnResult(ok("D", 1), t0)
	if len(fx.Releases) != 0 || e.Done() {
		t.Fatalf("after D: released %v, done %v; want nothing until B is approved", ids(e, fx.Releases), e.Done())
	}
	// Taken over by another dispatcher while it waits.
	e = roundTrip(t, e, nil)
	if e.State().Tools[1].State != planbus.ToolWaitingApproval {
		t.Fatalf("restored B is %s", e.State().Tools[1].State)
	}
	if v := e.TimerVerdict(approve(1)); v != Applies {
		t.Errorf("approval of a waiting tool: %v, want Applies", v)
	}
	fx = e.OnTimer(approve(1), t0.Add(time.Hour))
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("after the approval: released %v, want [B]", got)
	}
	if diff := cmp.Diff([]string{"tool.approved B", "tool.released B"}, eventTypes(fx)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if fx.Events[0].Message != "looks fine" {
		t.Errorf("approved event says %q, want the reason", fx.Events[0].Message)
	}
	if v := e.TimerVerdict(approve(1)); v != Past {
		t.Errorf("the approval again: %v, want Past", v)
	}
	if fx := e.OnTimer(reject(1), t0); fx.Changed || len(fx.Events) != 0 {
		t.Errorf("a rejection after the approval changed %+v", fx)
	}
	fx = e.OnResult(ok("B", 1), t0)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"C"}) {
		t.Fatalf("after B: released %v, want [C]", got)
	}
	fx = e.OnResult(ok("C", 1), t0)
	if fx.Done == nil || !fx.Done.Success {
		t.Fatalf("plan did not succeed: %+v", fx.Done)
	}
}

// An approval that comes while every slot is taken waits for one, and a
// dispatcher that takes over in between still knows it was approved.
func TestApprovedToolWaitsForASlot(t *testing.T) {
	p := mustPlan(t, `{"maxConcurrency":1,"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"go?"}},{"toolId":"B","skill":"s"}]}`)
	e, fx := Start(p, t0, 8, nil)
	if got := ids(e, fx.Releases); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("released %v, want [B]", got)
	}
	fx = e.OnTimer(approve(0), t0)
	if len(fx.Releases) != 0 || !fx.Changed || !e.State().Tools[0].Approved || e.State().Tools[0].State != planbus.ToolPending {
		t.Fatalf("approved with no slot free: released %v, state %+v", ids(e, fx.Releases), e.State().Tools[0])
	}
	if v := e.TimerVerdict(approve(0)); v != Past {
		t.Errorf("approval of an approved tool: %v, want Past", v)
	}
	restored := roundTrip(t, e, nil)
	fx1, fx2 := e.OnResult(ok("B", 1), t0), restored.OnResult(ok("B", 1), t0)
	if diff := cmp.Diff(fx1, fx2); diff != "" {
		t.Fatalf("restored engine differs (-orig +restored):\n%s", diff)
	}
	if got := ids(e, fx1.Releases); !slices.Equal(got, []string{"A"}) {
		t.Errorf("after B: released %v, want the approved A", got)
	}
}

// A rejection fails the tool without running it, code REJECTED: a
// required one fails the plan (not to be replanned) and skips its
// dependents; an optional one lets them run. No skill is blamed.
func TestRejection(t *testing.T) {
	t.Run("required", func(t *testing.T) {
		e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"go?"},"fallback":{"skill":"t"}},
			{"toolId":"B","skill":"s","dependencies":["A"]},{"toolId":"C","skill":"s"}]}`), t0, 8, nil)
		fx := e.OnTimer(reject(0), t0.Add(time.Second))
		if fx.Done == nil {
			t.Fatal("the plan did not end")
		}
		res := fx.Done
		if res.State != planbus.PlanFailed || res.CanReplan || res.Error.Code != planbus.CodeRejected || res.Error.Category != planbus.CategoryPermanent {
			t.Errorf("result %s canReplan %v error %+v; want failed, REJECTED, no replan", res.State, res.CanReplan, res.Error)
		}
		want := map[string]string{"A": "failed/", "B": "skipped/dependency_failed", "C": "cancelled/plan_failed"}
		got := map[string]string{}
		for _, o := range res.Tools {
			got[o.ToolID] = string(o.State) + "/" + string(o.Reason)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
		if a := res.Tools[0]; a.Attempts != 0 || a.Error.Message != "rejected by a person: not today" {
			t.Errorf("A: attempts %d, error %+v", a.Attempts, a.Error)
		}
		if len(fx.Applied) != 0 || len(fx.Releases) != 0 {
			t.Errorf("applied %v, released %v: a rejected tool never ran", fx.Applied, fx.Releases)
		}
		if types := eventTypes(fx); types[0] != "tool.rejected A" {
			t.Errorf("events %v", types)
		}
	})
	t.Run("optional", func(t *testing.T) {
		e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s","required":false,"approval":{"prompt":"go?"}},
			{"toolId":"B","skill":"s","dependencies":["A"]}]}`), t0, 8, nil)
		fx := e.OnTimer(reject(0), t0)
		if got := ids(e, fx.Releases); !slices.Equal(got, []string{"B"}) || e.Done() {
			t.Fatalf("released %v, done %v; want B to run", got, e.Done())
		}
		fx = e.OnResult(ok("B", 1), t0)
		if fx.Done == nil || !fx.Done.Success {
			t.Errorf("plan %+v, want success", fx.Done)
		}
	})
}

// The plan's clock stands while a tool waits for approval: a person may
// take longer than the plan's timeout. The timeout that comes meanwhile
// changes nothing; the decision moves the deadline on by the time waited
// (kept across a restore), and the plan times out at the new deadline. A
// decision that arrives before the tool waits is ahead of the state; one
// for no tool is past.
func TestWaitingToolsAndThePlanTimeout(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"timeoutMs":1000,"tools":[{"toolId":"A","skill":"s"},
		{"toolId":"B","skill":"s","dependencies":["A"],"approval":{"prompt":"go?"}}]}`), t0, 8, nil)
	if v := e.TimerVerdict(approve(1)); v != Ahead {
		t.Errorf("approval of a tool not yet waiting: %v, want Ahead", v)
	}
	if v := e.TimerVerdict(approve(7)); v != Past {
		t.Errorf("approval of no tool: %v, want Past", v)
	}
	if fx := e.OnTimer(approve(1), t0); fx.Changed {
		t.Error("an approval before the tool waits changed the state")
	}
	e.OnResult(ok("A", 1), t0.Add(200*time.Millisecond)) // B waits from +200ms
	if fx := e.OnTimer(Timer{Kind: TimerPlanTimeout}, t0.Add(time.Second)); fx.Done != nil || fx.Changed {
		t.Fatalf("the timeout while B waits: %+v, want nothing", fx)
	}
	if out := e.Outstanding(); len(out.Timers) != 0 {
		t.Errorf("outstanding timers while the clock stands: %+v", out.Timers)
	}
	e = roundTrip(t, e, nil)
	fx := e.OnTimer(approve(1), t0.Add(5200*time.Millisecond)) // waited 5 s
	want := t0.Add(6 * time.Second)
	if len(fx.Timers) != 1 || fx.Timers[0].Kind != TimerPlanTimeout || !fx.Timers[0].FireAt.Equal(want) {
		t.Fatalf("timers after the approval %+v, want the timeout at +6s", fx.Timers)
	}
	if fx := e.OnTimer(Timer{Kind: TimerPlanTimeout}, t0.Add(5900*time.Millisecond)); fx.Done != nil {
		t.Fatalf("the plan timed out at +5.9s, before its moved deadline")
	}
	fx = e.OnTimer(Timer{Kind: TimerPlanTimeout}, want)
	if fx.Done == nil || fx.Done.State != planbus.PlanTimeout {
		t.Fatalf("result %+v, want timeout", fx.Done)
	}
	if b := fx.Done.Tools[1]; b.State != planbus.ToolCancelled || b.Reason != planbus.ReasonPlanTimeout {
		t.Errorf("B %s/%s, want cancelled/plan_timeout", b.State, b.Reason)
	}
}

// The plan's clock stands for approvals only within its life
// (StartWithin, the store's retention less a margin): the timer set when
// the clock stops fires at the end of it and times the plan out though a
// tool still waits, so no plan outlives its own state.
func TestApprovalWaitsWithinThePlansLife(t *testing.T) {
	e, fx := StartWithin(mustPlan(t, `{"timeoutMs":1000,"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"go?"}}]}`),
		t0, 8, nil, nil, 10*time.Second)
	end := t0.Add(10 * time.Second)
	var timeouts []Timer
	for _, tm := range fx.Timers {
		if tm.Kind == TimerPlanTimeout {
			timeouts = append(timeouts, tm)
		}
	}
	if len(timeouts) != 1 || !timeouts[0].FireAt.Equal(end) {
		t.Fatalf("plan timeouts at the start %+v, want one, at the end of the plan's life (+10s)", timeouts)
	}
	if out := e.Outstanding(); len(out.Timers) != 1 || !out.Timers[0].FireAt.Equal(end) {
		t.Errorf("outstanding %+v, want the timeout at +10s", out.Timers)
	}
	if fx := e.OnTimer(Timer{Kind: TimerPlanTimeout}, t0.Add(time.Second)); fx.Done != nil {
		t.Fatal("the plan's own timeout ended it while A waits")
	}
	fx = e.OnTimer(Timer{Kind: TimerPlanTimeout}, end)
	if fx.Done == nil || fx.Done.State != planbus.PlanTimeout || !strings.Contains(fx.Done.Error.Message, "waited for approval") {
		t.Fatalf("at the end of its life: %+v, want a timeout saying it waited for approval", fx.Done)
	}
	if a := fx.Done.Tools[0]; a.State != planbus.ToolSkipped {
		t.Errorf("A %s, want skipped", a.State)
	}
}

package execution

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus"
)

// A cancel ends a running plan at once: tools in flight (running, or
// waiting for a retry) are cancelled and the workers told, tools not yet
// released are skipped, finished tools keep their state, and the result
// can not be replanned.
func TestCancelEndsThePlanAtOnce(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]},
		{"toolId":"C","skill":"s","dependencies":["A"]},{"toolId":"D","skill":"s","dependencies":["B","C"]}]}`), t0, 8, nil)
	e.OnResult(ok("A", 1), t0)
	e.OnResult(fail("C", 1, planbus.CategoryNetwork), t0) // C waits for its retry
	at := t0.Add(2 * time.Second)
	fx := e.Cancel("  the user changed their mind ", at)
	if fx.Done == nil || !fx.Changed || !fx.Cancel {
		t.Fatalf("effects %+v, want the state changed, a result and the workers told", fx)
	}
	res := fx.Done
	if res.State != planbus.PlanCancelled || res.Success || res.CanReplan {
		t.Errorf("result %s success %v canReplan %v, want cancelled, no replan", res.State, res.Success, res.CanReplan)
	}
	want := &planbus.ErrorInfo{Code: planbus.CodeCancelled, Category: planbus.CategoryCancelled, Message: "cancelled on request: the user changed their mind"}
	if diff := cmp.Diff(want, res.Error); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	got := map[string]string{}
	for _, o := range res.Tools {
		got[o.ToolID] = string(o.State) + "/" + string(o.Reason)
	}
	wantStates := map[string]string{"A": "succeeded/", "B": "cancelled/cancelled", "C": "cancelled/cancelled", "D": "skipped/cancelled"}
	if diff := cmp.Diff(wantStates, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if res.Tools[1].Error == nil || res.Tools[1].Error.Code != planbus.CodeCancelled {
		t.Errorf("B's error %+v, want the cancel's", res.Tools[1].Error)
	}
	if len(res.FailedTools) != 0 || len(res.FailedSkills) != 0 {
		t.Errorf("failed tools %v skills %v: a cancel blames no skill", res.FailedTools, res.FailedSkills)
	}
	if res.FinishedAt != at || len(fx.Releases) != 0 || len(fx.Timers) != 0 {
		t.Errorf("finished %v, releases %v, timers %v", res.FinishedAt, fx.Releases, fx.Timers)
	}
	var types []string
	for _, ev := range fx.Events {
		types = append(types, string(ev.Type)+" "+ev.ToolID)
	}
	wantEvents := []string{"tool.cancelled B", "tool.cancelled C", "tool.skipped D", "plan.cancelled "}
	if diff := cmp.Diff(wantEvents, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// After the cancel, nothing moves: late results, timers, another cancel.
	for name, fx := range map[string]Effects{
		"B's late result": e.OnResult(ok("B", 1), at),
		"C's retry":       e.OnTimer(Timer{Kind: TimerRetry, Index: 2, Attempt: 2}, at),
		"a second cancel": e.Cancel("again", at),
		"a cancel timer":  e.OnTimer(Timer{Kind: TimerCancel, Reason: "again"}, at),
	} {
		if fx.Changed || fx.Done != nil || len(fx.Events) > 0 || fx.Cancel {
			t.Errorf("%s changed the ended plan: %+v", name, fx)
		}
	}
}

// A cancel of a plan that ended on its own changes nothing.
func TestCancelOfAnEndedPlanIsANoOp(t *testing.T) {
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s"}]}`), t0, 8, nil)
	e.OnResult(ok("A", 1), t0)
	before, _ := json.Marshal(e.State())
	fx := e.Cancel("late", t0.Add(time.Second))
	after, _ := json.Marshal(e.State())
	if fx.Changed || fx.Done != nil || len(fx.Events) != 0 || string(before) != string(after) {
		t.Fatalf("cancel of a succeeded plan: effects %+v, state %s -> %s", fx, before, after)
	}
}

// The cancel arrives as a durable timer message: it survives the trip
// through JSON and carries its reason, cut to MaxCancelReason.
func TestCancelTimerMessage(t *testing.T) {
	long := strings.Repeat("é", MaxCancelReason)
	m := CancelMessage("p-1", long, t0)
	if m.MsgID() != "p-1/cancel" || m.Kind != TimerCancel || m.FireAt != t0.UnixMilli() {
		t.Fatalf("message %+v id %s", m, m.MsgID())
	}
	data, _ := json.Marshal(m)
	var back TimerMessage
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	e, _ := Start(mustPlan(t, `{"tools":[{"toolId":"A","skill":"s"}]}`), t0, 8, nil)
	fx := e.OnTimer(back.Timer(), t0)
	if fx.Done == nil || fx.Done.State != planbus.PlanCancelled {
		t.Fatalf("result %+v, want cancelled", fx.Done)
	}
	msg := fx.Done.Error.Message
	if len(msg) > len("cancelled on request: ")+MaxCancelReason+len("…") || !strings.HasSuffix(msg, "é…") {
		t.Errorf("message of %d bytes ending %q: want the reason cut to %d bytes on a rune boundary", len(msg), msg[len(msg)-8:], MaxCancelReason)
	}
	for _, tm := range []Timer{{Kind: TimerRetry, Index: 2, Attempt: 3}, {Kind: TimerPlanTimeout, FireAt: time.UnixMilli(1500)}} {
		if id := tm.Message("p").MsgID(); id != map[string]string{TimerRetry: "p/retry/2/3", TimerPlanTimeout: "p/timeout/1500"}[tm.Kind] {
			t.Errorf("%s timer id %s", tm.Kind, id)
		}
	}
}

// A cancelled plan's state survives the store like any other, so a
// dispatcher that rebuilds it sees it ended.
func TestCancelledStateRestores(t *testing.T) {
	p := mustPlan(t, `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]}]}`)
	e, _ := Start(p, t0, 8, nil)
	e.Cancel("", t0)
	data, err := e.State().Store().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored Stored
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	st, err := Load(p, &stored, func(uint64) (*planbus.ToolResult, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(p, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Done() || r.Result().State != planbus.PlanCancelled || r.Result().Tools[0].Reason != planbus.ReasonCancelled {
		t.Fatalf("restored %+v", r.Result())
	}
	if fx := r.Outstanding(); fx.Done == nil || len(fx.Releases) > 0 {
		t.Errorf("outstanding %+v: want only the result", fx)
	}
	if v := r.TimerVerdict(Timer{Kind: TimerCancel}); v != Past {
		t.Errorf("cancel of the cancelled plan: %v, want Past", v)
	}
}

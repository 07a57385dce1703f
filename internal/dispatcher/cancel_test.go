package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/execution"
)

// publishCancel puts the durable cancel of a plan on its timers subject,
// as a planner does.
func (h *harness) publishCancel(planID, reason string) {
	h.t.Helper()
	m := execution.CancelMessage(planID, reason, time.Now())
	data, _ := json.Marshal(m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.conn.JS.Publish(ctx, bus.TimerSubject(planID), data, jetstream.WithMsgID(m.MsgID())); err != nil {
		h.t.Fatal(err)
	}
}

// A cancel ends a running plan in the dispatcher: the running call is
// stopped on its worker, the tool cancelled, the pending one skipped.
func TestCancelCommandEndsARunningPlan(t *testing.T) {
	h := start(t, opts{})
	res := h.submit(`{"planId":"cx1","tools":[{"toolId":"P","skill":"probe","input":{"ms":60000}},
		{"toolId":"Q","skill":"echo","dependencies":["P"]}]}`, time.Minute, nil)
	<-h.probe.started
	h.publishCancel("cx1", "enough")
	select {
	case <-h.probe.finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the running call was not stopped")
	}
	r := <-res
	if r == nil || r.State != planbus.PlanCancelled || r.Error == nil || r.Error.Message != "cancelled on request: enough" {
		t.Fatalf("result %+v, want cancelled with the reason", r)
	}
	if r.Tools[0].State != planbus.ToolCancelled || r.Tools[1].State != planbus.ToolSkipped || r.Tools[1].Reason != planbus.ReasonCancelled {
		t.Errorf("tools %+v", r.Tools)
	}
}

// A cancel that arrives before its plan has started waits for it: the
// plan, once it starts, is cancelled.
func TestCancelCommandBeforeItsPlanWaitsForIt(t *testing.T) {
	h := start(t, opts{})
	h.publishCancel("early", "")
	// The cancel is delivered with no plan to apply it to, and handed
	// back: wait until it has been delivered at least once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := h.conn.JS.Consumer(ctx, bus.StreamTimers, consumerOf(bus.ConsumerDispatcherTimers, "early"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Delivered.Stream >= 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the cancel was never delivered")
		case <-time.After(10 * time.Millisecond):
		}
	}
	r, _ := h.run(`{"planId":"early","tools":[{"toolId":"P","skill":"probe","input":{"ms":60000}}]}`, time.Minute)
	if r.State != planbus.PlanCancelled || r.Tools[0].State != planbus.ToolCancelled {
		t.Fatalf("result %s, tool %s: want the plan cancelled once it started", r.State, r.Tools[0].State)
	}
}

// A running plan's timeout timer waits in the TIMERS stream as a message
// schedule, which the server turns into a timer on the plan's subject when
// it is due: not as a delivery its consumer holds unacknowledged until
// then. Held deliveries cost the server on every acknowledgement of the
// consumer (tens of thousands of them, at a rate above what a node could
// take, brought it down). When the plan ends first, the schedule is
// removed by its literal subject.
func TestARunningPlansTimeoutWaitsAsAScheduleNotADelivery(t *testing.T) {
	h := start(t, opts{})
	deletes, err := h.conn.NC.SubscribeSync("$JS.API.STREAM.MSG.DELETE." + bus.StreamTimers)
	if err != nil {
		t.Fatal(err)
	}
	purges, err := h.conn.NC.SubscribeSync("$JS.API.STREAM.PURGE." + bus.StreamTimers)
	if err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	res := h.submit(`{"planId":"waits","tools":[{"toolId":"A","skill":"probe","approval":{"prompt":"go?"}}]}`, time.Minute, events.add)
	events.waitEvent(t, planbus.EventToolWaiting, "A")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := h.conn.JS.Stream(ctx, bus.StreamTimers)
	if err != nil {
		t.Fatal(err)
	}
	var sched *jetstream.RawStreamMsg
	for {
		if sched, err = st.GetLastMsgForSubject(ctx, bus.TimeoutScheduleSubject("waits")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the running plan's timeout was never scheduled: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := sched.Header.Get(jetstream.ScheduleTargetHeader); got != bus.TimerSubject("waits") {
		t.Errorf("the schedule targets %q, want %q", got, bus.TimerSubject("waits"))
	}
	at, ok := strings.CutPrefix(sched.Header.Get(jetstream.ScheduleHeader), "@at ")
	due, perr := time.Parse(time.RFC3339Nano, at)
	if !ok || perr != nil || time.Until(due) < 30*time.Second {
		t.Errorf("the schedule is %q, want @at the plan's timeout, a minute from its start", sched.Header.Get(jetstream.ScheduleHeader))
	}
	cons, err := h.conn.JS.Consumer(ctx, bus.StreamTimers, consumerOf(bus.ConsumerDispatcherTimers, "waits"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Stream != 0 || info.NumAckPending != 0 {
		t.Errorf("the timers consumer delivered %d and holds %d unacknowledged: a timer not due was delivered",
			info.Delivered.Stream, info.NumAckPending)
	}
	h.publishDecision("waits", 0, true, "")
	if r := <-res; r == nil || !r.Success {
		t.Fatalf("result %+v", r)
	}
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the ended plan's timers stay: %+v", info.State)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if m, err := deletes.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("a timer was deleted by its sequence, which a restarted server may have given to another: %s", m.Data)
	}
	m, err := purges.NextMsg(time.Second)
	if err != nil {
		t.Fatal("no purge of the schedule was seen")
	}
	var req struct {
		Filter string `json:"filter"`
	}
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Filter != bus.TimeoutScheduleSubject("waits") {
		t.Errorf("purged %s, want the plan's schedule by its literal subject", m.Data)
	}
}

// A plan that ends within the dispatcher's grace (a second by default)
// never stores its timeout: its message's acknowledgement waited that
// long, and by then the plan had ended, so there was nothing to schedule
// (and nothing to purge).
func TestAPlanThatEndsWithinTheGraceStoresNoTimeout(t *testing.T) {
	h := start(t, opts{})
	if r, _ := h.run(`{"planId":"quick","tools":[{"toolId":"A","skill":"probe"}]}`, time.Minute); r == nil || !r.Success {
		t.Fatalf("result %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := h.conn.JS.Consumer(ctx, bus.StreamPlans, consumerOf(bus.ConsumerDispatcherPlans, "quick"))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the plan message acknowledged", func() (bool, string) {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.AckFloor.Stream >= 1 && info.NumAckPending == 0, fmt.Sprintf("ack floor %d, %d pending", info.AckFloor.Stream, info.NumAckPending)
	})
	st, err := h.conn.JS.Stream(ctx, bus.StreamTimers)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.LastSeq; n != 0 {
		t.Errorf("the timers stream stored %d messages for a plan that ended within the grace", n)
	}
}

package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
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

// The timeout timer of a plan that ends first is removed from the timers
// work queue by acknowledging the delivery that postponed it, not by a
// delete or purge through the JetStream API.
func TestAnEndedPlansTimeoutTimerIsAcknowledged(t *testing.T) {
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
	res := h.submit(`{"planId":"acked","tools":[{"toolId":"A","skill":"probe","approval":{"prompt":"go?"}}]}`, time.Minute, events.add)
	events.waitEvent(t, planbus.EventToolWaiting, "A")
	// Wait until the timeout timer (due in a minute) has been delivered,
	// and so postponed, before letting the plan end.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := h.conn.JS.Consumer(ctx, bus.StreamTimers, consumerOf(bus.ConsumerDispatcherTimers, "acked"))
	if err != nil {
		t.Fatal(err)
	}
	timers := func() *jetstream.ConsumerInfo {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	for timers().Delivered.Stream < 1 {
		select {
		case <-ctx.Done():
			t.Fatal("the timeout timer was never delivered")
		case <-time.After(10 * time.Millisecond):
		}
	}
	h.publishDecision("acked", 0, true, "")
	if r := <-res; r == nil || !r.Success {
		t.Fatalf("result %+v", r)
	}
	for {
		s, err := h.conn.JS.Stream(ctx, bus.StreamTimers)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().State.Msgs == 0 && timers().NumAckPending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the ended plan's timers stay: %+v", s.CachedInfo().State)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if m, err := deletes.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("a timer was deleted through the API: %s", m.Data)
	}
	if m, err := purges.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("a timer was purged through the API: %s", m.Data)
	}
}

package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/execution"
)

// publishDecision puts a person's decision on a plan's tool on its timers
// subject, as a planner does.
func (h *harness) publishDecision(planID string, index int, approve bool, reason string) {
	h.t.Helper()
	m := execution.ApprovalMessage(planID, index, approve, reason, time.Now())
	data, _ := json.Marshal(m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.conn.JS.Publish(ctx, bus.TimerSubject(planID), data, jetstream.WithMsgID(m.MsgID())); err != nil {
		h.t.Fatal(err)
	}
}

// waitEvent waits until the log holds an event of type typ for tool id.
func (l *eventLog) waitEvent(t *testing.T, typ planbus.EventType, id string) planbus.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if evs := l.of(typ, id); len(evs) > 0 {
			return evs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event of %q within 30s", typ, id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A tool with an approval step waits in the dispatcher, across a
// dispatcher restart, until the approve command releases it; its
// dependent runs after it.
func TestApprovalWaitsAcrossADispatcherRestart(t *testing.T) {
	h := start(t, opts{})
	events := &eventLog{}
	res := h.submit(`{"planId":"ap1","tools":[{"toolId":"A","skill":"probe"},
		{"toolId":"B","skill":"probe","dependencies":["A"],"approval":{"prompt":"ship it?"}},
		{"toolId":"C","skill":"probe","dependencies":["B"]}]}`, time.Minute, events.add)
	if ev := events.waitEvent(t, planbus.EventToolWaiting, "B"); ev.Message != "ship it?" {
		t.Errorf("waiting event says %q, want the prompt", ev.Message)
	}
	h.node.Dispatchers[0].Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.node.AddDispatcher(ctx, dispatcher.Config{DefaultMaxConcurrency: 8}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if n := h.probe.count("B") + h.probe.count("C"); n != 0 {
		t.Fatalf("B and C ran %d times before the approval", n)
	}
	h.publishDecision("ap1", 1, true, "")
	r := <-res
	if r == nil || !r.Success {
		t.Fatalf("result %+v", r)
	}
	for _, id := range []string{"A", "B", "C"} {
		if h.probe.count(id) != 1 {
			t.Errorf("tool %s ran %d times", id, h.probe.count(id))
		}
	}
	if len(events.of(planbus.EventToolApproved, "B")) != 1 {
		t.Error("no tool.approved event")
	}
}

// A rejection fails a required tool without running it, and the plan,
// which is not to be replanned.
func TestRejectionFailsThePlan(t *testing.T) {
	h := start(t, opts{})
	events := &eventLog{}
	res := h.submit(`{"planId":"ap2","tools":[{"toolId":"A","skill":"probe","approval":{"prompt":"go?"}},
		{"toolId":"B","skill":"probe","dependencies":["A"]}]}`, time.Minute, events.add)
	events.waitEvent(t, planbus.EventToolWaiting, "A")
	h.publishDecision("ap2", 0, false, "too risky")
	r := <-res
	if r == nil || r.State != planbus.PlanFailed || r.CanReplan || r.Error.Code != planbus.CodeRejected {
		t.Fatalf("result %+v, want failed with REJECTED, no replan", r)
	}
	if a := tool(r, "A"); a.State != planbus.ToolFailed || a.Error.Message != "rejected by a person: too risky" {
		t.Errorf("A: %s %+v", a.State, a.Error)
	}
	if h.probe.count("A")+h.probe.count("B") != 0 {
		t.Error("a rejected tool or its dependent ran")
	}
}

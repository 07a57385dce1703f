package planner

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// A request accepted but not yet taken up by a planner is cancelled at
// once: its loop state is created ended; the planner that takes it up
// later finds it so, publishes its outcome again and no plan.
func TestCancelOfAQueuedRequest(t *testing.T) {
	conn := bustest.Dial(t, bustest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := New(conn, Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.open(ctx); err != nil {
		t.Fatal(err)
	}
	req := []byte(`{"requestId":"q1","sessionId":"default","kind":"plan","maxAttempts":1,"plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`)
	if _, err := conn.JS.Publish(ctx, bus.RequestSubject("q1"), req, jetstream.WithMsgID("q1")); err != nil {
		t.Fatal(err)
	}
	reply, err := s.cancel(ctx, &planbus.CancelRequest{RequestID: "q1", Reason: "queued too long"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if reply.Status != planbus.CancelCancelled {
		t.Fatalf("reply %+v, want cancelled", reply)
	}
	outcomes, err := conn.JS.Stream(ctx, bus.StreamOutcomes)
	if err != nil {
		t.Fatal(err)
	}
	m, err := outcomes.GetLastMsgForSubject(ctx, bus.OutcomeSubject("q1"))
	if err != nil {
		t.Fatalf("no outcome published: %v", err)
	}
	var o planbus.Outcome
	if err := json.Unmarshal(m.Data, &o); err != nil || o.Status != planbus.StatusCancelled || o.Attempts != 0 {
		t.Fatalf("outcome %s (%v), want cancelled after 0 attempts", m.Data, err)
	}

	// A planner takes the request up: it publishes nothing new.
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	<-s.Ready()
	cons, err := conn.JS.Consumer(ctx, bus.StreamRequests, bus.ConsumerPlannerRequests)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.AckFloor.Stream >= 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the planner never acknowledged the queued request")
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	plans, err := conn.JS.Stream(ctx, bus.StreamPlans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plans.GetLastMsgForSubject(ctx, bus.Partitioned(bus.SubjectPlansAll).Of("q1-1")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("plan q1-1: %v, want none published", err)
	}
	l, _, err := s.load(ctx, "q1")
	if err != nil || l == nil || l.Status != loopDone || l.Outcome.Status != planbus.StatusCancelled {
		t.Errorf("loop %+v (%v), want done and cancelled", l, err)
	}
}

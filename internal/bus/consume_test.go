package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// A shared consumer is made as every planbus consumer of its kind is
// (explicit acks, the delivery limit with its slack) and hands over what
// is published; a message left unacknowledged comes back after AckWait.
func TestConsumeShared(t *testing.T) {
	cfg := bustest.Start(t)
	c := bustest.Dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan jetstream.Msg, 4)
	cc, err := c.ConsumeShared(ctx, bus.Shared{Stream: bus.StreamExecutions, Durable: "test-shared", Filter: bus.SubjectExecutionsAll,
		Description: "test", AckWait: time.Second, DeliveryLimit: 3, MaxAckPending: 7, Batch: 16},
		func(m jetstream.Msg) { got <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	cons, err := c.JS.Consumer(ctx, bus.StreamExecutions, "test-shared")
	if err != nil {
		t.Fatal(err)
	}
	cc2 := cons.CachedInfo().Config
	if cc2.AckPolicy != jetstream.AckExplicitPolicy || cc2.MaxDeliver != bus.ConsumerMaxDeliver(3) || cc2.MaxAckPending != 7 ||
		cc2.Description != "test" || cc2.FilterSubject != bus.SubjectExecutionsAll || cc2.AckWait != time.Second {
		t.Errorf("consumer config %+v", cc2)
	}
	if _, err := c.JS.Publish(ctx, bus.ExecutionSubject("p1"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	receive := func(what string) jetstream.Msg {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-ctx.Done():
			t.Fatalf("%s: not delivered", what)
			return nil
		}
	}
	if m := receive("the message"); m.Subject() != bus.ExecutionSubject("p1") {
		t.Fatalf("delivered %s", m.Subject())
	}
	m := receive("the unacknowledged message again")
	if n := bus.Deliveries(m); n != 2 {
		t.Errorf("redelivered as delivery %d, want 2", n)
	}
	_ = m.Ack()
}

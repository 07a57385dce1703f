package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// A plan whose shard is behind on what it has received waits before it
// is handed in, and is told in progress meanwhile so its consumer does
// not deliver it again; it is handed in once the shard has caught up.
func TestAPlanWaitsWhileItsShardIsBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := bustest.Dial(t, bustest.Start(t))
	if _, err := conn.JS.Publish(ctx, bus.PlanSubject("waiting"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	const ackWait = 300 * time.Millisecond
	cons, err := conn.JS.CreateConsumer(ctx, bus.StreamPlans, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	progress, err := conn.NC.SubscribeSync(m.Reply())
	if err != nil {
		t.Fatal(err)
	}
	s := &shard{in: make(chan item, 1024)}
	d := &Dispatcher{cfg: Config{AckWait: ackWait}, conn: conn, closed: make(chan struct{}), shards: []*shard{s}}
	for range intakeBacklog + 1 {
		s.in <- item{kind: kindResult, planID: "other"}
	}
	routed := make(chan struct{})
	go func() {
		d.route(kindPlan, m)
		close(routed)
	}()
	// Told in progress for longer than its ack wait: 4 × AckWait/3.
	for k := range 4 {
		p, err := progress.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("in progress %d times, then: %v", k, err)
		}
		if string(p.Data) != "+WPI" {
			t.Fatalf("the waiting plan's message was answered %q, want +WPI", p.Data)
		}
	}
	if d.stats.IntakeWaits.Load() != 1 || len(s.in) != intakeBacklog+1 {
		t.Fatalf("waits %d, %d queued: the plan was handed to a shard that is behind", d.stats.IntakeWaits.Load(), len(s.in))
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		t.Fatalf("delivered %d times (%d again) while it waited", info.Delivered.Consumer, info.NumRedelivered)
	}
	for len(s.in) > intakeBacklog/2 {
		<-s.in
	}
	select {
	case <-routed:
	case <-time.After(30 * time.Second):
		t.Fatal("the plan was not handed in once its shard caught up")
	}
	var last item
	for len(s.in) > 0 {
		last = <-s.in
	}
	if last.kind != kindPlan || last.planID != "waiting" {
		t.Fatalf("the shard's last message is %v of %q, want the plan", last.kind, last.planID)
	}
}

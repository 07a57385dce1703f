package dispatcher

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/token"
)

// delivered publishes n timers to a real server and returns them as
// items delivered by a consumer with explicit acks, and the consumer.
func delivered(t *testing.T, n int) ([]item, jetstream.Consumer, *bus.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := bustest.Dial(t, bustest.Start(t))
	for i := range n {
		if _, err := conn.JS.Publish(ctx, bus.TimerSubject(fmt.Sprintf("p%d", i)), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := conn.JS.CreateConsumer(ctx, bus.StreamTimers, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var items []item
	for m := range batch.Messages() {
		items = append(items, item{kind: kindTimer, msg: m})
	}
	if len(items) != n {
		t.Fatalf("fetched %d messages, want %d", len(items), n)
	}
	return items, cons, conn
}

// ackPending is the consumer's count of messages delivered and not yet
// acknowledged, once the server has received every ack sent before the
// call (it may not have applied them all yet).
func ackPending(t *testing.T, cons jetstream.Consumer, conn *bus.Conn) int {
	t.Helper()
	if err := conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumAckPending
}

func TestAcksAreHeldWhileWritesAreBehind(t *testing.T) {
	items, cons, conn := delivered(t, 4)
	a := newAcksBehind(time.Hour)
	gone := make(chan struct{})
	a.gone = gone
	go a.run()
	a.ack(items[:2], nil, nil)
	a.ack(items[2:], nil, nil)
	if n := ackPending(t, cons, conn); n != 4 {
		t.Fatalf("%d messages awaiting their ack while the writes of their handling are behind, want 4", n)
	}
	// A stop waits for what is held to come due, unless the connection
	// is gone (here it is not: what is held is acknowledged at once).
	close(gone)
	a.stop()
	allAcked(t, cons, conn)
}

// allAcked waits until the server has applied every ack.
func allAcked(t *testing.T, cons jetstream.Consumer, conn *bus.Conn) {
	t.Helper()
	bustest.Eventually(t, 30*time.Second, "every message acknowledged", func() (bool, string) {
		n := ackPending(t, cons, conn)
		return n == 0, fmt.Sprintf("%d awaiting their ack", n)
	})
}

func TestAcksAreSentOnceTheWritesAreOnDisk(t *testing.T) {
	items, cons, conn := delivered(t, 3)
	a := newAcksBehind(50 * time.Millisecond)
	go a.run()
	defer a.stop()
	a.ack(items, nil, nil)
	allAcked(t, cons, conn)
}

func TestAStopWaitsForTheWritesOfAnotherProcessesServer(t *testing.T) {
	items, cons, conn := delivered(t, 2)
	a := newAcksBehind(300 * time.Millisecond)
	go a.run()
	a.ack(items, nil, nil)
	a.stop() // returns once they are acknowledged
	allAcked(t, cons, conn)
}

func TestNothingIsHeldWhenNothingIsBehind(t *testing.T) {
	items, cons, conn := delivered(t, 2)
	newAcksBehind(0).ack(items, nil, nil)
	allAcked(t, cons, conn)
}

// timersOf lists the plans with a message in the timers stream.
func timersOf(t *testing.T, conn *bus.Conn) map[string]bool {
	t.Helper()
	st, err := conn.JS.Stream(context.Background(), bus.StreamTimers)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(bus.SubjectTimersAll))
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]bool{}
	for subject := range info.State.Subjects {
		if id, ok := strings.CutPrefix(subject, "planbus.timers.scheduled."); ok {
			plans[strings.TrimSuffix(id, ".timeout")] = true
			continue
		}
		plans[bus.PlanOfSubject(subject)] = true
	}
	return plans
}

// timer is the timeout schedule of plan planID, as send holds it back.
func timer(planID string) *nats.Msg {
	return timeoutSchedule(execution.TimerMessage{PlanID: planID, Kind: execution.TimerPlanTimeout, FireAt: time.Now().Add(time.Hour).UnixMilli()})
}

func TestAPlansTimeoutTimerIsPublishedOnlyIfItRunsWhenItsAckIsSent(t *testing.T) {
	items, cons, conn := delivered(t, 2)
	a := newAcksBehind(time.Hour)
	gone := make(chan struct{})
	a.gone = gone
	a.publish = func(m *nats.Msg) (jetstream.PubAckFuture, error) {
		return conn.JS.PublishMsgAsync(m, jetstream.WithMsgID(m.Header.Get(jetstream.MsgIDHeader)))
	}
	a.handBack = func(_ []item, err error) { t.Errorf("handed back: %v", err) }
	go a.run()
	running, ended := &entry{}, &entry{}
	ended.ended.Store(true)
	a.ack(items[:1], timer("running"), running)
	a.ack(items[1:], timer("ended"), ended)
	if got := timersOf(t, conn); got["running"] || got["ended"] {
		t.Fatalf("timers published before their plans' acks: %v", got)
	}
	close(gone)
	a.stop()
	got := timersOf(t, conn)
	if !got["running"] || got["ended"] {
		t.Fatalf("timers after the acks: %v, want the running plan's alone", got)
	}
	if !running.scheduled.Load() {
		t.Error("the running plan's entry does not know its timeout is scheduled, to purge it when the plan ends")
	}
	allAcked(t, cons, conn)
}

// lateAck is a publish whose acknowledgement never comes (a server too
// busy to answer in time).
type lateAck struct{ m *nats.Msg }

func (f lateAck) Ok() <-chan *jetstream.PubAck { return nil }
func (f lateAck) Err() <-chan error            { return nil }
func (f lateAck) Msg() *nats.Msg               { return f.m }

// A timer whose publish is not acknowledged within a round is published
// again a round later, its batch held meanwhile: handing the batch back
// would have its messages handled again, which a busy server can least
// afford (a soak above the rate the node could take collapsed that way).
func TestABatchWhoseTimerIsAcknowledgedLateIsHeldAgain(t *testing.T) {
	items, cons, conn := delivered(t, 1)
	a := newAcksBehind(20 * time.Millisecond)
	a.timerWait = 50 * time.Millisecond
	var published atomic.Int32
	a.publish = func(m *nats.Msg) (jetstream.PubAckFuture, error) {
		if published.Add(1) == 1 {
			return lateAck{m}, nil
		}
		return conn.JS.PublishMsgAsync(m, jetstream.WithMsgID(m.Header.Get(jetstream.MsgIDHeader)))
	}
	a.handBack = func(_ []item, err error) { t.Errorf("handed back: %v", err) }
	go a.run()
	defer a.stop()
	ent := &entry{}
	a.ack(items, timer("slow"), ent)
	allAcked(t, cons, conn)
	if n := published.Load(); n != 2 {
		t.Errorf("the timer was published %d times, want 2 (once late, once acknowledged)", n)
	}
	if !timersOf(t, conn)["slow"] || !ent.scheduled.Load() {
		t.Errorf("timer stored %v, known to be %v", timersOf(t, conn)["slow"], ent.scheduled.Load())
	}
}

// A timer that is never acknowledged hands its batch back after
// timerWaits rounds: its messages are handled again.
func TestABatchWhoseTimerIsNeverAcknowledgedIsHandedBack(t *testing.T) {
	items, _, _ := delivered(t, 1)
	a := newAcksBehind(5 * time.Millisecond)
	a.timerWait = 10 * time.Millisecond
	var published atomic.Int32
	a.publish = func(m *nats.Msg) (jetstream.PubAckFuture, error) {
		published.Add(1)
		return lateAck{m}, nil
	}
	back := make(chan error, 1)
	a.handBack = func(_ []item, err error) { back <- err }
	go a.run()
	defer a.stop()
	a.ack(items, timer("never"), &entry{})
	select {
	case err := <-back:
		if n := published.Load(); n != timerWaits+1 {
			t.Errorf("handed back after %d publishes, want %d", n, timerWaits+1)
		}
		if err == nil {
			t.Error("handed back without a reason")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never handed back")
	}
}

func TestCallsWithAStoredResultAreNotPublishedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := bustest.Dial(t, bustest.Start(t))
	key, err := token.Load(ctx, conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{conn: conn, key: key, log: zerolog.Nop()}
	p, err := plan.Decode([]byte(`{"planId":"redo","tools":[{"toolId":"A","skill":"echo"},{"toolId":"B","skill":"echo"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := execution.Start(p, time.Now(), 4, nil)
	redo := func() []string {
		fx := eng.Outstanding()
		d.withoutStored(ctx, zerolog.Nop(), eng, &fx)
		var ids []string
		for _, r := range fx.Releases {
			ids = append(ids, p.Tools[r.Index].ToolID)
		}
		return ids
	}
	if got := redo(); len(got) != 2 {
		t.Fatalf("calls published again with no result stored: %v, want A and B", got)
	}
	// B's result is stored (not applied yet), and a forged one of A.
	for _, r := range []struct{ tool, token string }{{"B", key.Result("redo", "B", 1)}, {"A", "forged"}} {
		data := fmt.Appendf(nil, `{"planId":"redo","toolId":%q,"attempt":1,"state":"succeeded","token":%q}`, r.tool, r.token)
		if _, err := conn.JS.Publish(ctx, bus.ResultSubject("redo"), data); err != nil {
			t.Fatal(err)
		}
	}
	if got := redo(); len(got) != 1 || got[0] != "A" {
		t.Fatalf("calls published again: %v, want A alone (B's result is stored; A's carries no token of its call)", got)
	}
	// Each read's consumer is gone once read: a stream holds 1,000, and
	// a server behind on its work has every redelivered message read.
	st, err := conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Errorf("%d consumers left on the results stream after the reads, want 0", info.State.Consumers)
	}
}

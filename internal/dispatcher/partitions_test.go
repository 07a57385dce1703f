package dispatcher_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

// settled waits until dispatchers dispatchers each see all of them and
// together own every partition once.
func settled(t *testing.T, h *harness, dispatchers int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), minute)
	defer cancel()
	if err := bench.Settle(ctx, h.conn.NC, dispatchers, bus.DefaultPartitions); err != nil {
		t.Fatal(err)
	}
}

// Two dispatchers share the partitions out, so each plan's messages go to
// one of them: plans run with no contention for their state. When one
// dies, the other takes up its partitions and plans go on.
func TestDispatchersSharePartitionsAndTakeOverADeadOnes(t *testing.T) {
	h := start(t, opts{dispatchers: 2, workers: 2, concurrency: 16})
	settled(t, h, 2)
	conflicts := dispatcherStatSum(t, h, "casConflicts", 2)
	var tools []string
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"a%d","skill":"echo"}`, i))
	}
	tools = append(tools, `{"toolId":"z","skill":"echo","dependencies":["a0","a1","a2","a3","a4","a5"]}`)
	doc := `{"tools":[` + strings.Join(tools, ",") + `]}`
	var done []<-chan *planbus.ExecutionResult
	for range 24 {
		done = append(done, h.submit(doc, minute, nil))
	}
	for i, ch := range done {
		if res := receive(t, ch, "a plan's result"); res == nil || !res.Success {
			t.Fatalf("plan %d: %+v", i, res)
		}
	}
	if n := dispatcherStatSum(t, h, "casConflicts", 2) - conflicts; n != 0 {
		t.Errorf("%d compare-and-sets lost over 24 plans: two dispatchers contended for a plan's state", n)
	}

	h.node.Dispatchers[0].Kill()
	settled(t, h, 1)
	res, _ := h.run(doc, minute)
	if !res.Success {
		t.Fatalf("after a dispatcher died: %s %+v", res.State, res.Error)
	}
}

// A system whose streams were declared before partitions, with the
// dispatchers' consumers of that time (on every subject, the timers' on a
// work queue) and a plan waiting, upgrades in place: the shared consumers
// are narrowed to the messages stored before, which they still deliver,
// the partitions' consumers take the rest, and the waiting plan runs.
func TestStreamsFromBeforePartitionsUpgradeInPlace(t *testing.T) {
	cfg := bustest.StartBare(t)
	ctx, cancel := context.WithTimeout(context.Background(), minute)
	defer cancel()
	c := bustest.Dial(t, cfg)
	old := map[string]string{bus.StreamPlans: bus.ConsumerDispatcherPlans, bus.StreamResults: bus.ConsumerDispatcherResults,
		bus.StreamTimers: bus.ConsumerDispatcherTimers}
	for _, sc := range cfg.Streams() {
		durable, ok := old[sc.Name]
		if !ok {
			continue
		}
		sc.SubjectTransform = nil
		if _, err := c.JS.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.JS.CreateOrUpdateConsumer(ctx, sc.Name, jetstream.ConsumerConfig{Durable: durable,
			FilterSubject: sc.Subjects[0], AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.JS.Publish(ctx, bus.PlanSubject("old1"),
		[]byte(`{"planId":"old1","tools":[{"toolId":"a","skill":"echo"},{"toolId":"b","skill":"echo","dependencies":["a"]}]}`)); err != nil {
		t.Fatal(err)
	}
	// The workers first, so the plan finds its skills; then the
	// dispatcher of the new version.
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1, NoDispatcher: true,
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := n.AddDispatcher(ctx, dispatcher.Config{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.NC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.WatchPlan(ctx, "old1", nil)
	if err != nil || !res.Success {
		t.Fatalf("the plan stored before partitions: %+v, %v", res, err)
	}
	cons, err := c.JS.Consumer(ctx, bus.StreamTimers, bus.ConsumerDispatcherTimers)
	if err != nil {
		t.Fatal(err)
	}
	if f := cons.CachedInfo().Config.FilterSubject; f != "planbus.timers.*" {
		t.Errorf("the shared timers consumer filters %s, want planbus.timers.*", f)
	}
	res, _ = (&harness{t: t, conn: c}).run(`{"tools":[{"toolId":"a","skill":"echo"}]}`, minute)
	if !res.Success {
		t.Fatalf("a plan after the upgrade: %s %+v", res.State, res.Error)
	}
}

// A dispatcher that releases calls keeps one short-lived message of its
// own in the tool queue, which no worker takes, so the queue's store does
// not empty as a chain runs: after a chain, the queue holds that message,
// with its time to live, and nothing else.
func TestDispatcherKeepsAMessageInTheToolQueue(t *testing.T) {
	h := start(t, opts{})
	var tools []string
	for i := range 20 {
		deps := "[]"
		if i > 0 {
			deps = fmt.Sprintf(`["c%d"]`, i-1)
		}
		tools = append(tools, fmt.Sprintf(`{"toolId":"c%d","skill":"echo","dependencies":%s}`, i, deps))
	}
	if res, _ := h.run(`{"tools":[`+strings.Join(tools, ",")+`]}`, minute); !res.Success {
		t.Fatalf("chain: %s %+v", res.State, res.Error)
	}
	ctx, cancel := context.WithTimeout(context.Background(), minute)
	defer cancel()
	s, err := h.conn.JS.Stream(ctx, bus.StreamTools)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(bus.SubjectToolsAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 1 || info.State.Subjects[bus.KeeperSubject] != 1 {
		t.Fatalf("the tool queue holds %v, want one message on %s", info.State.Subjects, bus.KeeperSubject)
	}
	m, err := s.GetLastMsgForSubject(ctx, bus.KeeperSubject)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := m.Header.Get(jetstream.MsgTTLHeader); ttl == "" {
		t.Errorf("the keeper message has no time to live (headers %v)", m.Header)
	}

	// Releasing more than keepEvery bytes of calls replaces the keeper
	// message: the ones before are purged, so one stays.
	big := `{"blob":"` + strings.Repeat("x", 100<<10) + `"}`
	tools = tools[:0]
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"b%d","skill":"echo","input":%s}`, i, big))
	}
	if res, _ := h.run(`{"tools":[`+strings.Join(tools, ",")+`]}`, minute); !res.Success {
		t.Fatalf("large calls: %s %+v", res.State, res.Error)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m2, err := s.GetLastMsgForSubject(ctx, bus.KeeperSubject)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(bus.SubjectToolsAll))
		if err != nil {
			t.Fatal(err)
		}
		if m2.Sequence > m.Sequence && len(info.State.Subjects) == 1 && info.State.Subjects[bus.KeeperSubject] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 600 KB of calls the tool queue holds %v and the last keeper message is %d (the first %d); want one, a new one",
				info.State.Subjects, m2.Sequence, m.Sequence)
		}
		time.Sleep(20 * time.Millisecond) // the old one is purged after the new one's acknowledgement
	}
}

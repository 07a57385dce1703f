package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// tap watches a result publisher's steps through its hooks and holds the
// publishes the test asks it to, until released.
type tap struct {
	t      *testing.T
	mu     sync.Mutex
	sends  []send
	holds  map[int]chan struct{} // by the index of a publish
	held   chan int              // the index of each publish held
	queued chan int              // how many wait, each time one more does
}

// send is one publish: how many results it carried, and whether as a
// batch.
type send struct {
	n     int
	batch bool
}

func newTap(t *testing.T) *tap {
	return &tap{t: t, holds: map[int]chan struct{}{}, held: make(chan int, 64), queued: make(chan int, 1024)}
}

func (tp *tap) hooks() worker.PublisherHooks {
	return worker.PublisherHooks{
		Queued: func(waiting int) { tp.queued <- waiting },
		Sending: func(n int, batch bool) {
			tp.mu.Lock()
			i := len(tp.sends)
			tp.sends = append(tp.sends, send{n, batch})
			hold := tp.holds[i]
			tp.mu.Unlock()
			if hold != nil {
				tp.held <- i
				<-hold
			}
		},
	}
}

// hold makes publish i (from 0) wait until released. t.Cleanup releases
// it in any case.
func (tp *tap) hold(i int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	ch := make(chan struct{})
	tp.holds[i] = ch
	tp.t.Cleanup(func() { tp.release(i) })
}

// release lets publish i go on.
func (tp *tap) release(i int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if ch := tp.holds[i]; ch != nil {
		close(ch)
		delete(tp.holds, i)
	}
}

// waitHeld waits until publish i is held.
func (tp *tap) waitHeld(i int) {
	tp.t.Helper()
	if got := receive(tp.t, tp.held, fmt.Sprintf("publish %d held", i)); got != i {
		tp.t.Fatalf("publish %d held, want %d", got, i)
	}
}

// waitQueued waits until n results wait in the queue.
func (tp *tap) waitQueued(n int) {
	tp.t.Helper()
	for {
		if got := receive(tp.t, tp.queued, fmt.Sprintf("%d results queued", n)); got >= n {
			return
		}
	}
}

// publishes is every publish so far.
func (tp *tap) publishes() []send {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]send(nil), tp.sends...)
}

// resultMsg is a result of planID under message id id, as a worker
// publishes it.
func resultMsg(planID, id string) *nats.Msg {
	m := nats.NewMsg(bus.ResultSubject(planID))
	m.Data = []byte(`{"planId":"` + planID + `"}`)
	m.Header.Set(jetstream.MsgIDHeader, id)
	return m
}

// publisher is a ResultPublisher on a connection of its own, as a
// worker's, publishing at most plainMax results on their own at once and
// batching at least minBatch.
func (e *env) publisher(tp *tap, plainMax, minBatch int) *worker.ResultPublisher {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	p, err := worker.NewResultPublisher(ctx, bustest.Dial(e.t, e.cfg).NC, plainMax, minBatch, tp.hooks())
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// publishing publishes m with p in the background; its error arrives on
// the channel returned.
func publishing(p *worker.ResultPublisher, m *nats.Msg) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		done <- p.Publish(ctx, m)
	}()
	return done
}

// stored is every message of the results stream, in order.
func (e *env) stored() []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := e.conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var msgs []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			e.t.Fatalf("result %d: %v", seq, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// storedOnce checks that the results stream holds exactly one message
// under each id, and no other.
func (e *env) storedOnce(ids ...string) {
	e.t.Helper()
	count := map[string]int{}
	for _, m := range e.stored() {
		count[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			e.t.Errorf("result %s stored %d times, want once", id, count[id])
		}
		delete(count, id)
	}
	if len(count) > 0 {
		e.t.Errorf("results stored that nobody published: %v", count)
	}
}

func checkErrs(t *testing.T, what string, errs ...<-chan error) {
	t.Helper()
	for i, ch := range errs {
		if err := receive(t, ch, fmt.Sprintf("%s %d published", what, i)); err != nil {
			t.Errorf("%s %d: %v", what, i, err)
		}
	}
}

// Results that finish while another publish is in flight go as one atomic
// batch: each its own message, with its own id, under its own plan's
// partition.
func TestResultsThatFinishTogetherGoInOneBatch(t *testing.T) {
	e := newEnv(t)
	tp := newTap(t)
	p := e.publisher(tp, 1, 5)
	tp.hold(0)
	first := publishing(p, resultMsg("p0", "id-0"))
	tp.waitHeld(0)
	var batched []<-chan error
	for i := 1; i <= 5; i++ {
		batched = append(batched, publishing(p, resultMsg(fmt.Sprintf("p%d", i), fmt.Sprintf("id-%d", i))))
	}
	tp.waitQueued(5)
	tp.release(0)
	checkErrs(t, "result", append(batched, first)...)

	if got, want := tp.publishes(), []send{{1, false}, {5, true}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("publishes %v, want %v: the first on its own, the five queued behind it in one batch", got, want)
	}
	msgs := e.stored()
	if len(msgs) != 6 {
		t.Fatalf("%d results stored, want 6", len(msgs))
	}
	batches := map[string]int{}
	for _, m := range msgs {
		var i int
		if _, err := fmt.Sscanf(m.Header.Get(jetstream.MsgIDHeader), "id-%d", &i); err != nil {
			t.Fatalf("result %s: %v", m.Header.Get(jetstream.MsgIDHeader), err)
		}
		plan := fmt.Sprintf("p%d", i)
		if want := "planbus.results." + fmt.Sprint(bus.PartitionOf(plan, bus.DefaultPartitions)) + "." + plan; m.Subject != want {
			t.Errorf("result id-%d stored as %s, want %s", i, m.Subject, want)
		}
		batch := m.Header.Get("Nats-Batch-Id")
		if (i == 0) != (batch == "") {
			t.Errorf("result id-%d in batch %q, want the first alone and the others in one", i, batch)
		}
		batches[batch]++
	}
	if len(batches) != 2 {
		t.Errorf("results by batch: %v, want five in one and one alone", batches)
	}
}

// Fewer results queued than make a batch worth its cost go each on its
// own.
func TestFewResultsQueuedGoOnTheirOwn(t *testing.T) {
	e := newEnv(t)
	tp := newTap(t)
	p := e.publisher(tp, 1, 4)
	tp.hold(0)
	errs := []<-chan error{publishing(p, resultMsg("p0", "id-0"))}
	tp.waitHeld(0)
	for i := 1; i <= 3; i++ {
		errs = append(errs, publishing(p, resultMsg("p0", fmt.Sprintf("id-%d", i))))
	}
	tp.waitQueued(3)
	tp.release(0)
	checkErrs(t, "result", errs...)
	for _, s := range tp.publishes() {
		if s != (send{1, false}) {
			t.Errorf("publishes %v, want each result on its own", tp.publishes())
			break
		}
	}
	e.storedOnce("id-0", "id-1", "id-2", "id-3")
}

// A batch holding a result already stored, or one result twice, fails as
// a whole; its results are published again one by one, each
// de-duplicated on its own, so each is stored once.
func TestABatchWithADuplicateIsPublishedOneByOne(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before string   // an id stored before the batch
		ids    []string // the batch's results' ids
	}{
		{"stored before", "id-1", []string{"id-1", "id-2", "id-3"}},
		{"twice in the batch", "", []string{"id-1", "id-2", "id-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.before != "" {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				if _, err := e.conn.JS.PublishMsg(ctx, resultMsg("p1", tt.before)); err != nil {
					t.Fatal(err)
				}
			}
			tp := newTap(t)
			p := e.publisher(tp, 1, len(tt.ids))
			tp.hold(0)
			errs := []<-chan error{publishing(p, resultMsg("p0", "id-0"))}
			tp.waitHeld(0)
			for _, id := range tt.ids {
				errs = append(errs, publishing(p, resultMsg("p1", id)))
			}
			tp.waitQueued(len(tt.ids))
			tp.release(0)
			checkErrs(t, "result", errs...)

			want := []send{{1, false}, {len(tt.ids), true}}
			for range tt.ids {
				want = append(want, send{1, false})
			}
			if got := tp.publishes(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("publishes %v, want %v: the batch refused, then each on its own", got, want)
			}
			unique := []string{"id-0"}
			for _, id := range tt.ids {
				if !slices.Contains(unique, id) {
					unique = append(unique, id)
				}
			}
			e.storedOnce(unique...)
		})
	}
}

// A results stream that takes no batches (declared by a planbus of
// before, or on a server older than 2.12) gets each result on its own:
// a refused batch's results at once, and results queue no more for a
// while.
func TestAStreamWithoutBatchesGetsResultsOneByOne(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := e.conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.AllowAtomicPublish = false
	if _, err := e.conn.JS.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	tp := newTap(t)
	p := e.publisher(tp, 1, 2)
	tp.hold(0)
	errs := []<-chan error{publishing(p, resultMsg("p0", "id-0"))}
	tp.waitHeld(0)
	errs = append(errs, publishing(p, resultMsg("p1", "id-1")), publishing(p, resultMsg("p2", "id-2")))
	tp.waitQueued(2)
	tp.release(0)
	checkErrs(t, "result", errs...)
	if got, want := tp.publishes(), []send{{1, false}, {2, true}, {1, false}, {1, false}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("publishes %v, want %v", got, want)
	}

	// Now with the one place for a result on its own taken, the next go
	// on their own rather than queue.
	tp.hold(4)
	held := publishing(p, resultMsg("p3", "id-3"))
	tp.waitHeld(4)
	checkErrs(t, "result published while another is held", publishing(p, resultMsg("p4", "id-4")), publishing(p, resultMsg("p5", "id-5")))
	tp.release(4)
	checkErrs(t, "held result", held)
	select {
	case n := <-tp.queued:
		t.Errorf("%d results queued for a batch the stream does not take", n)
	default:
	}
	e.storedOnce("id-0", "id-1", "id-2", "id-3", "id-4", "id-5")
}

// A result that fits the server's max payload but not with a batch's
// headers goes on its own, never queued; one over it is refused at once
// with nats.ErrMaxPayload (the worker reports it OUTPUT_TOO_LARGE).
func TestAResultTooLargeForABatchGoesOnItsOwn(t *testing.T) {
	cfg := bustest.StartSmall(t)
	e := &env{t: t, cfg: cfg, conn: bustest.Dial(t, cfg)}
	tp := newTap(t)
	p := e.publisher(tp, 1, 2)
	tp.hold(0)
	held := publishing(p, resultMsg("p0", "id-0"))
	tp.waitHeld(0)

	large := resultMsg("p1", "id-1")
	large.Data = []byte(`"` + strings.Repeat("x", bustest.SmallPayload-large.Size()-64) + `"`)
	checkErrs(t, "result almost as large as the server takes", publishing(p, large))
	tooLarge := resultMsg("p2", "id-2")
	tooLarge.Data = []byte(`"` + strings.Repeat("x", bustest.SmallPayload) + `"`)
	if err := receive(t, publishing(p, tooLarge), "the result too large published"); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("a result over the max payload: %v, want nats.ErrMaxPayload", err)
	}
	tp.release(0)
	checkErrs(t, "held result", held)
	select {
	case n := <-tp.queued:
		t.Errorf("%d results queued, want none: the large ones go on their own", n)
	default:
	}
	e.storedOnce("id-0", "id-1")
}

// A result whose try ends while it waits in the queue leaves it: it is
// not published behind its caller's back.
func TestAQueuedResultWhoseTryEndsIsNotPublished(t *testing.T) {
	e := newEnv(t)
	tp := newTap(t)
	p := e.publisher(tp, 1, 2)
	tp.hold(0)
	held := publishing(p, resultMsg("p0", "id-0"))
	tp.waitHeld(0)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- p.Publish(ctx, resultMsg("p1", "id-1")) }()
	tp.waitQueued(1)
	cancel()
	if err := receive(t, gaveUp, "the queued result giving up"); !errors.Is(err, context.Canceled) {
		t.Errorf("the queued result's publish: %v, want context.Canceled", err)
	}
	tp.release(0)
	checkErrs(t, "held result", held)
	// Published after it would have been.
	checkErrs(t, "next result", publishing(p, resultMsg("p2", "id-2")))
	e.storedOnce("id-0", "id-2")
}

// tunedWorker starts a worker of the gate skill g, with Concurrency n,
// whose result publisher publishes at most one result on its own at once
// and batches minBatch or more, watched by tp.
func (e *env) tunedWorker(g *gate, n, minBatch int, tp *tap, opts ...func(*worker.Config)) *running {
	e.t.Helper()
	nc := bustest.Dial(e.t, e.cfg).NC
	cfg := worker.Config{Skills: []skill.Skill{g.skill()}, Concurrency: n}
	for _, o := range opts {
		o(&cfg)
	}
	w, err := worker.New(nc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	worker.TuneResults(w, 1, minBatch, tp.hooks())
	return e.runWorker(w, nc)
}

// startCalls publishes a call of g's skill for each plan and waits until
// every one runs.
func (e *env) startCalls(g *gate, plans ...string) {
	e.t.Helper()
	for _, plan := range plans {
		e.publish(newCall(plan, "t", g.name, `{"plan":"`+plan+`"}`))
	}
	for range plans {
		receive(e.t, g.started, "a call starting")
	}
}

// A worker's calls that finish together are reported in one batch, and
// each call is acknowledged only once its result is stored.
func TestCallsThatFinishTogetherAreReportedInOneBatch(t *testing.T) {
	e := newEnv(t)
	g := newGate("job")
	tp := newTap(t)
	e.tunedWorker(g, 8, 5, tp)
	plans := []string{"p0", "p1", "p2", "p3", "p4", "p5"}
	e.startCalls(g, plans...)
	tp.hold(0)
	tp.hold(1)
	g.release()
	tp.waitHeld(0)
	tp.waitHeld(1) // the five others, queued behind the first, in a batch
	if ci := e.consumerNow("job"); ci.NumAckPending != 6 {
		t.Errorf("%d calls unacknowledged while no result is stored, want 6", ci.NumAckPending)
	}
	tp.release(0)
	// The first result is stored and its call acknowledged; the five in
	// the batch held are not.
	e.waitConsumer("job", func(ci *jetstream.ConsumerInfo) bool { return ci.NumAckPending == 5 })
	if n := e.allResults(); n != 1 {
		t.Errorf("%d results stored, want 1", n)
	}
	tp.release(1)
	e.waitSettled("job")
	if got, want := tp.publishes(), []send{{1, false}, {5, true}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("publishes %v, want %v", got, want)
	}
	for _, plan := range plans {
		if res, _ := e.result(plan); res.State != planbus.ToolSucceeded || string(res.Output) != `{"plan":"`+plan+`"}` {
			t.Errorf("result of %s: %s %s %+v", plan, res.State, res.Output, res.Error)
		}
		if n := e.resultCount(plan); n != 1 {
			t.Errorf("%d results of %s, want 1", n, plan)
		}
	}
}

// consumerNow returns the consumer's info of skill as it is: for a check
// that something has not happened (yet).
func (e *env) consumerNow(skill string) *jetstream.ConsumerInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cons, err := e.conn.JS.Consumer(ctx, bus.StreamTools, bus.SkillConsumer(skill))
	if err != nil {
		e.t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return ci
}

// A result too large for the server among results that finish together
// is reported OUTPUT_TOO_LARGE, alone; that report joins the others' batch.
func TestAResultTooLargeAmongOthersFailsAlone(t *testing.T) {
	cfg := bustest.StartSmall(t)
	e := &env{t: t, cfg: cfg, conn: bustest.Dial(t, cfg)}
	g := newGate("job")
	// Output and state patch each within the cap, together over the
	// server's max payload.
	half := strings.Repeat("x", bustest.SmallPayload*6/10)
	big := skillOf("big", func(ctx context.Context, _ *skill.Call) (skill.Result, error) {
		return skill.Result{Output: json.RawMessage(`"` + half + `"`), StatePatch: json.RawMessage(`{"k":"` + half + `"}`)}, nil
	})
	nc := bustest.Dial(t, cfg).NC
	w, err := worker.New(nc, worker.Config{Skills: []skill.Skill{g.skill(), big}, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	tp := newTap(t)
	worker.TuneResults(w, 1, 4, tp.hooks())
	e.runWorker(w, nc)
	plans := []string{"p0", "p1", "p2", "p3"}
	e.startCalls(g, plans...)
	tp.hold(0)
	g.release()
	tp.waitHeld(0)
	tp.waitQueued(3)
	e.publish(newCall("p-big", "t", "big", `{}`))
	tp.waitQueued(4) // the big result's report of failure
	tp.release(0)
	e.waitSettled("job")
	e.waitSettled("big")
	res, _ := e.result("p-big")
	if res.State != planbus.ToolFailed || errorCode(res) != planbus.CodeOutputTooLarge || res.Error.Category != planbus.CategoryPermanent {
		t.Errorf("the big result: %s %+v, want failed OUTPUT_TOO_LARGE (permanent)", res.State, res.Error)
	}
	for _, plan := range plans {
		if res, _ := e.result(plan); res.State != planbus.ToolSucceeded {
			t.Errorf("result of %s: %s %+v, want succeeded", plan, res.State, res.Error)
		}
	}
	if n := e.allResults(); n != 5 {
		t.Errorf("%d results, want 5", n)
	}
	if got := tp.publishes(); len(got) < 2 || got[len(got)-1] != (send{4, true}) {
		t.Errorf("publishes %v, want the last a batch of the three small results and the big one's failure", got)
	}
}

// A result whose batch the stream cannot take for a while (here the
// stream is gone) is tried again with backoff and stored once it is back;
// its call is acknowledged after that.
func TestResultsAreRetriedUntilTheStreamAnswers(t *testing.T) {
	e := newEnv(t)
	g := newGate("job")
	tp := newTap(t)
	e.tunedWorker(g, 8, 2, tp)
	plans := []string{"p0", "p1", "p2"}
	e.startCalls(g, plans...)
	tp.hold(0)
	tp.hold(1)
	g.release()
	tp.waitHeld(0)
	tp.waitHeld(1) // the two others in a batch
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.conn.JS.DeleteStream(ctx, bus.StreamResults); err != nil {
		t.Fatal(err)
	}
	tp.hold(2) // the first try after those two failed
	tp.release(0)
	tp.release(1)
	tp.waitHeld(2)
	if ci := e.consumerNow("job"); ci.NumAckPending != 3 {
		t.Errorf("%d calls unacknowledged while the stream is gone, want 3", ci.NumAckPending)
	}
	if err := e.conn.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	tp.release(2)
	e.waitSettled("job")
	for _, plan := range plans {
		if n := e.resultCount(plan); n != 1 {
			t.Errorf("%d results of %s, want 1", n, plan)
		}
	}
}

// Results still queued when the worker's drain time is up are not
// published, and their calls are handed back for another worker.
func TestResultsQueuedAtTheDrainTimeAreHandedBack(t *testing.T) {
	e := newEnv(t)
	g := newGate("job")
	tp := newTap(t)
	leaving := e.tunedWorker(g, 8, 3, tp, func(c *worker.Config) { c.DrainTimeout = 200 * time.Millisecond })
	plans := []string{"p0", "p1", "p2"}
	e.startCalls(g, plans...)
	tp.hold(0)
	g.release()
	tp.waitHeld(0)
	tp.waitQueued(2)
	// The calls come back delivered again, and the staying worker asks
	// whether they ran: no, as a dispatcher would say.
	settled, err := e.conn.NC.Subscribe(bus.SubjectCallSettled, func(q *nats.Msg) {
		_ = q.Respond([]byte(`{"settled":false,"why":"no result of the attempt is stored"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = settled.Unsubscribe() }()
	if err := e.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	leaving.cancel()
	var ran atomic.Int64
	e.startWorker(worker.Config{ID: "staying", Skills: []skill.Skill{counting("job", &ran)}})
	// The two queued give up when the drain time is up and hand their
	// calls back; the staying worker reports them.
	e.eventually("the queued results' calls reported by the staying worker", func(context.Context) (bool, string) {
		n := e.allResults()
		return n == 2, fmt.Sprintf("%d results", n)
	})
	tp.release(0) // its try's context ended too: not published, handed back
	receive(t, leaving.done, "the leaving worker's Run returning")
	e.waitSettled("job")
	for _, plan := range plans {
		if res, _ := e.result(plan); res.WorkerID != "staying" || e.resultCount(plan) != 1 {
			t.Errorf("result of %s by %q, %d of them; want one, by the staying worker", plan, res.WorkerID, e.resultCount(plan))
		}
	}
	if n := ran.Load(); n != 3 {
		t.Errorf("the staying worker ran %d calls, want 3", n)
	}
}

package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// wait bounds every wait for something the worker should do; it is long
// so that a slow machine under -race does not fail a test, and a test
// that passes never waits it out.
const wait = 20 * time.Second

// env is one test's bus: an embedded JetStream server and a connection of
// the test's own, standing in for the dispatcher that publishes calls and
// reads results.
type env struct {
	t    *testing.T
	cfg  bus.Config
	conn *bus.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg := bustest.Start(t)
	return &env{t: t, cfg: cfg, conn: bustest.Dial(t, cfg)}
}

// running is a worker whose Run goroutine the test controls.
type running struct {
	*worker.Worker
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's error, set before done is closed
}

// startWorker runs a worker on a connection of its own, as if it were its
// own process, and returns once it is ready. t.Cleanup stops it.
func (e *env) startWorker(cfg worker.Config, opts ...worker.Option) *running {
	e.t.Helper()
	return e.startWorkerOn(bustest.Dial(e.t, e.cfg).NC, cfg, opts...)
}

// startWorkerOn runs a worker on nc and returns once it is ready.
// t.Cleanup stops it.
func (e *env) startWorkerOn(nc *nats.Conn, cfg worker.Config, opts ...worker.Option) *running {
	t := e.t
	t.Helper()
	w, err := worker.New(nc, cfg, opts...)
	if err != nil {
		t.Fatalf("worker.New: %v", err)
	}
	return e.runWorker(w, nc)
}

// runWorker runs w, made on nc, and returns once it is ready. t.Cleanup
// stops it.
func (e *env) runWorker(w *worker.Worker, nc *nats.Conn) *running {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Worker: w, nc: nc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(wait + 30*time.Second):
			t.Errorf("worker %s: Run did not return after its context ended", w.ID())
		}
	})
	select {
	case <-w.Ready():
	case <-r.done:
		t.Fatalf("worker %s: Run returned before it was ready: %v", w.ID(), r.err)
	case <-time.After(wait):
		t.Fatalf("worker %s: not ready within %s", w.ID(), wait)
	}
	return r
}

// stop cancels Run's context and waits for Run to return.
func (r *running) stop(t *testing.T, d time.Duration) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		t.Fatalf("worker %s: Run did not return within %s of its context ending", r.ID(), d)
		return nil
	}
}

// key stands in for the dispatchers' key: it signs the tests' calls and
// cancels as a dispatcher would.
var key = func() *token.Key {
	k, _, err := token.NewKey()
	if err != nil {
		panic(err)
	}
	return k
}()

// newCall returns a valid first attempt of toolID in planID.
func newCall(planID, toolID, skill, input string) planbus.ToolCall {
	return planbus.ToolCall{
		PlanID: planID, RequestID: "req-" + planID, ToolID: toolID, Skill: skill,
		Attempt: 1, MaxAttempts: 1, Input: json.RawMessage(input), TimeoutMs: 60_000,
		IdempotencyKey: planbus.IdempotencyKey(planID, toolID, 1), ReleasedAt: time.Now(),
		Token: key.Result(planID, toolID, 1), CancelDigest: token.Digest(key.Cancel(planID)),
	}
}

// cancel publishes a dispatcher's cancel of planID and flushes it, so the
// server has it (and delivers it before anything the test sends later).
func (e *env) cancel(planID string) {
	e.t.Helper()
	e.cancelRaw(planID, marshal(e.t, planbus.Cancel{PlanID: planID, Token: key.Cancel(planID)}))
}

// cancelRaw publishes any bytes on the cancel subject of planID.
func (e *env) cancelRaw(planID string, data []byte) {
	e.t.Helper()
	if err := e.conn.NC.Publish(bus.CancelSubject(planID), data); err != nil {
		e.t.Fatal(err)
	}
	if err := e.conn.NC.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publish puts a call on its skill's queue the way the dispatcher does.
func (e *env) publish(tc planbus.ToolCall) {
	e.t.Helper()
	e.publishRaw(tc.Skill, marshal(e.t, tc), jetstream.WithMsgID(token.MsgID(tc.IdempotencyKey, tc.Token)))
}

// publishRaw puts any bytes on the queue of skill.
func (e *env) publishRaw(skill string, data []byte, opts ...jetstream.PublishOpt) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := e.conn.JS.Publish(ctx, bus.ToolSubject(skill), data, opts...); err != nil {
		e.t.Fatalf("publish on %s: %v", bus.ToolSubject(skill), err)
	}
}

// result waits for the first result of planID in the RESULTS stream and
// returns it decoded, with its raw message.
func (e *env) result(planID string) (planbus.ToolResult, jetstream.Msg) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cons, err := e.conn.JS.OrderedConsumer(ctx, bus.StreamResults, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.Partitioned(bus.SubjectResultsAll).Of(planID)},
	})
	if err != nil {
		e.t.Fatalf("results consumer: %v", err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		e.t.Fatalf("no result for plan %s within %s: %v", planID, wait, err)
	}
	var res planbus.ToolResult
	if err := json.Unmarshal(msg.Data(), &res); err != nil {
		e.t.Fatalf("result of plan %s is not a ToolResult: %v: %s", planID, err, msg.Data())
	}
	return res, msg
}

// resultCount is how many results of planID the RESULTS stream holds.
func (e *env) resultCount(planID string) uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := e.conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(bus.Partitioned(bus.SubjectResultsAll).Of(planID)))
	if err != nil {
		e.t.Fatal(err)
	}
	var n uint64
	for _, count := range info.State.Subjects { // one: the plan's partition
		n += count
	}
	return n
}

// allResults is how many results of any plan the RESULTS stream holds.
func (e *env) allResults() uint64 {
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
	return info.State.Msgs
}

// eventually polls cond until it holds, failing the test if it does not
// within wait. JetStream's bookkeeping (acks, pending counts) raises no
// event to wait on, so this is the one place tests poll. cond describes
// the state it saw, for the failure message.
func (e *env) eventually(what string, cond func(context.Context) (bool, string)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond(ctx)
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			e.t.Fatalf("%s: not so within %s: %s", what, wait, state)
		}
	}
}

// waitSettled waits until every call of skill has been acknowledged (or
// terminated): the TOOLS work queue holds none of them and the skill's
// consumer has nothing pending or unacknowledged. It returns the
// consumer's final info.
func (e *env) waitSettled(skill string) *jetstream.ConsumerInfo {
	e.t.Helper()
	subject := bus.ToolSubject(skill)
	var last *jetstream.ConsumerInfo
	e.eventually("calls of "+skill+" settled", func(ctx context.Context) (bool, string) {
		s, err := e.conn.JS.Stream(ctx, bus.StreamTools)
		if err != nil {
			return false, err.Error()
		}
		si, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return false, err.Error()
		}
		ok, state := e.consumerIs(ctx, skill, func(ci *jetstream.ConsumerInfo) bool {
			last = ci
			return ci.NumAckPending == 0 && ci.NumPending == 0
		})
		queued := si.State.Subjects[subject]
		return ok && queued == 0, fmt.Sprintf("%d in the queue; %s", queued, state)
	})
	return last
}

// waitConsumer waits until the consumer of skill is as ok says.
func (e *env) waitConsumer(skill string, ok func(*jetstream.ConsumerInfo) bool) {
	e.t.Helper()
	e.eventually("consumer of "+skill, func(ctx context.Context) (bool, string) {
		return e.consumerIs(ctx, skill, ok)
	})
}

func (e *env) consumerIs(ctx context.Context, skill string, ok func(*jetstream.ConsumerInfo) bool) (bool, string) {
	cons, err := e.conn.JS.Consumer(ctx, bus.StreamTools, bus.SkillConsumer(skill))
	if err != nil {
		return false, err.Error()
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return false, err.Error()
	}
	return ok(ci), fmt.Sprintf("consumer %d pending, %d unacknowledged, %d redelivered",
		ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
}

// subscribe collects core NATS messages on subject. The subscription is in
// place at the server when subscribe returns.
func (e *env) subscribe(subject string) <-chan *nats.Msg {
	e.t.Helper()
	ch := make(chan *nats.Msg, 256)
	sub, err := e.conn.NC.ChanSubscribe(subject, ch)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.conn.NC.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return ch
}

// receive waits for the next message on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("%s did not happen within %s", what, wait)
		var zero T
		return zero
	}
}

// waitService waits until the micro service of the worker with this id
// answers a ping. Ready does not promise it: see TestServiceAnswersOnceReady.
func (e *env) waitService(workerID string) {
	e.t.Helper()
	e.eventually("the micro service of worker "+workerID+" answering", func(ctx context.Context) (bool, string) {
		m, err := e.conn.NC.RequestWithContext(ctx, "$SRV.PING."+bus.ServiceToolworker, nil)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(m.Data), workerID), string(m.Data)
	})
}

// gate is a skill whose calls run until the test opens the gate or their
// context ends. It reports every call as it starts and as it ends.
type gate struct {
	name    string
	open    chan struct{}
	once    sync.Once
	starts  atomic.Int64
	started chan *skill.Call
	ended   chan ending
}

type ending struct {
	call  *skill.Call
	cause error // context.Cause of the call's context when it ended; nil if the gate opened
}

func newGate(name string) *gate {
	return &gate{name: name, open: make(chan struct{}), started: make(chan *skill.Call, 64), ended: make(chan ending, 64)}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) skill() skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{Name: g.name},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			g.starts.Add(1)
			g.started <- call
			select {
			case <-g.open:
				g.ended <- ending{call: call}
				return skill.Result{Output: call.Input}, nil
			case <-ctx.Done():
				g.ended <- ending{call: call, cause: context.Cause(ctx)}
				return skill.Result{}, ctx.Err()
			}
		}),
	}
}

// counting is a skill that counts its calls and returns its input at once.
func counting(name string, n *atomic.Int64) skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{Name: name},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			n.Add(1)
			return skill.Result{Output: call.Input}, nil
		}),
	}
}

// skillOf adapts a function to a skill named name.
func skillOf(name string, f func(context.Context, *skill.Call) (skill.Result, error)) skill.Skill {
	return skill.Skill{Manifest: skill.Manifest{Name: name}, Handler: skill.HandlerFunc(f)}
}

func errorCode(res planbus.ToolResult) planbus.Code {
	if res.Error == nil {
		return "<no error>"
	}
	return res.Error.Code
}

// jsonLog is a worker's logger writing JSON lines to w from level up.
func jsonLog(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

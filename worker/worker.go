package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/skill"
)

var (
	// ErrRunTwice is returned by a second call of Run: a worker serves
	// once; make another with New.
	ErrRunTwice = errors.New("worker: Run called twice")
	// ErrShuttingDown is the cause (context.Cause) of a handler's context
	// when the worker's drain time is up: the call is handed back to
	// JetStream for another worker, and what the handler returns is not
	// reported.
	ErrShuttingDown = errors.New("worker: shutting down")
	// ErrPlanEnded is the cause of a handler's context when the call's
	// plan has ended (cancelled, timed out, failed): a result would be
	// ignored, and none is reported.
	ErrPlanEnded = errors.New("worker: plan ended")
)

// fetchWait is how long one pull request waits for calls.
const fetchWait = 5 * time.Second

// flushTimeout bounds the round trip that makes sure the server has the
// worker's subscriptions before it says it is ready.
const flushTimeout = 10 * time.Second

// Worker serves skills. Create it with New and start it with Run; its
// methods are safe for concurrent use.
type Worker struct {
	cfg     Config
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	skills  []*served
	started atomic.Bool
	// flush makes sure the server has every subscription made so far;
	// tests replace it to make it fail.
	flush func() error

	// ackWaitGiven: Config.AckWait was set, so it is the skills'
	// consumers' rather than taken from them.
	ackWaitGiven bool
	// ackWaitRefresh is ackWaitRefresh as New found it.
	ackWaitRefresh time.Duration

	mu       sync.Mutex
	inflight map[string]map[*call]struct{} // by plan id
	running  int                           // calls in inflight
	// held are the calls this worker runs or reports, each with the
	// deliveries of it that came meanwhile: a delivery of one of them
	// again (its heartbeat came late, or the call was published again) is
	// not run a second time but settled with the run. settled are those it
	// acknowledged lately: a delivery that was on its way when the ack
	// went out is acknowledged again, not run.
	held    map[callKey][]jetstream.Msg
	settled recent[callKey]
	// reconnects is the connection's reconnect count seen last, and
	// reconnectedAt when it was seen to change (mayHaveRunBefore).
	reconnects    uint64
	reconnectedAt time.Time
	// startedAt is when Run began: a call stored before it may have been
	// delivered to another worker before a server crash (mayHaveRunBefore).
	startedAt time.Time
	ended     *endedPlans // cancels received
	// rejects lets a few of the cancels that are not even well formed be
	// logged, 5 at once and then one every 2 s: anyone may publish them
	// while auth is off.
	rejects *rate.Limiter

	// results publishes the calls' results, several in one atomic batch
	// when many finish at once (results.go); resultTuning adjusts it
	// before Run makes it (tests).
	results      *resultPublisher
	resultTuning func(*resultPublisher)

	calls      sync.WaitGroup
	runners    sync.WaitGroup  // goroutines that run calls; they outlive pull until drained
	keepers    sync.WaitGroup  // keepManifests' watchers
	callCtx    context.Context // parent of every call; cancelled when the drain time is up
	callCancel context.CancelCauseFunc
	ready      chan struct{}
	// tracer records planbus.tool.run spans; traced reports whether it
	// records at all.
	tracer trace.Tracer
	traced bool
}

type served struct {
	skill   skill.Skill
	handler skill.Handler
	stats   stats
	log     *slog.Logger // the worker's, with the skill
	// ackWait is the skill's consumer's AckWait as last read, in
	// nanoseconds: heartbeats go out at a third of the shortest.
	ackWait atomic.Int64
}

type stats struct {
	Received  atomic.Int64 `json:"-"`
	Succeeded atomic.Int64 `json:"-"`
	Failed    atomic.Int64 `json:"-"`
	Running   atomic.Int64 `json:"-"`
}

func (s *stats) snapshot() map[string]int64 {
	return map[string]int64{
		"received": s.Received.Load(), "succeeded": s.Succeeded.Load(),
		"failed": s.Failed.Load(), "running": s.Running.Load(),
	}
}

// New checks the config and prepares a worker that serves on nc, through
// JetStream on nc's account. The worker does not own nc: the caller closes
// it after Run has returned. Errors from a bad config match
// ErrInvalidConfig and name the field.
//
// Each skill's handler runs wrapped as skill.Wrap wraps it, with the
// worker's logger and the middleware given WithMiddleware: skill.Logger,
// skill.Recover, skill.Timeout, the middleware, and the skill's
// skill.InputSchema and skill.OutputSchema checks, in that order. The
// call's deadline bounds the middleware too, and the program's middleware
// sees an output the skill's output schema refused as the OUTPUT_INVALID
// error it is reported as.
func New(nc *nats.Conn, cfg Config, opts ...Option) (*Worker, error) {
	given := cfg
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrInvalidConfig)
	}
	if max := int(nc.MaxPayload()) - resultHeadroom; max > 0 && cfg.OutputCap > max {
		if given.OutputCap != 0 {
			return nil, fmt.Errorf("%w: OutputCap: %d, but the server takes messages of at most %d bytes, %d of which a result needs for the rest: want at most %d",
				ErrInvalidConfig, cfg.OutputCap, nc.MaxPayload(), resultHeadroom, max)
		}
		cfg.OutputCap = max
	}
	var o options
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("worker: jetstream: %w", err)
	}
	w := &Worker{
		cfg:            cfg,
		ackWaitGiven:   given.AckWait != 0,
		ackWaitRefresh: ackWaitRefresh,
		held:           map[callKey][]jetstream.Msg{},
		settled:        newRecent[callKey](settledMemory, settledMax),
		nc:             nc,
		js:             js,
		log:            log.With(slog.String("component", "toolworker"), slog.String("worker", cfg.ID)),
		inflight:       map[string]map[*call]struct{}{},
		ended:          newEndedPlans(cancelMemoryTTL, cancelMemoryMax),
		ready:          make(chan struct{}),
	}
	w.flush = func() error { return w.nc.FlushTimeout(flushTimeout) }
	w.tracer = telemetry.Tracer(o.tracer)
	w.traced = telemetry.Records(w.tracer)
	w.rejects = rate.NewLimiter(rate.Every(2*time.Second), 5)
	if nc.AuthRequired() && nc.Opts.InboxPrefix != bus.RoleWorker.InboxPrefix() {
		w.log.Warn("this connection needs authorization but does not use the worker role's inbox prefix; a planbus server refuses its JetStream requests (connect with worker.RoleInbox())",
			slog.String("inbox_prefix", nc.Opts.InboxPrefix))
	}
	handlerLog := w.log
	if o.log == nil {
		handlerLog = nil // skill.Logger's discard logger, rather than one derived for each call
	}
	for _, s := range cfg.Skills {
		h, err := skill.Wrap(s, handlerLog, o.middleware...)
		if err != nil {
			return nil, fmt.Errorf("%w: Skills: %v", ErrInvalidConfig, err)
		}
		w.skills = append(w.skills, &served{skill: s, handler: h, log: w.log.With(slog.String("skill", s.Manifest.Name))})
	}
	return w, nil
}

// Ready is closed once the worker has advertised its skills and is pulling
// calls.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// ID is the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Run serves until ctx ends, then drains: it stops pulling, lets running
// calls finish for up to DrainTimeout and hands the rest back. It returns
// nil after a drain, and an error if it could not start (permissions
// refused, the server not answering); then nothing it started is left
// running. A worker started before planbus waits, saying so in its log,
// until a planner or dispatcher has made the skills bucket and the tools
// stream, or ctx ends. A panic in Run
// becomes an error. Run may be called once; a second call returns
// ErrRunTwice.
func (w *Worker) Run(ctx context.Context) (err error) {
	if !w.started.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	w.mu.Lock()
	w.startedAt = time.Now()
	w.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("worker: panic: %v\n%s", r, debug.Stack())
		}
	}()
	kv, consumers, err := w.advertise(ctx)
	if err != nil {
		return err
	}
	// The keepers end with Run, however it returns.
	defer w.keepers.Wait()
	kctx, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	w.keepManifests(kctx, kv)
	sub, err := w.nc.Subscribe(bus.SubjectCancelAll, w.onCancel)
	if err != nil {
		return fmt.Errorf("worker: subscribe to cancels: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	w.callCtx, w.callCancel = context.WithCancelCause(context.Background())
	defer w.callCancel(nil)
	w.results = newResultPublisher(w.callCtx, w.nc, w.js, w.log, publisherHooks{})
	if w.resultTuning != nil {
		w.resultTuning(w.results)
	}
	svc, err := w.addService()
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	// Nothing runs before the server has the subscriptions: a worker that
	// cannot start must leave no pull loop or heartbeat behind.
	if err := w.flush(); err != nil {
		return fmt.Errorf("worker: flush: %w", err)
	}

	var loops sync.WaitGroup
	for i, s := range w.skills {
		loops.Add(1)
		go func() {
			defer loops.Done()
			w.pull(ctx, s, consumers[i])
		}()
	}
	hbDone := make(chan struct{})
	var hb sync.WaitGroup
	hb.Go(func() { w.heartbeats(hbDone, consumers) })
	w.log.Info("tool worker serving", slog.Any("skills", w.skillNames()), slog.Int("concurrency", w.cfg.Concurrency))
	close(w.ready)

	<-ctx.Done()
	loops.Wait()
	w.drain()
	w.runners.Wait()
	close(hbDone)
	hb.Wait()
	w.log.Info("tool worker stopped")
	return nil
}

// drain waits for running calls, then cancels those left.
func (w *Worker) drain() {
	done := make(chan struct{})
	go func() { w.calls.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(w.cfg.DrainTimeout):
	}
	w.mu.Lock()
	n := w.running
	w.mu.Unlock()
	w.log.Warn("drain time is up; handing running calls back", slog.Int("calls", n), slog.Duration("drain_timeout", w.cfg.DrainTimeout))
	w.callCancel(ErrShuttingDown)
	<-done
}

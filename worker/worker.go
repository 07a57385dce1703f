package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/schemas"
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
	// held are the stream sequences of the calls this worker runs or
	// reports: a delivery of one of them again (its heartbeat came late)
	// is not run a second time. settled are those it acknowledged lately:
	// a delivery that was on its way when the ack went out is acknowledged
	// again, not run.
	held    map[uint64]struct{}
	settled recent[uint64]
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

// callLog adds a call's plan, tool and attempt to the log lines of its
// handling, which are few (errors, and debug lines when enabled): building
// a logger with them for every call cost an allocation a call.
type callLog struct {
	log *slog.Logger
	tc  *planbus.ToolCall
	// seq and stored, when set, are the call message's stream sequence
	// and the time it was stored: they tell two messages of one call apart.
	seq    uint64
	stored time.Time
}

// at logs msg at level with the call's fields and then attrs; it builds
// nothing when the level is disabled.
func (c callLog) at(level slog.Level, msg string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !c.log.Enabled(ctx, level) {
		return
	}
	all := make([]slog.Attr, 0, 5+len(attrs))
	all = append(all, slog.String("plan_id", c.tc.PlanID), slog.String("tool_id", c.tc.ToolID), slog.Int("attempt", c.tc.Attempt))
	if c.seq > 0 {
		all = append(all, slog.Uint64("stream_seq", c.seq), slog.String("stored", c.stored.UTC().Format("2006-01-02T15:04:05.000Z07:00")))
	}
	c.log.LogAttrs(ctx, level, msg, append(all, attrs...)...)
}

func (c callLog) Error(msg string, attrs ...slog.Attr) { c.at(slog.LevelError, msg, attrs...) }
func (c callLog) Warn(msg string, attrs ...slog.Attr)  { c.at(slog.LevelWarn, msg, attrs...) }
func (c callLog) Info(msg string, attrs ...slog.Attr)  { c.at(slog.LevelInfo, msg, attrs...) }
func (c callLog) Debug(msg string, attrs ...slog.Attr) { c.at(slog.LevelDebug, msg, attrs...) }

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

type call struct {
	msg    jetstream.Msg
	planID string
	digest string // the call's cancelDigest
	cancel context.CancelCauseFunc
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
		held:           map[uint64]struct{}{},
		settled:        newRecent[uint64](settledMemory, settledMax),
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

// advertise puts each skill's manifest in the skills bucket and creates or
// updates its consumer; it returns the bucket.
func (w *Worker) advertise(ctx context.Context) (jetstream.KeyValue, []jetstream.Consumer, error) {
	kv, err := w.awaitPlanbus(ctx)
	if err != nil {
		return nil, nil, err
	}
	consumers := make([]jetstream.Consumer, len(w.skills))
	for i, s := range w.skills {
		m := s.skill.Manifest
		b, _ := json.Marshal(m)
		w.compareManifest(ctx, kv, m, b)
		err := w.refusable(ctx, "$KV."+bus.BucketSkills+"."+m.Name, func(ctx context.Context) error {
			_, err := kv.Put(ctx, m.Name, b)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("worker: advertise skill %s: %w", m.Name, err)
		}
		maxAck := 100000
		if m.Concurrency > 0 {
			maxAck = m.Concurrency
		}
		ackWait, err := w.consumerAckWait(ctx, m.Name)
		if err != nil {
			return nil, nil, err
		}
		var cons jetstream.Consumer
		create := "$JS.API.CONSUMER.CREATE." + bus.StreamTools + "." + bus.SkillConsumer(m.Name) + "." + bus.ToolSubject(m.Name)
		err = w.refusable(ctx, create, func(ctx context.Context) (err error) {
			cons, err = w.js.CreateOrUpdateConsumer(ctx, bus.StreamTools, jetstream.ConsumerConfig{
				Durable:       bus.SkillConsumer(m.Name),
				Description:   "planbus: calls of skill " + m.Name + ", shared by its workers",
				FilterSubject: bus.ToolSubject(m.Name),
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       ackWait,
				// Above MaxDeliver, where the worker reports WORKER_CRASH, so
				// that report gets deliveries of its own; then the server
				// stops and the plan's timeout ends the call.
				MaxDeliver:    bus.ConsumerMaxDeliver(w.cfg.MaxDeliver),
				MaxAckPending: maxAck,
				MaxWaiting:    4096,
			})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("worker: consumer for skill %s: %w", m.Name, err)
		}
		s.ackWait.Store(int64(ackWait))
		consumers[i] = cons
	}
	return kv, consumers, nil
}

// compareManifest warns when the skill is advertised with another
// manifest than m (mine is its JSON): another program serving a skill of the
// same name, or another version of this one. Its workers share the
// skill's calls, and the last manifest put is the one planners see.
func (w *Worker) compareManifest(ctx context.Context, kv jetstream.KeyValue, m skill.Manifest, mine []byte) {
	var entry jetstream.KeyValueEntry
	err := w.refusable(ctx, "$JS.API.DIRECT.GET.KV_"+bus.BucketSkills+".$KV."+bus.BucketSkills+"."+m.Name, func(ctx context.Context) (err error) {
		entry, err = kv.Get(ctx, m.Name)
		return err
	})
	if err != nil || bytes.Equal(entry.Value(), mine) {
		return // not advertised yet, or not readable with this seed
	}
	var theirs skill.Manifest
	_ = json.Unmarshal(entry.Value(), &theirs)
	w.log.Warn("the skill is advertised with another manifest than this worker's: every worker serving a skill of this name shares its calls, and the manifest put last (this one) is what planners see; give another program's skill another name",
		slog.String("skill", m.Name), slog.String("advertised_version", theirs.Version), slog.String("version", m.Version))
}

// awaitEvery is how often a worker started before planbus looks again for
// the bucket and stream it needs.
const awaitEvery = time.Second

// awaitPlanbus waits until the skills bucket and the tools stream exist (a
// planner or dispatcher creates them when it starts), saying so once in
// the log, and returns the bucket. It gives up when ctx ends, or at once
// when the server refuses this connection what it needs.
func (w *Worker) awaitPlanbus(ctx context.Context) (jetstream.KeyValue, error) {
	said := false
	for {
		var kv jetstream.KeyValue
		err := w.refusable(ctx, "$JS.API.STREAM.INFO.KV_"+bus.BucketSkills, func(ctx context.Context) (err error) {
			kv, err = w.js.KeyValue(ctx, bus.BucketSkills)
			return err
		})
		missing := "bucket " + bus.BucketSkills
		if err == nil {
			err = w.refusable(ctx, "$JS.API.STREAM.INFO."+bus.StreamTools, func(ctx context.Context) error {
				_, err := w.js.Stream(ctx, bus.StreamTools)
				return err
			})
			missing = "stream " + bus.StreamTools
		}
		switch {
		case err == nil:
			if said {
				w.log.Info("planbus's streams are there; serving")
			}
			return kv, nil
		case !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("worker: %s: %w", missing, err)
		case !said:
			w.log.Warn("waiting for planbus: " + missing + " is not there yet; a planner or dispatcher creates it when it starts")
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("worker: %s: not there (is planbus running on this server?): %w", missing, ctx.Err())
		case <-time.After(awaitEvery):
		}
	}
}

// consumerAckWait is the AckWait to declare skill's consumer with: the
// one it has when it exists and Config.AckWait was not given, so that
// workers of a skill agree; else Config.AckWait, logged when it changes
// the consumer's.
func (w *Worker) consumerAckWait(ctx context.Context, skill string) (time.Duration, error) {
	var info *jetstream.ConsumerInfo
	subject := "$JS.API.CONSUMER.INFO." + bus.StreamTools + "." + bus.SkillConsumer(skill)
	err := w.refusable(ctx, subject, func(ctx context.Context) error {
		c, err := w.js.Consumer(ctx, bus.StreamTools, bus.SkillConsumer(skill))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil
		}
		if err == nil {
			info = c.CachedInfo()
		}
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("worker: consumer for skill %s: %w", skill, err)
	case info == nil:
		return w.cfg.AckWait, nil
	case !w.ackWaitGiven:
		return info.Config.AckWait, nil
	case info.Config.AckWait != w.cfg.AckWait:
		w.log.Warn("this worker's AckWait changes the ack wait of the skill's consumer for every worker of the skill (leave it unset to keep the consumer's)",
			slog.String("skill", skill), slog.Duration("consumer_ack_wait", info.Config.AckWait), slog.Duration("ack_wait", w.cfg.AckWait))
	}
	return w.cfg.AckWait, nil
}

// refusedEvery is how often a request refusable waits on is checked for a
// refusal.
const refusedEvery = 50 * time.Millisecond

// refusable runs op, a request on subject, and ends it as soon as the
// server refuses this connection that subject: a server drops a request
// its sender may not publish and tells why only on the connection's error
// stream (nats.Conn.LastError), so a worker whose credentials do not
// cover a skill would otherwise wait for ever. The error then says so.
func (w *Worker) refusable(ctx context.Context, subject string, op func(context.Context) error) error {
	refused := func() error {
		if le := w.nc.LastError(); le != nil && errors.Is(le, nats.ErrPermissionViolation) && strings.Contains(le.Error(), `"`+subject+`"`) {
			return fmt.Errorf("the server refused it: %w; a worker needs the worker role's seed (worker.nk), or a worker group's that covers the skill (planner auth init --worker), and worker.RoleInbox()", le)
		}
		return nil
	}
	before := w.nc.LastError()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	tick := time.NewTicker(refusedEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				if r := refused(); r != nil && w.nc.LastError() != before {
					return r
				}
			}
			return err
		case <-tick.C:
			if r := refused(); r != nil && w.nc.LastError() != before {
				return r
			}
		}
	}
}

func (w *Worker) skillNames() []string {
	var out []string
	for _, s := range w.skills {
		out = append(out, s.skill.Manifest.Name)
	}
	return out
}

// pull keeps as many calls requested or running as the skill's concurrency
// allows, and never more: a slot is reserved before its call is requested,
// so no call waits in a client buffer where no heartbeat covers it. A new
// pull request goes out only when the open ones can take no more calls;
// until then new calls flow into those, so pull requests are few and large.
func (w *Worker) pull(ctx context.Context, s *served, cons jetstream.Consumer) {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	free, unfilled := w.cfg.Concurrency, 0
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	})
	defer stop()
	release := func(slots, open int) {
		mu.Lock()
		free += slots
		unfilled -= open
		cond.Broadcast()
		mu.Unlock()
	}
	// One long-lived runner per slot: calls reuse their goroutines (and the
	// stacks they grew) instead of starting one each.
	work := make(chan jetstream.Msg)
	var fetchers sync.WaitGroup
	for range w.cfg.Concurrency {
		w.runners.Add(1)
		go func() {
			defer w.runners.Done()
			for msg := range work {
				w.handle(s, msg)
				w.calls.Done()
				release(1, 0)
			}
		}()
	}
	defer func() {
		fetchers.Wait()
		close(work)
	}()
	for {
		mu.Lock()
		for ctx.Err() == nil && (free == 0 || unfilled > 0) {
			cond.Wait()
		}
		if ctx.Err() != nil {
			mu.Unlock()
			return
		}
		n := free
		free, unfilled = 0, n
		mu.Unlock()

		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			release(n, n)
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("fetch failed; retrying", slog.Any("error", err), slog.String("skill", s.skill.Manifest.Name))
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		fetchers.Add(1)
		go func() {
			defer fetchers.Done()
			defer cancel()
			got := 0
			for msg := range batch.Messages() {
				got++
				release(0, 1)
				w.calls.Add(1)
				work <- msg // a runner is free: there are as many as slots
			}
			release(n-got, n-got)
		}()
	}
}

// ackWaitRefresh is how often heartbeats reads the skills' consumers'
// AckWait again: another worker given another AckWait changes it.
var ackWaitRefresh = 5 * time.Second

// heartbeatEvery is how often calls held get a heartbeat: a third of the
// shortest AckWait of the skills' consumers.
func (w *Worker) heartbeatEvery() time.Duration {
	shortest := w.cfg.AckWait
	for _, s := range w.skills {
		if d := time.Duration(s.ackWait.Load()); d > 0 && d < shortest {
			shortest = d
		}
	}
	return max(shortest/3, 50*time.Millisecond)
}

// refreshAckWaits reads each skill's consumer's AckWait again and reports
// whether one changed.
func (w *Worker) refreshAckWaits(consumers []jetstream.Consumer) bool {
	changed := false
	for i, s := range w.skills {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := consumers[i].Info(ctx)
		cancel()
		if err != nil {
			continue
		}
		if d := info.Config.AckWait; s.ackWait.Swap(int64(d)) != int64(d) {
			changed = true
			w.log.Info("the skill's consumer has another ack wait now; heartbeating to it", slog.String("skill", s.skill.Manifest.Name), slog.Duration("ack_wait", d))
		}
	}
	return changed
}

// heartbeats tells JetStream that held calls are still being worked on,
// at a third of the shortest AckWait of the skills' consumers.
func (w *Worker) heartbeats(done <-chan struct{}, consumers []jetstream.Consumer) {
	every := w.heartbeatEvery()
	t := time.NewTicker(every)
	defer t.Stop()
	refresh := time.NewTicker(w.ackWaitRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-done:
			return
		case <-refresh.C:
			if w.refreshAckWaits(consumers) {
				if d := w.heartbeatEvery(); d != every {
					every = d
					t.Reset(every)
				}
			}
		case <-t.C:
			w.mu.Lock()
			msgs := make([]jetstream.Msg, 0, w.running)
			for _, calls := range w.inflight {
				for c := range calls {
					msgs = append(msgs, c.msg)
				}
			}
			w.mu.Unlock()
			for _, m := range msgs {
				_ = m.InProgress()
			}
		}
	}
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

// maxCancelSize bounds the cancels worth decoding; a real one is about
// 100 bytes.
const maxCancelSize = 1024

// onCancel stops the running calls of a plan whose cancel token matches
// their cancelDigest, and remembers the cancel for calls that arrive
// later. A message that is not a well-formed cancel of the subject's plan
// is ignored; one whose token matches no call stops nothing. The work per
// message does not depend on how many cancels came before: a lookup of the
// plan's calls and an O(1) update of the remembered cancels.
func (w *Worker) onCancel(m *nats.Msg) {
	planID := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var c planbus.Cancel
	if len(m.Data) > maxCancelSize {
		if w.rejects.Allow() {
			w.log.Warn("ignoring a cancel larger than any real one", slog.String("subject", m.Subject), slog.Int("bytes", len(m.Data)))
		}
		return
	}
	if err := schemas.Validate(schemas.Cancel, m.Data); err != nil {
		if w.rejects.Allow() {
			w.log.Warn("ignoring an invalid cancel", slog.Any("error", err), slog.String("subject", m.Subject))
		}
		return
	}
	if err := json.Unmarshal(m.Data, &c); err != nil || c.PlanID != planID {
		if w.rejects.Allow() {
			w.log.Warn("ignoring a cancel of another plan", slog.String("subject", m.Subject), slog.String("cancel_plan_id", c.PlanID))
		}
		return
	}
	// Digests are public (every call carries its own), so comparing them
	// needs no constant time; the token is what a forger lacks.
	digest := token.Digest(c.Token)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for cl := range w.inflight[planID] {
		if cl.digest == digest {
			cl.cancel(ErrPlanEnded)
		}
	}
	w.ended.add(planID, digest, now)
}

func (w *Worker) handle(s *served, msg jetstream.Msg) {
	name := s.skill.Manifest.Name
	log := s.log
	defer func() {
		// Skills run under Recover; this catches bugs of the worker itself.
		if r := recover(); r != nil {
			log.Error("worker bug; the call will be redelivered", slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
			_ = msg.NakWithDelay(5 * time.Second)
		}
	}()
	tc, err := wire.DecodeCall(msg.Data())
	if err != nil {
		w.refuseCall(s, msg, err)
		return
	}
	if tc.Skill != name {
		log.Error("dropping a tool call for another skill", slog.String("call_skill", tc.Skill))
		_ = msg.TermWithReason("tool call for skill " + tc.Skill + " on the queue of " + name)
		return
	}
	clog := callLog{log: log, tc: &tc}
	meta, merr := msg.Metadata()
	settled := false // acknowledged: done with, here or by another worker's result
	if merr == nil {
		clog.seq, clog.stored = meta.Sequence.Stream, meta.Timestamp
		// A call delivered again while this worker still runs or reports
		// it (its heartbeat came late) runs once: the first delivery's
		// ack settles both.
		switch w.hold(meta.Sequence.Stream) {
		case holdRunning:
			clog.Debug("delivered again while it runs here; not running it twice", slog.Uint64("deliveries", meta.NumDelivered))
			_ = msg.InProgress()
			return
		case holdSettled:
			clog.Debug("delivered again just after it was settled here; acknowledging it again", slog.Uint64("deliveries", meta.NumDelivered))
			_ = msg.Ack()
			return
		}
		defer func() { w.unhold(meta.Sequence.Stream, settled) }()
	}
	s.stats.Received.Add(1)

	ctx, cancel := context.WithCancelCause(w.callCtx)
	defer cancel(nil)
	c := &call{msg: msg, planID: tc.PlanID, digest: tc.CancelDigest, cancel: cancel}
	if !w.track(c) {
		clog.Debug("plan ended; dropping its call")
		settled = msg.Ack() == nil
		return
	}
	// Tracked calls get heartbeats, while the worker asks whether the
	// call already ran (a question that outlasted the ack wait let the
	// call go to another worker, which asked too, and both ran it), while
	// it runs, and until its result is published: a result stream slow to
	// answer must not let the call run again.
	defer w.untrack(c)

	if merr == nil && (meta.NumDelivered > 1 || w.mayHaveRunBefore(meta.Timestamp)) {
		// Delivered again: it may have run before a crash, its result
		// stored and its acknowledgement lost. A server that crashed may
		// also have lost the record of the delivery, and deliver it again
		// as a first (soak: 19 completed calls re-run in 26 soaks of
		// server kills, each delivered anew with a delivery count of 1):
		// for a while after the connection came back, every call is asked
		// about, and so is a call stored before this worker began.
		ok, why, err := w.alreadySettled(ctx, &tc)
		switch {
		case ok:
			clog.Info("delivered again after its attempt ended; not running it again", slog.Uint64("deliveries", meta.NumDelivered), slog.String("why", why))
			settled = msg.Ack() == nil
			return
		case err != nil && ctx.Err() != nil:
			// Stopped or cancelled while asking: the run below ends at
			// once, as such a run does.
		case err != nil:
			clog.Warn("cannot learn whether the call already ran; running it (at least once)", slog.Any("error", err), slog.Uint64("deliveries", meta.NumDelivered))
		default:
			clog.Debug("delivered again, not run to its end before; running it", slog.Uint64("deliveries", meta.NumDelivered), slog.String("why", why))
		}
	}
	if merr == nil && int(meta.NumDelivered) > w.cfg.MaxDeliver {
		clog.Error("call delivered too often without a result; reporting it failed", slog.Uint64("deliveries", meta.NumDelivered))
		res := w.newResult(&tc, time.Now())
		res.State = planbus.ToolFailed
		res.Error = &planbus.ErrorInfo{Code: planbus.CodeWorkerCrash, Category: planbus.CategoryInternal,
			Message: fmt.Sprintf("delivered %d times without a result: the workers it went to died, hung or were stopped while running it", meta.NumDelivered-1)}
		settled = w.finish(clog, s, msg, res, nil)
		return
	}

	// The call's trace context, when it has one, is the parent of the
	// run's span and travels to the skill in ctx.
	ctx = telemetry.Extract(ctx, msg.Headers())
	span := trace.SpanFromContext(ctx)
	if w.traced {
		ctx, span = w.tracer.Start(ctx, telemetry.SpanToolRun, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			telemetry.AttrPlanID.String(tc.PlanID), telemetry.AttrRequestID.String(tc.RequestID), telemetry.AttrToolID.String(tc.ToolID),
			telemetry.AttrSkill.String(name), telemetry.AttrAttempt.Int(tc.Attempt), telemetry.AttrWorkerID.String(w.cfg.ID)))
		defer span.End()
	}
	s.stats.Running.Add(1)
	started := time.Now()
	w.event(planbus.Event{Type: planbus.EventToolStarted, Time: started, RequestID: tc.RequestID, PlanID: tc.PlanID,
		ToolID: tc.ToolID, Skill: name, Attempt: tc.Attempt, WorkerID: w.cfg.ID})
	// Skills see neither token (a skill.Call has none): they are the
	// worker's to echo, not theirs to pass on.
	out, herr := s.handler.Handle(ctx, skillCall(&tc))
	s.stats.Running.Add(-1)

	if herr != nil {
		switch context.Cause(ctx) {
		case ErrShuttingDown:
			span.SetAttributes(telemetry.AttrState.String("handed back"))
			clog.Info("handing an unfinished call back")
			_ = msg.Nak()
			return
		case ErrPlanEnded:
			clog.Debug("plan ended; dropping its call")
			settled = msg.Ack() == nil
			return
		}
	}
	res := w.result(&tc, out, herr, started)
	if w.traced {
		span.SetAttributes(telemetry.AttrState.String(string(res.State)))
		if res.Error != nil {
			span.SetAttributes(telemetry.AttrErrorCode.String(string(res.Error.Code)))
			span.SetStatus(codes.Error, res.Error.Message)
		}
	}
	settled = w.finish(clog, s, msg, res, telemetry.Inject(ctx, nil))
}

// track adds a call to those in flight, unless a cancel of its plan with
// its digest has arrived: then it reports false.
func (w *Worker) track(c *call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended.ended(c.planID, c.digest, time.Now()) {
		return false
	}
	calls := w.inflight[c.planID]
	if calls == nil {
		calls = map[*call]struct{}{}
		w.inflight[c.planID] = calls
	}
	calls[c] = struct{}{}
	w.running++
	return true
}

// What hold found of a call.
const (
	holdTaken   = iota // the call is this worker's to run now
	holdRunning        // this worker runs or reports it already
	holdSettled        // this worker acknowledged it a moment ago
)

// settledMemory is how long a worker remembers the calls it acknowledged,
// and settledMax how many at most: a delivery already on its way when the
// ack went out arrives within moments.
const (
	settledMemory = time.Minute
	settledMax    = 1 << 16
)

// hold records that the call of stream sequence seq is this worker's to
// run and report, unless it already runs here or was settled here lately.
func (w *Worker) hold(seq uint64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.held[seq]; ok {
		return holdRunning
	}
	if w.settled.has(seq, time.Now()) {
		return holdSettled
	}
	w.held[seq] = struct{}{}
	return holdTaken
}

// unhold ends hold; settled records that the call was acknowledged.
func (w *Worker) unhold(seq uint64, settled bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.held, seq)
	if settled {
		w.settled.put(seq, time.Now())
	}
}

func (w *Worker) untrack(c *call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := w.inflight[c.planID]
	delete(calls, c)
	if len(calls) == 0 {
		delete(w.inflight, c.planID)
	}
	w.running--
}

// result turns what a handler returned into the call's result, holding
// outputs to the cap and to JSON.
func (w *Worker) result(tc *planbus.ToolCall, out skill.Result, herr error, started time.Time) *planbus.ToolResult {
	res := w.newResult(tc, started)
	switch {
	case herr != nil:
		info, output := skill.ErrorInfo(herr)
		res.Error, res.Output = info, output
		res.State = planbus.ToolFailed
		if info.Category == planbus.CategoryTimeout {
			res.State = planbus.ToolTimeout
		}
	case len(out.Output) > w.cfg.OutputCap:
		res.State = planbus.ToolFailed
		res.Error = &planbus.ErrorInfo{Code: planbus.CodeOutputTooLarge, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("output of %d bytes exceeds the worker's cap of %d", len(out.Output), w.cfg.OutputCap)}
	case len(out.StatePatch) > w.cfg.OutputCap:
		res.State = planbus.ToolFailed
		res.Error = &planbus.ErrorInfo{Code: planbus.CodeOutputTooLarge, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("state patch of %d bytes exceeds the worker's cap of %d", len(out.StatePatch), w.cfg.OutputCap)}
	default:
		if err := out.Check(); err != nil {
			res.State = planbus.ToolFailed
			res.Error, _ = skill.ErrorInfo(err)
			break
		}
		res.State = planbus.ToolSucceeded
		res.Output, res.StatePatch = out.Output, out.StatePatch
	}
	return res
}

// skillCall is what a handler is given of the call tc: its metadata and
// input, without its tokens.
func skillCall(tc *planbus.ToolCall) *skill.Call {
	return &skill.Call{PlanID: tc.PlanID, RequestID: tc.RequestID, ToolID: tc.ToolID, Skill: tc.Skill,
		Attempt: tc.Attempt, MaxAttempts: tc.MaxAttempts, Input: tc.Input,
		Timeout: time.Duration(tc.TimeoutMs) * time.Millisecond, ReleasedAt: tc.ReleasedAt}
}

// settledWait bounds a worker's question whether a call delivered again
// already ended; settledWindow is how long after its connection came back
// a worker asks about every call.
const (
	settledWait   = 15 * time.Second
	settledWindow = time.Minute
)

// mayHaveRunBefore reports whether a call delivered for the first time
// may still have been delivered before, to be asked about: a server that
// crashed can lose the record of deliveries and deliver calls again as
// first deliveries. So within settledWindow after the worker's connection
// came back from a lost server, every call is asked about; and within
// settledWindow of the worker's start, every call stored before it began
// (a worker started after the crash, as the soak restarts killed workers,
// gets the forgotten deliveries too, though its connection never came
// back from anything: soak, 4 completed calls run again by a worker
// started 3 s after their first run). Calls newer than the worker, the
// usual case, are not asked about. It reads the connection's reconnect
// count, so it needs no handler of the connection, which is the caller's.
func (w *Worker) mayHaveRunBefore(stored time.Time) bool {
	now := time.Now()
	n := w.nc.Stats().Reconnects
	w.mu.Lock()
	defer w.mu.Unlock()
	if n != w.reconnects {
		w.reconnects, w.reconnectedAt = n, now
	}
	return !w.reconnectedAt.IsZero() && now.Sub(w.reconnectedAt) < settledWindow ||
		stored.Before(w.startedAt) && now.Sub(w.startedAt) < settledWindow
}

// errNoSettledAnswer is alreadySettled's error when no dispatcher could
// tell.
var errNoSettledAnswer = errors.New("no dispatcher could tell")

// alreadySettled asks the dispatchers whether the call's attempt already
// ended (see planbus.SettledQuery), and why. A dispatcher that cannot tell
// for the moment (it answers with an error: the server it reads from is
// just back from a crash, a stream leader moves) or no answer at all is
// asked again, with backoff, for up to settledWait; then, with still no
// answer, it returns an error and the call runs: at least once. "No
// responders" is asked again too: just after a server came back, the
// dispatchers may not have reconnected yet, and the call was published by
// one.
func (w *Worker) alreadySettled(ctx context.Context, tc *planbus.ToolCall) (bool, string, error) {
	q, _ := json.Marshal(planbus.SettledQuery{PlanID: tc.PlanID, ToolID: tc.ToolID, Attempt: tc.Attempt, Token: tc.Token})
	ctx, cancel := context.WithTimeout(ctx, settledWait)
	defer cancel()
	var r planbus.SettledReply
	ask := func() error {
		reqCtx, reqCancel := context.WithTimeout(ctx, 5*time.Second)
		defer reqCancel()
		m, err := w.nc.RequestWithContext(reqCtx, bus.SubjectCallSettled, q)
		switch {
		case err != nil:
			return err
		case m.Header.Get("Nats-Service-Error-Code") != "":
			return fmt.Errorf("a dispatcher answered %s %s", m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error"))
		}
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return backoff.Permanent(fmt.Errorf("the answer does not decode: %w", err))
		}
		return nil
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 2*time.Second, 0 // ctx ends it
	last := error(nil)                                                                          // the last answer's error: Retry returns ctx's when time is up
	if err := backoff.RetryNotify(ask, backoff.WithContext(b, ctx), func(err error, _ time.Duration) { last = err }); err != nil {
		if last == nil {
			last = err
		}
		return false, "", fmt.Errorf("%w within %s: %v", errNoSettledAnswer, settledWait, last)
	}
	return r.Settled, r.Why, nil
}

// refuseCall answers a call that does not decode, err says why: one that
// names its plan, tool, attempt and token, as a call of this skill, gets a
// failed result (INVALID_CALL, invalid_input) at once, so that its plan
// moves on rather than wait for its timeout; anything else is dropped.
func (w *Worker) refuseCall(s *served, msg jetstream.Msg, err error) {
	log := s.log
	var tc planbus.ToolCall
	if wire.Lenient(msg.Data(), &tc) != nil || tc.Skill != s.skill.Manifest.Name || !wire.IsID(tc.PlanID) ||
		!wire.IsID(tc.RequestID) || !wire.IsToolID(tc.ToolID) || tc.Attempt < 1 || !wire.IsToken(tc.Token) {
		log.Error("dropping an invalid tool call", slog.Any("error", err), slog.String("subject", msg.Subject()))
		_ = msg.TermWithReason("invalid tool call: " + err.Error())
		return
	}
	clog := callLog{log: log, tc: &tc}
	clog.Warn("cannot decode the call; reporting it failed", slog.Any("error", err))
	s.stats.Received.Add(1)
	res := w.newResult(&tc, time.Now())
	res.State = planbus.ToolFailed
	res.Error = &planbus.ErrorInfo{Code: planbus.CodeInvalidCall, Category: planbus.CategoryInvalidInput,
		Message: "the worker cannot decode this call: " + err.Error()}
	w.finish(clog, s, msg, res, nil)
}

func (w *Worker) newResult(tc *planbus.ToolCall, started time.Time) *planbus.ToolResult {
	now := time.Now()
	return &planbus.ToolResult{
		PlanID: tc.PlanID, RequestID: tc.RequestID, ToolID: tc.ToolID, Skill: tc.Skill, Attempt: tc.Attempt,
		WorkerID: w.cfg.ID, StartedAt: started, FinishedAt: now,
		DurationMs: float64(now.Sub(started).Microseconds()) / 1000, Token: tc.Token,
	}
}

// finish publishes the result, waits for JetStream to store it, and only
// then acknowledges the call. It reports whether the call is settled: its
// result stored (false: handed back for another delivery).
//
// h, when not nil, is the trace context the result carries: the run's span.
func (w *Worker) finish(log callLog, s *served, msg jetstream.Msg, res *planbus.ToolResult, h nats.Header) (settled bool) {
	if res.State == planbus.ToolSucceeded {
		s.stats.Succeeded.Add(1)
	} else {
		s.stats.Failed.Add(1)
	}
	data, err := wire.AppendResult(make([]byte, 0, 384+len(res.Output)+len(res.StatePatch)), res)
	if err != nil {
		// A bug of the worker (result checks what a skill returns):
		// report the attempt failed rather than run it again and again.
		log.Error("cannot encode result; reporting the attempt failed", slog.Any("error", err))
		failed := *res
		failed.State, failed.Output, failed.StatePatch = planbus.ToolFailed, nil, nil
		failed.Error = &planbus.ErrorInfo{Code: planbus.CodeToolFailed, Category: planbus.CategoryInternal,
			Message: "the worker could not encode the skill's result: " + err.Error()}
		if data, err = wire.AppendResult(nil, &failed); err != nil {
			_ = msg.NakWithDelay(5 * time.Second)
			return false
		}
	}
	key := token.MsgID(planbus.IdempotencyKey(res.PlanID, res.ToolID, res.Attempt), res.Token)
	err = w.publishResult(res.PlanID, data, key, h)
	if errors.Is(err, nats.ErrMaxPayload) {
		// Output and state patch within the cap, and yet more than the
		// server takes: the same result would never fit.
		size := len(data)
		tooLarge := *res
		tooLarge.State, tooLarge.Output, tooLarge.StatePatch = planbus.ToolFailed, nil, nil
		tooLarge.Error = &planbus.ErrorInfo{Code: planbus.CodeOutputTooLarge, Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("the result takes %d bytes, over the server's max payload of %d", size, w.nc.MaxPayload())}
		if data, err = wire.AppendResult(nil, &tooLarge); err == nil {
			err = w.publishResult(res.PlanID, data, key, h)
		}
	}
	if err != nil {
		log.Error("cannot publish result; the call will be redelivered", slog.Any("error", err))
		_ = msg.Nak()
		return false
	}
	// The result is stored: the call is done with, whatever becomes of
	// the ack.
	if err := msg.Ack(); err != nil {
		log.Warn("ack failed; the call may run again (its result is de-duplicated)", slog.Any("error", err))
	}
	if res.Error != nil {
		// Failures are what an operator looks for in a worker's log.
		log.Info("call failed", slog.String("state", string(res.State)), slog.String("code", string(res.Error.Code)),
			slog.String("category", string(res.Error.Category)), slog.String("error", res.Error.Message))
		return true
	}
	log.Debug("call finished", slog.String("state", string(res.State)))
	return true
}

// resultHeadroom is what a result needs besides its output: ids, times,
// token, error, and the message's headers.
const resultHeadroom = 64 << 10

// publishResult publishes a result to the results stream, retrying with
// backoff for up to 30 s while the stream does not answer; a result too
// large for the server is not retried (nats.ErrMaxPayload).
func (w *Worker) publishResult(planID string, data []byte, key string, h nats.Header) error {
	publish := func() error {
		ctx, cancel := context.WithTimeout(w.callCtx, 5*time.Second)
		defer cancel()
		var err error
		if h == nil {
			_, err = w.js.Publish(ctx, bus.ResultSubject(planID), data, jetstream.WithMsgID(key))
		} else {
			_, err = w.js.PublishMsg(ctx, &nats.Msg{Subject: bus.ResultSubject(planID), Data: data, Header: h}, jetstream.WithMsgID(key))
		}
		if errors.Is(err, nats.ErrMaxPayload) {
			return backoff.Permanent(err)
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxElapsedTime = 30 * time.Second
	return backoff.Retry(publish, backoff.WithContext(b, w.callCtx))
}

// event publishes a progress event. Events are best effort: they are for
// watching, and nothing depends on them.
func (w *Worker) event(ev planbus.Event) {
	data, err := wire.AppendEvent(make([]byte, 0, 320), &ev)
	if err != nil {
		return
	}
	_ = w.nc.Publish(bus.EventSubject(ev.RequestID, ev.Type), data)
}

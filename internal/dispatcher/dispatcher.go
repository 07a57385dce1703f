package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/health"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/token"
)

type kind uint8

const (
	kindPlan kind = iota
	kindResult
	kindTimer
)

type item struct {
	kind        kind
	msg         jetstream.Msg
	planID      string
	redelivered bool
	seq         uint64 // stream sequence of the message
	result      *planbus.ToolResult
	timer       execution.Timer
}

type entry struct {
	eng *execution.Engine
	rev uint64
	// scheduled is set once this process has stored the plan's timeout
	// schedule: it is purged when the plan ends (timeouts.go). The
	// shard's acker sets it.
	scheduled atomic.Bool
	// cancelDigest is what the plan's calls carry: the digest of its
	// cancel token. Set when the first call is rendered.
	cancelDigest string
	// stateBuf holds the last state written, its storage reused for the
	// next.
	stateBuf []byte
	// ended is set once the plan has ended in this entry's engine, for
	// the goroutine that publishes held timeout timers (behind.go).
	ended atomic.Bool
}

type shard struct {
	in    chan item
	acks  chan pending
	cache map[string]*entry
	plans map[string]*plan.Plan
	// results are the results of the plans in plans, by RESULTS stream
	// sequence, as applied or read back: a state rebuilt after another
	// dispatcher moved the plan on reads only the results it has not
	// seen, not every result of the plan again.
	results map[string]map[uint64]*planbus.ToolResult
}

// pending is a batch whose state is stored and whose effects are sent:
// once JetStream has stored them, its messages are acknowledged. A shard
// hands pendings to its acker and goes on with the next batch, so waiting
// for publish acknowledgements never holds up the plans of the shard.
type pending struct {
	planID       string
	ent          *entry
	futures      []jetstream.PubAckFuture
	timeoutTimer int // index in futures of the plan's timeout timer, or -1
	// timer is the plan's timeout timer when it waits with the batch's
	// acknowledgement (behind.go), not published yet.
	timer        *nats.Msg
	cancel, done bool
	doneState    planbus.PlanState // the state the plan ended in, when done
	ack          []item
}

// Dispatcher executes plans. Create it with New and start it with Run.
type Dispatcher struct {
	cfg  Config
	conn *bus.Conn
	log  zerolog.Logger
	kv   jetstream.KeyValue
	// purged receives the answers to unschedule's purges (timeouts.go).
	purged  *nats.Subscription
	tools   jetstream.Stream
	results jetstream.Stream
	shards  []*shard
	skills  *skillSet
	health  *health.Book
	states  *session.Store
	stats   counters
	metrics *metrics.Dispatcher
	ready   chan struct{}
	// key signs calls and checks results; loaded in Run.
	key *token.Key
	// rejectLog logs dropped results, a few per period: forged results can
	// arrive faster than anyone could read a line each.
	rejectLog zerolog.Logger
	// tracer records plan and tool spans; traced reports whether it
	// records at all, so a process without tracing skips the work.
	tracer trace.Tracer
	traced bool
	// parts are the partitions of plans this dispatcher consumes.
	parts partitions
	// keeper keeps the tool queue's last block from emptying.
	keeper keeper
	// behind holds the acknowledgements of messages whose handling wrote
	// plan states or calls the server writes behind (behind.go).
	behind *acksBehind
	// readers bounds the reads of a plan's stored results running at
	// once (storedAttempts): each is a consumer of the results stream,
	// which holds at most 1,000 by default.
	readers chan struct{}
	// closed is closed when the connection is: the publishes a batch
	// awaits will then never be acknowledged.
	closed chan struct{}
}

type counters struct {
	PlansStarted  atomic.Int64
	PlansRejected atomic.Int64
	PlansEnded    atomic.Int64
	Results       atomic.Int64
	Timers        atomic.Int64
	Conflicts     atomic.Int64
	Batches       atomic.Int64
	Released      atomic.Int64
	// ReadBack counts results read back from the RESULTS stream to
	// rebuild a plan's state (after a failover, or after another
	// dispatcher moved the plan on).
	ReadBack atomic.Int64
	// ResultsRejected counts results dropped unapplied: invalid, on another
	// plan's subject, or without their call's token.
	ResultsRejected atomic.Int64
	// SettledAnswered counts the calls delivered again it told a worker
	// not to run (planbus.dispatcher.settled).
	SettledAnswered atomic.Int64
	// Dropped counts messages given up at their delivery limit, and
	// invalid timers.
	Dropped atomic.Int64
	// IntakeWaits counts plans that waited to be started while their
	// shard was behind (intake.go).
	IntakeWaits atomic.Int64
}

// New checks the config and prepares a dispatcher on conn.
func New(conn *bus.Conn, cfg Config, log zerolog.Logger) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, conn: conn, log: log.With().Str("component", "dispatcher").Str("dispatcher", cfg.ID).Logger(),
		ready: make(chan struct{}), closed: make(chan struct{}), readers: make(chan struct{}, maxReaders), metrics: cfg.Metrics.Dispatcher()}
	d.tracer = telemetry.Tracer(cfg.Tracer)
	d.traced = telemetry.Records(d.tracer)
	d.rejectLog = d.log.Sample(&zerolog.BurstSampler{Burst: rejectLogBurst, Period: rejectLogPeriod})
	for range cfg.Shards {
		d.shards = append(d.shards, &shard{in: make(chan item, 1024), acks: make(chan pending, 1024),
			cache: map[string]*entry{}, plans: map[string]*plan.Plan{}, results: map[string]map[uint64]*planbus.ToolResult{}})
	}
	return d, nil
}

// Ready is closed once the dispatcher is consuming.
func (d *Dispatcher) Ready() <-chan struct{} { return d.ready }

// Run dispatches until ctx ends, then stops taking messages, finishes the
// batches in hand and returns. It returns an error only if it could not
// start.
func (d *Dispatcher) Run(ctx context.Context) error {
	var err error
	if d.key, err = token.Load(ctx, d.conn.JS); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	if d.kv, err = d.conn.JS.KeyValue(ctx, bus.BucketPlans); err != nil {
		return fmt.Errorf("dispatcher: plans bucket: %w", err)
	}
	if d.tools, err = d.conn.JS.Stream(ctx, bus.StreamTools); err != nil {
		return fmt.Errorf("dispatcher: tools stream: %w", err)
	}
	if d.results, err = d.conn.JS.Stream(ctx, bus.StreamResults); err != nil {
		return fmt.Errorf("dispatcher: results stream: %w", err)
	}
	if d.purged, err = d.subscribePurged(); err != nil {
		return fmt.Errorf("dispatcher: subscribe: %w", err)
	}
	defer func() { _ = d.purged.Unsubscribe() }()
	delay, err := d.writeBehind(ctx)
	if err != nil {
		return err
	}
	d.behind = newAcksBehind(delay)
	d.behind.grace = max(d.cfg.TimeoutGrace, 0)
	d.behind.gone = d.closed
	d.behind.publish = func(m *nats.Msg) (jetstream.PubAckFuture, error) {
		return d.conn.JS.PublishMsgAsync(m, jetstream.WithMsgID(m.Header.Get(jetstream.MsgIDHeader)))
	}
	d.behind.handBack = func(items []item, err error) {
		d.log.Error().Err(err).Msg("messages will be redelivered")
		d.handBack(d.log, items, time.Second, err)
	}
	if d.behind.holds() {
		go d.behind.run()
		defer d.behind.stop()
	}
	if d.skills, err = watchSkills(ctx, d.conn.JS); err != nil {
		return err
	}
	defer d.skills.stop()
	defer d.cfg.Metrics.AddSkillSource(metrics.SkillSource{Skills: d.skills.list, JS: d.conn.JS, NC: d.conn.NC})()
	if d.cfg.KnownSkill == nil {
		d.cfg.KnownSkill = d.skills.has
	}
	if d.health, err = health.Open(ctx, d.conn.JS); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	defer d.health.Close()
	if d.states, err = session.Open(ctx, d.conn.JS); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	statuses := d.conn.NC.StatusChanged(nats.CLOSED)
	go func() {
		// A status, not the channel closed by RemoveStatusListener as
		// Run returns: the connection is closed.
		if _, ok := <-statuses; ok {
			close(d.closed)
		}
	}()
	defer d.conn.NC.RemoveStatusListener(statuses)
	var shardsDone, ackersDone sync.WaitGroup
	for _, s := range d.shards {
		shardsDone.Add(1)
		go func() {
			defer shardsDone.Done()
			d.runShard(s)
		}()
		ackersDone.Add(1)
		go func() {
			defer ackersDone.Done()
			for pd := range s.acks {
				d.settle(pd)
			}
		}()
	}
	defer func() {
		for _, s := range d.shards {
			close(s.in)
		}
		shardsDone.Wait()
		for _, s := range d.shards {
			close(s.acks)
		}
		ackersDone.Wait()
	}()
	// The micro service answers the other dispatchers' pings, which share
	// the partitions out (partitions.go).
	svc, err := d.addService()
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	d.parts = partitions{n: d.conn.Config.Defaults().Partitions, self: svc.Info().ID, owned: map[int][]jetstream.ConsumeContext{}}
	if err := d.conn.NC.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("dispatcher: flush: %w", err)
	}
	defer d.stopConsuming()
	err = d.consumeShared(ctx)
	if err == nil {
		err = d.balance(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	balanced := make(chan struct{})
	go func() {
		defer close(balanced)
		d.runBalance(ctx)
	}()
	defer func() { <-balanced }()
	d.log.Info().Int("shards", d.cfg.Shards).Ints("partitions", d.Partitions()).Dur("write_behind", delay).Msg("dispatcher running")
	close(d.ready)
	<-ctx.Done()
	d.log.Info().Msg("dispatcher stopping")
	return nil
}

// route decodes just enough of a message to pick its plan's shard.
func (d *Dispatcher) route(k kind, m jetstream.Msg) {
	it := item{kind: k, msg: m}
	subj := m.Subject()
	it.planID = bus.PlanOfSubject(subj)
	if meta, err := m.Metadata(); err == nil {
		it.redelivered, it.seq = meta.NumDelivered > 1, meta.Sequence.Stream
	}
	switch k {
	case kindTimer:
		var tm execution.TimerMessage
		if err := json.Unmarshal(m.Data(), &tm); err != nil || tm.PlanID != it.planID {
			d.stats.Dropped.Add(1)
			d.metrics.Dropped()
			d.log.Error().Str("subject", subj).Msg("dropping an invalid timer")
			_ = m.TermWithReason("invalid timer")
			return
		}
		it.timer = tm.Timer()
		if wait := time.Until(it.timer.FireAt); wait > 0 {
			// Not due (a retry's backoff; a timeout whose schedule fired
			// by a clock ahead of this one): JetStream holds it and
			// delivers it again when it is.
			_ = m.NakWithDelay(wait)
			return
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(it.planID))
	s := d.shards[h.Sum32()%uint32(len(d.shards))]
	if k == kindPlan {
		d.awaitRoom(s, m)
	}
	s.in <- it
}

func (d *Dispatcher) runShard(s *shard) {
	for first := range s.in {
		batch := []item{first}
	more:
		for len(batch) < d.cfg.MaxBatch {
			select {
			case it, ok := <-s.in:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		d.stats.Batches.Add(1)
		var order []string
		groups := map[string][]item{}
		for _, it := range batch {
			if _, ok := groups[it.planID]; !ok {
				order = append(order, it.planID)
			}
			groups[it.planID] = append(groups[it.planID], it)
		}
		for _, id := range order {
			d.process(s, id, groups[id])
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dispatcher: encode %T: %v", v, err)) // only our own types are encoded
	}
	return b
}

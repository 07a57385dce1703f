package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/schemas"
)

// errNoPlan: a result or timer arrived for a plan with no stored state
// (expired, or never started).
var errNoPlan = errors.New("dispatcher: no such plan")

// casRetries bounds how often one batch is reapplied after losing a
// compare-and-set to another dispatcher before it is handed back.
const casRetries = 20

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
	result      *plan.ToolResult
	timer       execution.Timer
}

// timerMsg is the body of a message on planbus.timers.<planId>.
type timerMsg struct {
	PlanID  string `json:"planId"`
	Kind    string `json:"kind"`
	Tool    int    `json:"tool,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	FireAt  int64  `json:"fireAt"` // Unix ms
}

type entry struct {
	eng *execution.Engine
	rev uint64
	// timerSeq is the TIMERS stream sequence of the plan's timeout timer,
	// when this process published it: it is deleted when the plan ends, so
	// it does not wait in the consumer until it is due. The shard's acker
	// sets it.
	timerSeq atomic.Uint64
}

type shard struct {
	in    chan item
	acks  chan pending
	cache map[string]*entry
	plans map[string]*plan.Plan
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
	cancel, done bool
	ack          []jetstream.Msg
}

// Dispatcher executes plans. Create it with New and start it with Run.
type Dispatcher struct {
	cfg     Config
	conn    *bus.Conn
	log     zerolog.Logger
	kv      jetstream.KeyValue
	timers  jetstream.Stream
	results jetstream.Stream
	shards  []*shard
	skills  *skillSet
	health  *skills.HealthBook
	states  *session.Store
	stats   counters
	ready   chan struct{}
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
}

// New checks the config and prepares a dispatcher on conn.
func New(conn *bus.Conn, cfg Config, log zerolog.Logger) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, conn: conn, log: log.With().Str("component", "dispatcher").Str("dispatcher", cfg.ID).Logger(),
		ready: make(chan struct{})}
	for range cfg.Shards {
		d.shards = append(d.shards, &shard{in: make(chan item, 1024), acks: make(chan pending, 1024),
			cache: map[string]*entry{}, plans: map[string]*plan.Plan{}})
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
	if d.kv, err = d.conn.JS.KeyValue(ctx, bus.BucketPlans); err != nil {
		return fmt.Errorf("dispatcher: plans bucket: %w", err)
	}
	if d.timers, err = d.conn.JS.Stream(ctx, bus.StreamTimers); err != nil {
		return fmt.Errorf("dispatcher: timers stream: %w", err)
	}
	if d.results, err = d.conn.JS.Stream(ctx, bus.StreamResults); err != nil {
		return fmt.Errorf("dispatcher: results stream: %w", err)
	}
	if d.skills, err = watchSkills(ctx, d.conn.JS); err != nil {
		return err
	}
	defer d.skills.stop()
	if d.cfg.KnownSkill == nil {
		d.cfg.KnownSkill = d.skills.has
	}
	if d.health, err = skills.OpenHealthBook(ctx, d.conn.JS); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	defer d.health.Close()
	if d.states, err = session.Open(ctx, d.conn.JS); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	type source struct {
		stream, durable, filter string
		kind                    kind
		maxAck                  int
	}
	sources := []source{
		{bus.StreamPlans, bus.ConsumerDispatcherPlans, bus.SubjectPlansAll, kindPlan, 1000},
		{bus.StreamResults, bus.ConsumerDispatcherResults, bus.SubjectResultsAll, kindResult, 20000},
		{bus.StreamTimers, bus.ConsumerDispatcherTimers, bus.SubjectTimersAll, kindTimer, 200000},
	}
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
	var consuming []jetstream.ConsumeContext
	defer func() {
		for _, cc := range consuming {
			cc.Stop()
			<-cc.Closed()
		}
	}()
	for _, src := range sources {
		cons, err := d.conn.JS.CreateOrUpdateConsumer(ctx, src.stream, jetstream.ConsumerConfig{
			Durable:       src.durable,
			Description:   "planbus: shared by every dispatcher",
			FilterSubject: src.filter,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       d.cfg.AckWait,
			MaxDeliver:    -1,
			MaxAckPending: src.maxAck,
		})
		if err != nil {
			return fmt.Errorf("dispatcher: consumer %s: %w", src.durable, err)
		}
		k := src.kind
		cc, err := cons.Consume(func(m jetstream.Msg) { d.route(k, m) },
			jetstream.PullMaxMessages(512),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
					d.log.Debug().Err(err).Str("consumer", src.durable).Msg("consume")
				}
			}))
		if err != nil {
			return fmt.Errorf("dispatcher: consume %s: %w", src.durable, err)
		}
		consuming = append(consuming, cc)
	}
	svc, err := d.addService()
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	if err := d.conn.NC.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("dispatcher: flush: %w", err)
	}
	d.log.Info().Int("shards", d.cfg.Shards).Msg("dispatcher running")
	close(d.ready)
	<-ctx.Done()
	d.log.Info().Msg("dispatcher stopping")
	return nil
}

// route decodes just enough of a message to pick its plan's shard.
func (d *Dispatcher) route(k kind, m jetstream.Msg) {
	it := item{kind: k, msg: m}
	subj := m.Subject()
	it.planID = subj[strings.LastIndexByte(subj, '.')+1:]
	if meta, err := m.Metadata(); err == nil {
		it.redelivered, it.seq = meta.NumDelivered > 1, meta.Sequence.Stream
	}
	switch k {
	case kindTimer:
		var tm timerMsg
		if err := json.Unmarshal(m.Data(), &tm); err != nil || tm.PlanID != it.planID {
			d.log.Error().Str("subject", subj).Msg("dropping an invalid timer")
			_ = m.TermWithReason("invalid timer")
			return
		}
		fireAt := time.UnixMilli(tm.FireAt)
		if wait := time.Until(fireAt); wait > 0 {
			// Not due: JetStream holds it and delivers it again when it is.
			_ = m.NakWithDelay(wait)
			return
		}
		it.timer = execution.Timer{Kind: tm.Kind, Index: tm.Tool, Attempt: tm.Attempt, FireAt: fireAt}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(it.planID))
	d.shards[h.Sum32()%uint32(len(d.shards))].in <- it
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

// opTimeout bounds each round of KV and publish calls for one batch.
const opTimeout = 10 * time.Second

func (d *Dispatcher) process(s *shard, planID string, items []item) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	log := d.log.With().Str("plan_id", planID).Logger()
	defer func() {
		// A bug must not take every plan of the process down with it: log
		// it, forget the plan's cached engine and hand the messages back.
		if r := recover(); r != nil {
			log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("dispatcher bug; messages will be redelivered")
			d.forget(s, planID)
			nakAll(items, 5*time.Second)
		}
	}()
	var rest []item
	for _, it := range items {
		switch it.kind {
		case kindPlan:
			d.startPlan(ctx, s, log, it)
		case kindResult:
			if r := d.decodeResult(log, it.msg); r != nil {
				it.result = r
				rest = append(rest, it)
			}
		default:
			rest = append(rest, it)
		}
	}
	if len(rest) == 0 {
		return
	}
	for try := 0; try < casRetries; try++ {
		ent, err := d.entry(ctx, s, planID)
		if errors.Is(err, errNoPlan) {
			log.Warn().Int("messages", len(rest)).Msg("results or timers for a plan with no state; dropping them")
			ackAll(rest)
			return
		}
		if err != nil {
			log.Error().Err(err).Msg("cannot load plan state; messages will be redelivered")
			nakAll(rest, time.Second)
			return
		}
		now := time.Now()
		var fx execution.Effects
		redelivered := false
		for _, it := range rest {
			switch it.kind {
			case kindResult:
				d.stats.Results.Add(1)
				fx.Merge(ent.eng.OnResultSeq(it.result, it.seq, now))
			case kindTimer:
				d.stats.Timers.Add(1)
				fx.Merge(ent.eng.OnTimer(it.timer, now))
			}
			redelivered = redelivered || it.redelivered
		}
		if err := d.learn(ctx, log, ent.eng, fx.Applied); err != nil {
			log.Error().Err(err).Msg("cannot record skill health or session state; messages will be redelivered")
			delete(s.cache, planID)
			nakAll(rest, time.Second)
			return
		}
		if redelivered {
			// This message may have been handled before by a dispatcher
			// that died before finishing: redo what the state implies.
			fx.Merge(ent.eng.Outstanding())
		}
		out := d.render(ent, &fx, now)
		if fx.Changed {
			rev, err := d.kv.Update(ctx, bus.StateKey(planID), mustJSON(ent.eng.State().Store()), ent.rev)
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				// Another dispatcher changed the plan: start again from its state.
				d.stats.Conflicts.Add(1)
				delete(s.cache, planID)
				continue
			}
			if err != nil {
				log.Error().Err(err).Msg("cannot store plan state; messages will be redelivered")
				delete(s.cache, planID)
				nakAll(rest, time.Second)
				return
			}
			ent.rev = rev
		}
		pd, err := d.send(ent, fx, out)
		if err != nil {
			log.Error().Err(err).Msg("cannot publish effects; messages will be redelivered")
			delete(s.cache, planID)
			nakAll(rest, time.Second)
			return
		}
		for _, it := range rest {
			pd.ack = append(pd.ack, it.msg)
		}
		s.acks <- pd
		if ent.eng.Done() {
			d.forget(s, planID)
		}
		return
	}
	log.Warn().Int("tries", casRetries).Msg("lost every compare-and-set; messages will be redelivered")
	nakAll(rest, 100*time.Millisecond)
}

// decodeResult validates a tool result; an invalid one is terminated.
func (d *Dispatcher) decodeResult(log zerolog.Logger, m jetstream.Msg) *plan.ToolResult {
	if err := schemas.Validate(schemas.ToolResult, m.Data()); err != nil {
		log.Error().Err(err).Str("subject", m.Subject()).Msg("dropping an invalid tool result")
		_ = m.TermWithReason("invalid tool result: " + err.Error())
		return nil
	}
	var r plan.ToolResult
	if err := json.Unmarshal(m.Data(), &r); err != nil || bus.ResultSubject(r.PlanID) != m.Subject() {
		log.Error().Str("subject", m.Subject()).Str("result_plan_id", r.PlanID).Msg("dropping a tool result published on another plan's subject")
		_ = m.TermWithReason("result subject and planId differ")
		return nil
	}
	return &r
}

func (d *Dispatcher) forget(s *shard, planID string) {
	delete(s.cache, planID)
	delete(s.plans, planID)
}

// entry returns the plan's engine, from the cache or rebuilt from KV.
func (d *Dispatcher) entry(ctx context.Context, s *shard, planID string) (*entry, error) {
	if e, ok := s.cache[planID]; ok {
		return e, nil
	}
	kve, err := d.kv.Get(ctx, bus.StateKey(planID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, errNoPlan
	}
	if err != nil {
		return nil, err
	}
	var stored execution.Stored
	if err := json.Unmarshal(kve.Value(), &stored); err != nil {
		return nil, fmt.Errorf("state of plan %s: %w", planID, err)
	}
	p, ok := s.plans[planID]
	if !ok {
		pe, err := d.kv.Get(ctx, bus.PlanKey(planID))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, errNoPlan
		}
		if err != nil {
			return nil, err
		}
		if p, err = plan.Decode(pe.Value()); err != nil {
			return nil, fmt.Errorf("stored plan %s: %w", planID, err)
		}
	}
	st, err := execution.Load(p, &stored, func(seq uint64) (*plan.ToolResult, error) { return d.storedResult(ctx, seq) })
	if err != nil {
		return nil, err
	}
	eng, err := execution.Restore(p, st)
	if err != nil {
		return nil, err
	}
	e := &entry{eng: eng, rev: kve.Revision()}
	d.remember(s, planID, p, e)
	return e, nil
}

// storedResult reads a result back from the RESULTS stream, for a plan
// whose engine is rebuilt from KV. A result that has expired gives nil: the
// tool's output and error are then unknown.
func (d *Dispatcher) storedResult(ctx context.Context, seq uint64) (*plan.ToolResult, error) {
	m, err := d.results.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		d.log.Warn().Uint64("seq", seq).Msg("a tool result is no longer in the results stream; its output is lost")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r plan.ToolResult
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, fmt.Errorf("result %d: %w", seq, err)
	}
	return &r, nil
}

func (d *Dispatcher) remember(s *shard, planID string, p *plan.Plan, e *entry) {
	limit := max(d.cfg.CacheSize/len(d.shards), 1)
	if len(s.cache) >= limit {
		for id := range s.cache { // evict any one: it is rebuilt from KV on demand
			d.forget(s, id)
			break
		}
	}
	s.cache[planID] = e
	s.plans[planID] = p
}

func (d *Dispatcher) startPlan(ctx context.Context, s *shard, log zerolog.Logger, it item) {
	p, err := plan.Decode(it.msg.Data())
	if err == nil {
		switch {
		case p.PlanID == "":
			p.PlanID = it.planID
		case p.PlanID != it.planID:
			err = &plan.Error{PlanID: it.planID, Msg: fmt.Sprintf("planId %q differs from the subject's %q", p.PlanID, it.planID)}
		}
	}
	if err == nil {
		if p.RequestID == "" {
			p.RequestID = p.PlanID
		}
		if p.SessionID == "" {
			p.SessionID = DefaultSession
		}
		err = d.checkSkills(ctx, p)
	}
	if err != nil {
		d.reject(ctx, log, it, err)
		return
	}
	if _, err := d.kv.Create(ctx, bus.PlanKey(p.PlanID), mustJSON(p)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		log.Error().Err(err).Msg("cannot store plan; it will be redelivered")
		_ = it.msg.NakWithDelay(time.Second)
		return
	}
	now := time.Now()
	eng, fx := execution.Start(p, now, d.cfg.DefaultMaxConcurrency)
	ent := &entry{eng: eng}
	out := d.render(ent, &fx, now)
	rev, err := d.kv.Create(ctx, bus.StateKey(p.PlanID), mustJSON(eng.State().Store()))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Started before: by a dispatcher that died before acknowledging,
		// or the plan was submitted again. Redo what its state implies.
		var lerr error
		if ent, lerr = d.entry(ctx, s, p.PlanID); lerr != nil {
			log.Error().Err(lerr).Msg("cannot load plan state; plan will be redelivered")
			_ = it.msg.NakWithDelay(time.Second)
			return
		}
		fx = ent.eng.Outstanding()
		out = d.render(ent, &fx, now)
	case err != nil:
		log.Error().Err(err).Msg("cannot store plan state; plan will be redelivered")
		_ = it.msg.NakWithDelay(time.Second)
		return
	default:
		d.stats.PlansStarted.Add(1)
		ent.rev = rev
		d.remember(s, p.PlanID, p, ent)
		log.Debug().Int("tools", len(p.Tools)).Msg("plan started")
	}
	pd, err := d.send(ent, fx, out)
	if err != nil {
		log.Error().Err(err).Msg("cannot publish effects; plan will be redelivered")
		delete(s.cache, p.PlanID)
		_ = it.msg.NakWithDelay(time.Second)
		return
	}
	pd.ack = []jetstream.Msg{it.msg}
	s.acks <- pd
	if ent.eng.Done() {
		d.forget(s, p.PlanID)
	}
}

// checkSkills rejects unknown skills and gives tools that left timeoutMs
// or retryPolicy to their defaults those of their skill's manifest.
func (d *Dispatcher) checkSkills(ctx context.Context, p *plan.Plan) error {
	for i := range p.Tools {
		t := &p.Tools[i]
		m := d.skills.manifest(t.Skill)
		if m == nil && d.cfg.KnownSkill(t.Skill) {
			m = &skills.Manifest{Name: t.Skill}
		}
		if m == nil {
			m = d.skills.lookup(ctx, t.Skill)
		}
		if m == nil {
			return &plan.Error{PlanID: p.PlanID, Msg: fmt.Sprintf(
				"tool %q uses unknown skill %q: no worker has advertised it (start a toolworker that serves it)", t.ToolID, t.Skill)}
		}
		timeout, retry := t.Defaults()
		if timeout && m.TimeoutMs > 0 {
			t.TimeoutMs = m.TimeoutMs
		}
		if retry && m.RetryPolicy != nil {
			t.RetryPolicy = *m.RetryPolicy
		}
	}
	return nil
}

// DefaultSession is the session of plans that name none.
const DefaultSession = "default"

// learn records what applied results tell: each skill's health in the
// plan's session (with an event for every transition) and the session
// state patches the tools returned. Both are idempotent, so they are done
// before the plan state is stored and redone if that fails.
func (d *Dispatcher) learn(ctx context.Context, log zerolog.Logger, eng *execution.Engine, applied []execution.Applied) error {
	p, st := eng.Plan(), eng.State()
	sid := sessionOf(st)
	for _, a := range applied {
		r, t := a.Result, p.Tools[a.Index]
		o := skills.Outcome{Key: plan.IdempotencyKey(p.PlanID, t.ToolID, r.Attempt),
			Succeeded: r.State == plan.ToolSucceeded, Retry: r.Attempt > 1, Final: a.Final}
		if r.Error != nil {
			o.Category, o.Error = r.Error.Category, r.Error.Message
		}
		if d.health.Quick(sid, t.Skill, o) {
			before, after, err := d.health.Apply(ctx, sid, t.Skill, o)
			if err != nil {
				return err
			}
			if before.State != after.State {
				log.Info().Str("skill", t.Skill).Str("session", sid).Str("from", before.State).Str("to", after.State).Msg("skill health changed")
				d.event(plan.Event{Type: plan.EventSkillHealth, Time: time.Now(), RequestID: st.RequestID, PlanID: p.PlanID,
					ToolID: t.ToolID, Skill: t.Skill, SessionID: sid, From: before.State, To: after.State,
					Message: fmt.Sprintf("%s: %s -> %s", t.Skill, before.State, after.State)})
			}
		}
		if len(r.StatePatch) > 0 && r.State == plan.ToolSucceeded {
			if _, err := d.states.Patch(ctx, sid, r.StatePatch); err != nil {
				return fmt.Errorf("session %s: %w", sid, err)
			}
		}
	}
	return nil
}

// reject reports a plan that cannot run as a rejected execution result.
func (d *Dispatcher) reject(ctx context.Context, log zerolog.Logger, it item, cause error) {
	d.stats.PlansRejected.Add(1)
	requestID := it.planID
	var ids struct {
		RequestID string `json:"requestId"`
	}
	if json.Unmarshal(it.msg.Data(), &ids) == nil && plan.ValidID(ids.RequestID) {
		requestID = ids.RequestID
	}
	now := time.Now().UTC()
	errInfo := &plan.ErrorInfo{Code: plan.CodeInvalidPlan, Category: plan.CategoryInvalidInput, Message: cause.Error()}
	res := &plan.ExecutionResult{PlanID: it.planID, RequestID: requestID, State: plan.PlanRejected, CanReplan: true,
		Error: errInfo, Tools: []plan.ToolOutcome{}, StartedAt: now, FinishedAt: now}
	log.Warn().Err(cause).Msg("plan rejected")
	d.event(plan.Event{Type: plan.EventPlanRejected, Time: now, RequestID: requestID, PlanID: it.planID, Error: errInfo})
	if _, err := d.conn.JS.Publish(ctx, bus.ExecutionSubject(it.planID), mustJSON(res), jetstream.WithMsgID(it.planID)); err != nil {
		log.Error().Err(err).Msg("cannot publish the rejection; plan will be redelivered")
		_ = it.msg.NakWithDelay(time.Second)
		return
	}
	_ = it.msg.Ack()
}

// rendered holds the messages of a batch's effects, encoded before its
// state is stored.
type rendered struct {
	calls []renderedCall
	done  []byte
}

type renderedCall struct {
	subject, msgID string
	data           []byte
}

// render encodes the tool calls and the execution result the effects ask
// for. It runs before the state is stored because encoding can change the
// state: a call that would not fit in a message (its input grew too large
// with its dependencies' outputs) cannot be published, so its attempt
// fails at once with INPUT_TOO_LARGE, which is never retried. An execution
// result too large for a message goes out without outputs; every tool's
// result stays readable in the RESULTS stream at its resultSeq.
func (d *Dispatcher) render(ent *entry, fx *execution.Effects, now time.Time) rendered {
	eng := ent.eng
	p, st := eng.Plan(), eng.State()
	limit := int(d.conn.NC.MaxPayload()) - 4096 // headers and margin
	var out rendered
	outputs := func(id string) (json.RawMessage, bool) {
		i, ok := eng.Index(id)
		if !ok || st.Tools[i].State != plan.ToolSucceeded {
			return nil, false
		}
		return st.Tools[i].Output, true
	}
	// fx.Releases can grow while it is walked: failing one call may free a
	// slot for another.
	for k := 0; k < len(fx.Releases); k++ {
		r := fx.Releases[k]
		t := p.Tools[r.Index]
		input, err := p.ResolveInput(r.Index, outputs)
		if err != nil {
			// Outputs are JSON by the time they are stored, so this is a bug;
			// run the tool with its references unresolved rather than stall.
			d.log.Error().Err(err).Str("plan_id", p.PlanID).Str("tool_id", t.ToolID).Msg("cannot resolve input references")
			input = t.Input
		}
		timeout := t.TimeoutMs
		if d.health.Get(sessionOf(st), t.Skill).State == skills.Degraded {
			timeout = min(timeout*skills.DegradedTimeoutFactor, 86400000)
		}
		call := plan.ToolCall{PlanID: p.PlanID, RequestID: p.RequestID, ToolID: t.ToolID, Skill: t.Skill,
			Attempt: r.Attempt, MaxAttempts: t.RetryPolicy.MaxAttempts, Input: input, TimeoutMs: timeout,
			IdempotencyKey: plan.IdempotencyKey(p.PlanID, t.ToolID, r.Attempt), ReleasedAt: time.UnixMilli(st.Tools[r.Index].ReleasedAt).UTC()}
		data := mustJSON(call)
		if len(data) > limit {
			fx.Merge(eng.OnResult(&plan.ToolResult{ToolID: t.ToolID, Attempt: r.Attempt, State: plan.ToolFailed,
				Error: &plan.ErrorInfo{Code: "INPUT_TOO_LARGE", Category: plan.CategoryPermanent,
					Message: fmt.Sprintf("the call's input with its references resolved takes %d bytes; a message holds at most %d", len(data), limit)}}, now))
			continue
		}
		out.calls = append(out.calls, renderedCall{subject: bus.ToolSubject(t.Skill), msgID: call.IdempotencyKey, data: data})
	}
	if fx.Done != nil {
		out.done = mustJSON(fx.Done)
		if len(out.done) > limit {
			slim := *fx.Done
			slim.OutputsOmitted = true
			slim.Tools = append([]plan.ToolOutcome(nil), fx.Done.Tools...)
			for i := range slim.Tools {
				slim.Tools[i].Output = nil
			}
			out.done = mustJSON(&slim)
		}
	}
	return out
}

// send carries out effects whose state is already stored: events first
// (they are informational), then every JetStream publish at once, without
// waiting for them to be stored; settle does that.
func (d *Dispatcher) send(ent *entry, fx execution.Effects, out rendered) (pending, error) {
	p := ent.eng.Plan()
	pd := pending{planID: p.PlanID, ent: ent, timeoutTimer: -1, cancel: fx.Cancel, done: fx.Done != nil}
	for _, ev := range fx.Events {
		d.event(ev)
	}
	pub := func(subject string, data []byte, msgID string) error {
		f, err := d.conn.JS.PublishAsync(subject, data, jetstream.WithMsgID(msgID))
		if err != nil {
			return fmt.Errorf("publish %s: %w", subject, err)
		}
		pd.futures = append(pd.futures, f)
		return nil
	}
	for _, c := range out.calls {
		if err := pub(c.subject, c.data, c.msgID); err != nil {
			return pd, err
		}
		d.stats.Released.Add(1)
	}
	for _, tm := range fx.Timers {
		body := timerMsg{PlanID: p.PlanID, Kind: tm.Kind, Tool: tm.Index, Attempt: tm.Attempt, FireAt: tm.FireAt.UnixMilli()}
		id := p.PlanID + "/timeout"
		if tm.Kind == execution.TimerRetry {
			id = fmt.Sprintf("%s/retry/%d/%d", p.PlanID, tm.Index, tm.Attempt)
		}
		if err := pub(bus.TimerSubject(p.PlanID), mustJSON(body), id); err != nil {
			return pd, err
		}
		if tm.Kind == execution.TimerPlanTimeout {
			pd.timeoutTimer = len(pd.futures) - 1
		}
	}
	if out.done != nil {
		if err := pub(bus.ExecutionSubject(p.PlanID), out.done, p.PlanID); err != nil {
			return pd, err
		}
	}
	return pd, nil
}

// settle waits until JetStream has stored a batch's effects and then
// acknowledges its messages. If any publish failed, the messages are handed
// back instead: whoever handles them again republishes what the state
// implies.
func (d *Dispatcher) settle(pd pending) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for k, f := range pd.futures {
		select {
		case ack := <-f.Ok():
			if k == pd.timeoutTimer && !ack.Duplicate {
				pd.ent.timerSeq.Store(ack.Sequence)
			}
			continue
		case err := <-f.Err():
			d.log.Error().Err(err).Str("plan_id", pd.planID).Msg("a publish failed; messages will be redelivered")
		case <-ctx.Done():
			d.log.Error().Str("plan_id", pd.planID).Msg("publishes not stored in time; messages will be redelivered")
		}
		for _, m := range pd.ack {
			_ = m.NakWithDelay(time.Second)
		}
		return
	}
	for _, m := range pd.ack {
		_ = m.Ack()
	}
	if pd.cancel {
		_ = d.conn.NC.Publish(bus.CancelSubject(pd.planID), nil)
	}
	if pd.done {
		d.stats.PlansEnded.Add(1)
		// The timeout timer of an ended plan would only be ignored when it
		// fires; delete it rather than keep it pending. (After a failover
		// its sequence is unknown here and it fires as a no-op.)
		if seq := pd.ent.timerSeq.Load(); seq > 0 {
			if err := d.timers.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				d.log.Debug().Err(err).Str("plan_id", pd.planID).Msg("cannot delete the timeout timer of an ended plan")
			}
		}
	}
}

// event publishes a progress event on core NATS; the EVENTS stream keeps
// it. Events are best effort: nothing depends on them.
func (d *Dispatcher) event(ev plan.Event) {
	_ = d.conn.NC.Publish(bus.EventSubject(ev.RequestID, ev.Type), mustJSON(ev))
}

func sessionOf(st *execution.State) string {
	if st.SessionID == "" {
		return DefaultSession
	}
	return st.SessionID
}

func ackAll(items []item) {
	for _, it := range items {
		_ = it.msg.Ack()
	}
}

func nakAll(items []item, delay time.Duration) {
	for _, it := range items {
		_ = it.msg.NakWithDelay(delay)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dispatcher: encode %T: %v", v, err)) // only our own types are encoded
	}
	return b
}

package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/schemas"
)

// errNoPlan: a result or timer arrived for a plan with no stored state
// (expired, or never started).
var errNoPlan = errors.New("dispatcher: no such plan")

// casRetries bounds how often one batch is reapplied after losing a
// compare-and-set to another dispatcher before it is handed back.
const casRetries = 20

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
			d.handBack(log, items, 5*time.Second, fmt.Errorf("dispatcher bug: %v", r))
		}
	}()
	var rest []item
	for _, it := range items {
		switch it.kind {
		case kindPlan:
			d.startPlan(ctx, s, log, it)
		case kindResult:
			if r := d.decodeResult(it.msg); r != nil {
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
		ent, cached, err := d.entry(ctx, s, planID)
		if errors.Is(err, errNoPlan) {
			d.noPlan(log, rest)
			return
		}
		if err != nil {
			log.Error().Err(err).Msg("cannot load plan state; messages will be redelivered")
			d.handBack(log, rest, time.Second, err)
			return
		}
		// A message that follows from a change this state has not seen
		// means another dispatcher moved the plan on: a cached state is
		// reloaded; a state just read may come from a replica that is
		// behind, so such messages wait a moment and come back.
		// A redelivered message republishes what the state implies, so it
		// too wants the state as stored rather than as cached.
		var ahead, current []item
		again := false
		for _, it := range rest {
			if d.verdict(ent.eng, it) == execution.Ahead {
				ahead = append(ahead, it)
			} else {
				current = append(current, it)
			}
			again = again || it.redelivered
		}
		if cached && (len(ahead) > 0 || again) {
			delete(s.cache, planID)
			continue
		}
		now := time.Now()
		var fx execution.Effects
		redelivered := false
		for _, it := range current {
			switch it.kind {
			case kindResult:
				d.stats.Results.Add(1)
				fx.Merge(ent.eng.OnResultSeq(d.verify(ent, it.result), it.seq, now))
			case kindTimer:
				d.stats.Timers.Add(1)
				fx.Merge(ent.eng.OnTimer(it.timer, now))
			}
			redelivered = redelivered || it.redelivered
		}
		if err := d.learn(ctx, log, ent.eng, fx.Applied); err != nil {
			log.Error().Err(err).Msg("cannot record skill health or session state; messages will be redelivered")
			delete(s.cache, planID)
			d.handBack(log, rest, time.Second, err)
			return
		}
		if redelivered {
			// This message may have been handled before by a dispatcher
			// that died before finishing: redo what the state implies.
			fx.Merge(ent.eng.Outstanding())
		}
		out := d.render(ent, &fx, now)
		if fx.Changed {
			rev, err := d.kv.Update(ctx, bus.StateKey(planID), storedJSON(ent.eng), ent.rev)
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				// Another dispatcher changed the plan: start again from its state.
				d.stats.Conflicts.Add(1)
				delete(s.cache, planID)
				continue
			}
			if err != nil {
				log.Error().Err(err).Msg("cannot store plan state; messages will be redelivered")
				delete(s.cache, planID)
				d.handBack(log, rest, time.Second, err)
				return
			}
			ent.rev = rev
		}
		pd, err := d.send(ent, fx, out)
		if err != nil {
			log.Error().Err(err).Msg("cannot publish effects; messages will be redelivered")
			delete(s.cache, planID)
			d.handBack(log, rest, time.Second, err)
			return
		}
		pd.ack = append(pd.ack, current...)
		s.acks <- pd
		d.holdBack(log, ahead)
		if ent.eng.Done() {
			d.forget(s, planID)
		}
		return
	}
	log.Warn().Int("tries", casRetries).Msg("lost every compare-and-set; messages will be redelivered")
	d.handBack(log, rest, 100*time.Millisecond, fmt.Errorf("lost %d compare-and-sets on the state of plan %s", casRetries, planID))
}

// noPlan handles messages of a plan with no stored state. Results and
// timers are dropped: the plan expired or never started. A cancel may
// come before its plan: a planner publishes it as soon as the request's
// plan is out, and the plan may still wait in its stream (or be published
// again after a planner crash). It is handed back, with a delay that grows
// with its deliveries, until its plan starts or its delivery limit is
// reached (a plan that was rejected never starts).
func (d *Dispatcher) noPlan(log zerolog.Logger, items []item) {
	var drop []item
	for _, it := range items {
		if it.kind != kindTimer || it.timer.Kind != execution.TimerCancel {
			drop = append(drop, it)
			continue
		}
		if n := bus.Deliveries(it.msg); n < d.cfg.DeliveryLimit {
			_ = it.msg.NakWithDelay(bus.RetryDelay(n))
			continue
		}
		d.drop(log, it, "a cancel of a plan that never started", nil)
	}
	if len(drop) > 0 {
		log.Warn().Int("messages", len(drop)).Msg("results or timers for a plan with no state; dropping them")
		ackAll(drop)
	}
}

// verify applies the tool's verification gate, if it has one: a succeeded
// result whose output the gate refuses counts as a failed attempt
// (VERIFY_FAILED), so the tool's retry policy and failure semantics apply.
func (d *Dispatcher) verify(ent *entry, r *plan.ToolResult) *plan.ToolResult {
	if ent.gates == nil {
		return r
	}
	i, ok := ent.eng.Index(r.ToolID)
	if !ok {
		return r
	}
	g := ent.gates.of(ent.eng.Plan(), i, max(r.Attempt, 1))
	if g == nil {
		return r
	}
	out, _ := templates.VerifyResult(*r, g)
	return &out
}

// verdict classifies a result or timer against a plan's state.
func (d *Dispatcher) verdict(eng *execution.Engine, it item) execution.Verdict {
	if it.kind == kindResult {
		return eng.ResultVerdict(it.result)
	}
	return eng.TimerVerdict(it.timer)
}

// holdBack hands back messages that are ahead of a freshly read state. A
// state that lags catches up in moments, so a message still ahead at its
// delivery limit never will be: it is dropped.
func (d *Dispatcher) holdBack(log zerolog.Logger, ahead []item) {
	for _, it := range ahead {
		if n := bus.Deliveries(it.msg); n >= d.cfg.DeliveryLimit {
			d.drop(log, it, fmt.Sprintf("still ahead of its plan's state after %d deliveries", n), nil)
			continue
		}
		_ = it.msg.NakWithDelay(200 * time.Millisecond)
	}
}

// decodeResult validates a tool result and checks its token; a result
// that fails is dropped.
func (d *Dispatcher) decodeResult(m jetstream.Msg) *plan.ToolResult {
	if err := schemas.Validate(schemas.ToolResult, m.Data()); err != nil {
		d.rejectResult(m, "invalid tool result: "+err.Error())
		return nil
	}
	var r plan.ToolResult
	if err := json.Unmarshal(m.Data(), &r); err != nil || bus.ResultSubject(r.PlanID) != m.Subject() {
		d.rejectResult(m, "result published on another plan's subject")
		return nil
	}
	if !d.key.CheckResult(r.PlanID, r.ToolID, r.Attempt, r.Token) {
		d.rejectResult(m, "result token does not match its call")
		return nil
	}
	return &r
}

// Dropped results are logged at most rejectLogBurst times per
// rejectLogPeriod; results_rejected counts them all.
const (
	rejectLogBurst  = 5
	rejectLogPeriod = 10 * time.Second
)

// rejectResult drops a result that can never be applied: it is terminated,
// so it is not redelivered, counted in results_rejected and logged
// (sampled). It changes nothing else: the tool it names runs on, and its
// real result still counts.
func (d *Dispatcher) rejectResult(m jetstream.Msg, reason string) {
	n := d.stats.ResultsRejected.Add(1)
	d.rejectLog.Warn().Str("subject", m.Subject()).Str("reason", reason).Int64("results_rejected", n).
		Msg("dropping a tool result")
	_ = m.TermWithReason(reason)
}

// entry returns the plan's engine, from the cache (cached is true) or
// rebuilt from KV.
func (d *Dispatcher) entry(ctx context.Context, s *shard, planID string) (ent *entry, cached bool, err error) {
	if e, ok := s.cache[planID]; ok {
		return e, true, nil
	}
	e, err := d.load(ctx, s, planID)
	return e, false, err
}

// load rebuilds a plan's engine from KV and caches it.
func (d *Dispatcher) load(ctx context.Context, s *shard, planID string) (*entry, error) {
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
	if e.gates, err = gatesOf(p); err != nil {
		// Gates were checked when the plan started; a plan stored by an
		// older version may hold one that no longer compiles.
		d.log.Warn().Err(err).Str("plan_id", planID).Msg("plan runs without its verification gates")
	}
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

func (d *Dispatcher) forget(s *shard, planID string) {
	delete(s.cache, planID)
	delete(s.plans, planID)
}

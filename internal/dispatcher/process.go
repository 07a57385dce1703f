package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/wire"
)

// errNoPlan: a result or timer arrived for a plan with no stored state
// (expired, or never started).
var errNoPlan = errors.New("dispatcher: no such plan")

// casRetries bounds how often one batch is reapplied after losing a
// compare-and-set to another dispatcher before it is handed back.
const casRetries = 20

// opTimeout bounds a round of KV and publish calls outside a batch
// (Config.OpTimeout bounds those of batches).
const opTimeout = 10 * time.Second

// ops is a context for the next round of KV and publish calls of a
// batch, after work that took the CPU: its time starts now, whatever the
// work before it took (gates checked up to their budget take seconds
// under the race detector on a busy machine, and a batch whose store
// then timed out was handed back, checked again, and never got through).
func (d *Dispatcher) ops(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.cfg.OpTimeout)
}

// working tells the server, every third of AckWait until stop is
// called, that the messages of a batch are being worked on, so a batch
// that takes long is not delivered again meanwhile (to this dispatcher
// or another, which would do the same work again).
func (d *Dispatcher) working(items []item) (stop func()) {
	every := max(d.cfg.AckWait/3, 10*time.Millisecond)
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, it := range items {
			if it.msg != nil {
				_ = it.msg.InProgress()
			}
		}
		t.Reset(every)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// process handles a batch of one plan's messages: it starts the plan
// (kindPlan), and applies results and timers to the plan's state. A batch
// that cannot be carried out ends in fail, the one failure path.
func (d *Dispatcher) process(s *shard, planID string, items []item) {
	ctx, cancel := d.ops(context.Background())
	defer cancel()
	defer d.working(items)()
	log := d.log.With().Str("plan_id", planID).Logger()
	defer func() {
		// A bug must not take every plan of the process down with it.
		if r := recover(); r != nil {
			d.fail(s, planID, log, items, &failure{what: "dispatcher bug", err: fmt.Errorf("dispatcher bug: %v", r),
				delay: 5 * time.Second, stack: debug.Stack()})
		}
	}()
	rest := d.admit(ctx, s, log, items)
	if len(rest) == 0 {
		return
	}
	for range casRetries {
		again, f := d.apply(ctx, s, planID, log, rest)
		if f != nil {
			d.fail(s, planID, log, rest, f)
			return
		}
		if !again {
			return
		}
	}
	d.fail(s, planID, log, rest, &failure{what: fmt.Sprintf("lost %d compare-and-sets", casRetries), warn: true,
		err: fmt.Errorf("lost %d compare-and-sets on the state of plan %s", casRetries, planID), delay: 100 * time.Millisecond})
}

// admit starts the plans of a batch and checks its results, dropping
// those that fail; it returns the results and timers to apply.
func (d *Dispatcher) admit(ctx context.Context, s *shard, log zerolog.Logger, items []item) []item {
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
	return rest
}

// apply makes one attempt at applying results and timers to their plan's
// state: it steps the engine, records what the results tell, stores the
// new state with compare-and-set and sends the effects, whose messages
// are acknowledged once JetStream has them. again reports that the state
// was stale (another dispatcher moved the plan on), so the batch is to be
// applied again to a fresher one; f, why the batch cannot be carried out
// now.
func (d *Dispatcher) apply(ctx context.Context, s *shard, planID string, log zerolog.Logger, items []item) (again bool, f *failure) {
	ent, cached, err := d.entry(ctx, s, planID)
	if errors.Is(err, errNoPlan) {
		// A result carries a dispatcher's token, so its plan was
		// started: a state not found is on a replica that is behind (a
		// cluster catching up after a node came back), not gone. Such
		// messages wait as those ahead of their plan's state do; at the
		// delivery limit they are dropped (the plan expired, or its
		// state was lost).
		d.holdBack(log, items, "its plan's state was never found")
		d.forget(s, planID)
		return false, nil
	}
	if err != nil {
		d.forget(s, planID)
		return false, failed("cannot load plan state", err)
	}
	// A message that follows from a change this state has not seen
	// means another dispatcher moved the plan on: a cached state is
	// reloaded; a state just read may come from a replica that is
	// behind, so such messages wait a moment and come back.
	// A message that may have been handled before (redelivered, or past
	// the state) republishes what the state implies, so it too wants the
	// state as stored rather than as cached.
	ahead, current, again := d.sort(ent.eng, items)
	if cached && (len(ahead) > 0 || again) {
		delete(s.cache, planID)
		return true, nil
	}
	now := time.Now()
	before, wasDone := d.inFlight(ent.eng), ent.eng.Done()
	fx := d.step(ent.eng, current, now)
	ctx, cancel := d.ops(ctx)
	defer cancel()
	if err := d.learn(ctx, log, ent.eng, fx.Applied); err != nil {
		return false, failed("cannot record skill health or session state", err)
	}
	if again {
		// This message may have been handled before by a dispatcher
		// that died before finishing: redo what the state implies.
		redo := ent.eng.Outstanding()
		d.withoutStored(ctx, log, ent.eng, &redo)
		if ev := log.Debug(); ev.Enabled() && len(redo.Releases) > 0 {
			ev = ev.Int("calls", len(redo.Releases))
			for i, r := range redo.Releases[:min(len(redo.Releases), 8)] {
				ev = ev.Str("call_"+strconv.Itoa(i), ent.eng.Plan().Tools[r.Index].ToolID+"/"+strconv.Itoa(r.Attempt))
			}
			ev.Msg("a message of the plan may have been handled before: publishing again the calls its state shows running")
		}
		fx.Merge(redo)
		fx.Dedupe()
	}
	out := d.render(ent, &fx, now)
	if fx.Changed {
		// The store returns once the server has the values, so the
		// buffer is free for the next write.
		err := d.storeState(ctx, ent, d.stateWrite(ent))
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Another dispatcher changed the plan: start again from its state.
			d.stats.Conflicts.Add(1)
			d.metrics.Conflict()
			delete(s.cache, planID)
			return true, nil
		}
		if err != nil {
			return false, failed("cannot store plan state", err)
		}
		d.countAttempts(ent.eng, fx.Applied)
	}
	pd, err := d.send(ent, fx, out)
	if err != nil {
		return false, failed("cannot publish effects", err)
	}
	d.traceEnded(ent.eng, before, &fx, !wasDone && ent.eng.Done(), now)
	for _, it := range current {
		if it.kind == kindResult {
			d.keepResult(s, planID, it.seq, it.result)
		}
	}
	pd.ack = append(pd.ack, current...)
	s.acks <- pd
	d.holdBack(log, ahead, "still ahead of its plan's state")
	if ent.eng.Done() {
		ent.ended.Store(true)
		d.forget(s, planID)
	}
	return false, nil
}

// sort splits results and timers into those ahead of the state and the
// others, and reports whether any may have been handled before: delivered
// before, or past the state. A message the state has already taken in
// may come back as a first delivery: a server that crashed can lose the
// record of its delivery (consumer state is written behind), and with it
// the ack of a batch whose effects it did not all store. So a past
// message too has what the state implies done again (process.go, apply).
func (d *Dispatcher) sort(eng *execution.Engine, items []item) (ahead, current []item, again bool) {
	for _, it := range items {
		switch d.verdict(eng, it) {
		case execution.Ahead:
			ahead = append(ahead, it)
		case execution.Past:
			current = append(current, it)
			again = true
		default:
			current = append(current, it)
		}
		again = again || it.redelivered
	}
	return ahead, current, again
}

// step applies results and timers to the engine at now.
func (d *Dispatcher) step(eng *execution.Engine, items []item, now time.Time) (fx execution.Effects) {
	for _, it := range items {
		switch it.kind {
		case kindResult:
			d.stats.Results.Add(1)
			fx.Merge(eng.OnResultSeq(it.result, it.seq, now))
		case kindTimer:
			d.stats.Timers.Add(1)
			fx.Merge(eng.OnTimer(it.timer, now))
		}
	}
	return fx
}

// failure is why a batch cannot be carried out now: what could not be
// done and the error, and the least wait before its messages come back.
type failure struct {
	what  string
	err   error
	delay time.Duration
	warn  bool   // log at warn level: nothing is broken
	stack []byte // a bug's stack
}

// failed is the failure of an operation on the bus, worth trying again
// in a second.
func failed(what string, err error) *failure {
	return &failure{what: what, err: err, delay: time.Second}
}

// fail ends a batch that cannot be carried out: it forgets the plan's
// cached engine and plan (they may be ahead of what is stored; they are
// rebuilt from KV), logs the failure and hands the messages back, to be
// handled again after f.delay or given their terminal path at their
// delivery limit. Whoever handles them again redoes what the stored state
// implies, so nothing done before the failure is lost or done twice.
func (d *Dispatcher) fail(s *shard, planID string, log zerolog.Logger, items []item, f *failure) {
	d.forget(s, planID)
	ev := log.Error()
	if f.warn {
		ev = log.Warn()
	}
	if f.stack != nil {
		ev = ev.Str("stack", string(f.stack))
	}
	ev.Err(f.err).Msg(f.what + "; messages will be redelivered")
	d.handBack(log, items, f.delay, f.err)
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
func (d *Dispatcher) holdBack(log zerolog.Logger, ahead []item, why string) {
	for _, it := range ahead {
		n := bus.Deliveries(it.msg)
		if n >= d.cfg.DeliveryLimit {
			d.drop(log, it, fmt.Sprintf("%s after %d deliveries", why, n), nil)
			continue
		}
		_ = it.msg.NakWithDelay(holdDelay(n))
	}
}

// holdDelay is how long a held-back message waits before its next
// delivery: 200 ms at first, doubling every third delivery up to 5 s, so
// the default limit of 30 deliveries spans about a minute and a half. A
// replica that is behind catches up in moments, or in tens of seconds
// after a partition heals.
func holdDelay(deliveries int) time.Duration {
	d := 200 * time.Millisecond
	for i := 3; i <= deliveries && d < 5*time.Second; i += 3 {
		d *= 2
	}
	return min(d, 5*time.Second)
}

// decodeResult validates a tool result and checks its token; a result
// that fails is dropped. One that does not decode but carries the token
// of its call (a worker's bug: an output with a lone surrogate escape,
// say) is the failure of its attempt, INVALID_RESULT, so that the plan
// moves on rather than wait for the call's timeout.
func (d *Dispatcher) decodeResult(m jetstream.Msg) *planbus.ToolResult {
	r, err := wire.DecodeResult(m.Data())
	if err != nil {
		if f := d.invalidResult(m, err); f != nil {
			return f
		}
		d.rejectResult(m, metrics.RejectInvalid, "invalid tool result: "+err.Error())
		return nil
	}
	if bus.PlanOfSubject(m.Subject()) != r.PlanID {
		d.rejectResult(m, metrics.RejectWrongSubject, "result published on another plan's subject")
		return nil
	}
	if !d.key.CheckResult(r.PlanID, r.ToolID, r.Attempt, r.Token) {
		d.rejectResult(m, metrics.RejectBadToken, "result token does not match its call")
		return nil
	}
	return &r
}

// invalidResult is the failed result standing for a result that does
// not decode (err) but names a call and holds its token, or nil.
func (d *Dispatcher) invalidResult(m jetstream.Msg, err error) *planbus.ToolResult {
	var id struct {
		PlanID    string `json:"planId"`
		RequestID string `json:"requestId"`
		ToolID    string `json:"toolId"`
		Skill     string `json:"skill"`
		Attempt   int    `json:"attempt"`
		WorkerID  string `json:"workerId"`
		Token     string `json:"token"`
	}
	if wire.Lenient(m.Data(), &id) != nil || !wire.IsID(id.PlanID) || bus.PlanOfSubject(m.Subject()) != id.PlanID ||
		!wire.IsID(id.RequestID) || !wire.IsToolID(id.ToolID) || !wire.IsSkill(id.Skill) || id.Attempt < 1 ||
		!d.key.CheckResult(id.PlanID, id.ToolID, id.Attempt, id.Token) {
		return nil
	}
	d.rejectLog.Warn().Str("subject", m.Subject()).Str("tool_id", id.ToolID).Int("attempt", id.Attempt).Err(err).
		Msg("a tool result does not decode; its attempt failed")
	return &planbus.ToolResult{PlanID: id.PlanID, RequestID: id.RequestID, ToolID: id.ToolID, Skill: id.Skill, Attempt: id.Attempt,
		WorkerID: id.WorkerID, State: planbus.ToolFailed, Token: id.Token,
		Error: &planbus.ErrorInfo{Code: planbus.CodeInvalidResult, Category: planbus.CategoryInternal,
			Message: "the worker's result does not decode: " + err.Error()}}
}

// Dropped results are logged at most rejectLogBurst times per
// rejectLogPeriod; results_rejected counts them all.
const (
	rejectLogBurst  = 5
	rejectLogPeriod = 10 * time.Second
)

// rejectResult drops a result that can never be applied: it is terminated,
// so it is not redelivered, counted in results_rejected (and in
// planbus_results_rejected_total by kind, a metrics.Reject* value) and
// logged (sampled). It changes nothing else: the tool it names runs on,
// and its real result still counts.
func (d *Dispatcher) rejectResult(m jetstream.Msg, kind, reason string) {
	n := d.stats.ResultsRejected.Add(1)
	d.metrics.ResultRejected(kind)
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
	stored, rev, err := d.readState(ctx, planID)
	if err != nil {
		return nil, err
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
	// The results the state names that this dispatcher has not seen are
	// read back from the stream, several at once: a plan of tens of
	// thousands of tools names as many.
	known := s.results[planID]
	var unseen []uint64
	if len(stored.Tools) == len(p.Tools) { // else Load refuses the state
		wanted := map[uint64]bool{}
		for _, t := range stored.Tools {
			if _, ok := known[t.Result]; t.Result > 0 && !ok && !wanted[t.Result] {
				wanted[t.Result] = true
				unseen = append(unseen, t.Result)
			}
		}
	}
	read, err := d.storedResults(ctx, unseen)
	if err != nil {
		return nil, err
	}
	st, err := execution.Load(p, stored, func(seq uint64) (*planbus.ToolResult, error) {
		if r, ok := known[seq]; ok {
			return r, nil
		}
		return read[seq], nil // nil: expired (storedResult said so)
	})
	if err != nil {
		return nil, err
	}
	eng, err := execution.Restore(p, st, d.timeoutFactor)
	if err == nil {
		eng.SetMaxLife(d.maxLife())
	}
	if err != nil {
		return nil, err
	}
	e := &entry{eng: eng, rev: rev}
	d.remember(s, planID, p, e)
	for seq, r := range read {
		d.keepResult(s, planID, seq, r)
	}
	return e, nil
}

// keepResult remembers a result of a cached plan by its stream sequence.
func (d *Dispatcher) keepResult(s *shard, planID string, seq uint64, r *planbus.ToolResult) {
	m := s.results[planID]
	if m == nil {
		m = map[uint64]*planbus.ToolResult{}
		s.results[planID] = m
	}
	m[seq] = r
}

// resultReaders bounds the results read back at once when a plan's engine
// is rebuilt: each read is a round trip to the server (to a replica of a
// cluster).
const resultReaders = 16

// storedResults reads the results seqs back from the RESULTS stream, up to
// resultReaders at once, by sequence; a result that has expired is left
// out. The first error a read returns is the error.
func (d *Dispatcher) storedResults(ctx context.Context, seqs []uint64) (map[uint64]*planbus.ToolResult, error) {
	out := make(map[uint64]*planbus.ToolResult, len(seqs))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(resultReaders)
	for _, seq := range seqs {
		if gctx.Err() != nil {
			break // a read failed: the rest would too, or are not wanted
		}
		g.Go(func() error {
			r, err := d.storedResult(gctx, seq)
			if r != nil {
				mu.Lock()
				out[seq] = r
				mu.Unlock()
			}
			return err
		})
	}
	err := g.Wait()
	if err == nil {
		err = ctx.Err() // ended before a read began
	}
	return out, err
}

// storedResult reads a result back from the RESULTS stream, for a plan
// whose engine is rebuilt from KV. A result that has expired gives nil: the
// tool's output and error are then unknown.
func (d *Dispatcher) storedResult(ctx context.Context, seq uint64) (*planbus.ToolResult, error) {
	d.stats.ReadBack.Add(1)
	m, err := d.results.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		d.log.Warn().Uint64("seq", seq).Msg("a tool result is no longer in the results stream; its output is lost")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r planbus.ToolResult
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
	delete(s.results, planID)
}

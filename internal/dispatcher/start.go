package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/schemas"
)

func (d *Dispatcher) startPlan(ctx context.Context, s *shard, log zerolog.Logger, it item) {
	p, err := plan.Decode(it.msg.Data())
	ctx, cancel := d.ops(ctx)
	defer cancel()
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
			p.SessionID = planbus.DefaultSession
		}
		err = d.checkRetention(p)
	}
	if err == nil {
		err = d.checkSkills(ctx, p)
	}
	if err != nil {
		d.reject(ctx, log, it, err)
		return
	}
	reused, err := d.reusedResults(ctx, log, p)
	if err != nil {
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot read the earlier results the plan reuses", err))
		return
	}
	// A plan that cannot be stored would fail at every delivery: it is
	// rejected, naming its size and the limit.
	stored := mustJSON(p)
	now := time.Now()
	eng, fx := execution.StartWithin(p, now, d.cfg.DefaultMaxConcurrency, d.timeoutFactor, reused, d.maxLife())
	eng.State().Trace = d.traceStart(it.msg.Headers())
	eng.State().ChunkBy(d.cfg.StateChunkTools)
	ent := &entry{eng: eng}
	// Rendering may fail a call that is too large to send: the state
	// stored is the one after that.
	out := d.render(ent, &fx, now)
	w := d.stateWrite(ent)
	state := len(w.Head) // the state's largest value
	for _, c := range w.Chunks {
		state = max(state, len(c.Value))
	}
	ctx, cancel = d.ops(ctx)
	defer cancel()
	if limit := d.storeLimit(); len(stored) > limit || state > limit {
		d.reject(ctx, log, it, &plan.Error{PlanID: p.PlanID, Msg: fmt.Sprintf(
			"the plan takes %d bytes with its defaults and its state %d; the store holds at most %d bytes a value (max payload)", len(stored), state, limit)})
		return
	}
	if _, err := d.kv.Create(ctx, bus.PlanKey(p.PlanID), stored); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot store plan", err))
		return
	}
	err = d.storeState(ctx, ent, w)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Started before: by a dispatcher that died before acknowledging,
		// or the plan was submitted again. Redo what its state implies.
		var lerr error
		if ent, lerr = d.load(ctx, s, p.PlanID); lerr != nil {
			d.fail(s, p.PlanID, log, []item{it}, failed("cannot load plan state", lerr))
			return
		}
		fx = ent.eng.Outstanding()
		d.withoutStored(ctx, log, ent.eng, &fx)
		out = d.render(ent, &fx, now)
	case err != nil:
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot store plan state", err))
		return
	default:
		d.stats.PlansStarted.Add(1)
		d.metrics.PlanStarted()
		d.countAttempts(ent.eng, fx.Applied)
		d.remember(s, p.PlanID, p, ent)
		log.Debug().Int("tools", len(p.Tools)).Msg("plan started")
		d.traceEnded(eng, nil, &fx, fx.Done != nil, now) // a plan that ends as it starts (every tool reused)
	}
	pd, err := d.send(ent, fx, out)
	if err != nil {
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot publish effects", err))
		return
	}
	pd.ack = []item{it}
	s.acks <- pd
	if ent.eng.Done() {
		ent.ended.Store(true)
		d.forget(s, p.PlanID)
	}
}

// checkSkills rejects unknown skills and gives tools that left timeoutMs
// or retryPolicy to their defaults those of their skill's manifest.
func (d *Dispatcher) checkSkills(ctx context.Context, p *plan.Plan) error {
	known := func(t *plan.Tool, skill string) (*planbus.SkillManifest, error) {
		m := d.skills.manifest(skill)
		if m == nil && d.cfg.KnownSkill(skill) {
			m = &planbus.SkillManifest{Name: skill}
		}
		if m == nil {
			m = d.skills.lookup(ctx, skill)
		}
		if m == nil {
			return nil, &plan.Error{PlanID: p.PlanID, Msg: fmt.Sprintf(
				"tool %q uses unknown skill %q: no worker has advertised it (start a toolworker that serves it)", t.ToolID, skill)}
		}
		return m, nil
	}
	for i := range p.Tools {
		t := &p.Tools[i]
		m, err := known(t, t.Skill)
		if err != nil {
			return err
		}
		timeout, retry := t.Defaults()
		if timeout && m.TimeoutMs > 0 {
			t.TimeoutMs = m.TimeoutMs
		}
		if retry && m.RetryPolicy != nil {
			t.RetryPolicy = *m.RetryPolicy
		}
		if f := t.Fallback; f != nil {
			fm, err := known(t, f.Skill)
			if err != nil {
				return err
			}
			timeout, retry := f.Defaults()
			if timeout && fm.TimeoutMs > 0 {
				f.TimeoutMs = fm.TimeoutMs
			}
			if retry && fm.RetryPolicy != nil {
				f.RetryPolicy = *fm.RetryPolicy
			}
		}
	}
	return nil
}

// reject reports a plan that cannot run as a rejected execution result.
func (d *Dispatcher) reject(ctx context.Context, log zerolog.Logger, it item, cause error) {
	d.rejectCode(ctx, log, it, planbus.CodeInvalidPlan, cause)
}

// rejectCode reports a plan that cannot run as a rejected execution
// result with the given code. If that cannot be published either, the
// plan comes back later (at most until the consumer's MaxDeliver).
func (d *Dispatcher) rejectCode(ctx context.Context, log zerolog.Logger, it item, code planbus.Code, cause error) {
	d.stats.PlansRejected.Add(1)
	d.metrics.PlanEnded(planbus.PlanRejected)
	requestID := it.planID
	var ids struct {
		RequestID string `json:"requestId"`
	}
	if json.Unmarshal(it.msg.Data(), &ids) == nil && plan.ValidID(ids.RequestID) {
		requestID = ids.RequestID
	}
	now := time.Now().UTC()
	errInfo := &planbus.ErrorInfo{Code: code, Category: planbus.CategoryInvalidInput, Message: cause.Error()}
	if code == planbus.CodeDeliveryLimit {
		errInfo.Category = planbus.CategoryInternal
	}
	res := &planbus.ExecutionResult{PlanID: it.planID, RequestID: requestID, State: planbus.PlanRejected, CanReplan: true,
		Error: errInfo, Tools: []planbus.ToolOutcome{}, StartedAt: now, FinishedAt: now}
	// The submitter is told, by the execution result and the event; an
	// operator sees it at info.
	log.Info().Err(cause).Msg("plan rejected")
	d.rejectSpan(it.msg.Headers(), it.planID, requestID, errInfo)
	d.event(planbus.Event{Type: planbus.EventPlanRejected, Time: now, RequestID: requestID, PlanID: it.planID, Error: errInfo})
	if _, err := d.conn.JS.Publish(ctx, bus.ExecutionSubject(it.planID), mustJSON(res), jetstream.WithMsgID(it.planID)); err != nil {
		log.Error().Err(err).Msg("cannot publish the rejection; plan will be redelivered")
		_ = it.msg.NakWithDelay(bus.RetryDelay(bus.Deliveries(it.msg)))
		return
	}
	// The rejection may be written behind: acknowledged once on disk.
	d.behind.ack([]item{it}, nil, nil)
}

// reusedResults reads the earlier results that tools of a replan take as
// their own (tools[].reuseFrom), from the RESULTS stream. A result that is
// gone, or is not the named tool's succeeded result of an earlier plan of
// the same request carrying its call's token, is logged and left out: the
// tool runs. Only an error reading the stream is returned.
func (d *Dispatcher) reusedResults(ctx context.Context, log zerolog.Logger, p *plan.Plan) (map[int]execution.Reused, error) {
	var out map[int]execution.Reused
	for i := range p.Tools {
		ref := p.Tools[i].ReuseFrom
		if ref == nil || p.Tools[i].NoReuse {
			continue
		}
		r, why, err := d.reusedResult(ctx, p, ref)
		if err != nil {
			return nil, err
		}
		if r == nil {
			log.Warn().Str("tool_id", p.Tools[i].ToolID).Str("reuse_from", ref.PlanID+"/"+ref.ToolID).
				Uint64("result_seq", ref.ResultSeq).Msg("the tool runs: the result it would reuse " + why)
			continue
		}
		if out == nil {
			out = map[int]execution.Reused{}
		}
		out[i] = execution.Reused{Result: r, Seq: ref.ResultSeq}
	}
	return out, nil
}

// reusedResult reads and checks the result ref names for plan p; when it
// cannot be reused, the result is nil and why says so.
func (d *Dispatcher) reusedResult(ctx context.Context, p *plan.Plan, ref *plan.ReuseRef) (*planbus.ToolResult, string, error) {
	m, err := d.results.GetMsg(ctx, ref.ResultSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, "is no longer in the results stream", nil
	}
	if err != nil {
		return nil, "", err
	}
	var r planbus.ToolResult
	switch {
	case ref.PlanID == p.PlanID || bus.PlanOfSubject(m.Subject) != ref.PlanID:
		return nil, "is not a result of an earlier plan " + ref.PlanID, nil
	case schemas.Validate(schemas.ToolResult, m.Data) != nil || json.Unmarshal(m.Data, &r) != nil:
		return nil, "is not a valid tool result", nil
	case r.PlanID != ref.PlanID || r.ToolID != ref.ToolID:
		return nil, fmt.Sprintf("is tool %q's of plan %s, not tool %q's", r.ToolID, r.PlanID, ref.ToolID), nil
	case r.RequestID != p.RequestID:
		return nil, "belongs to another request", nil
	case r.State != planbus.ToolSucceeded:
		return nil, "did not succeed", nil
	case !d.key.CheckResult(r.PlanID, r.ToolID, r.Attempt, r.Token):
		return nil, "does not carry its call's token", nil
	}
	return &r, "", nil
}

// retentionMargin is how much longer than a plan's timeout its messages
// and state must be kept: the plan's last writes (its timeout handled,
// its execution result) come just after the timeout.
const retentionMargin = time.Minute

// maxLife is the longest a plan may run, its approvals' waits included:
// the retention less the margin.
func (d *Dispatcher) maxLife() time.Duration {
	return d.conn.Config.Defaults().Retention - retentionMargin
}

// checkRetention refuses a plan that could outlive its own state: the
// store keeps a plan, its state and its results for the retention after
// they were written, so a plan must end (its timeout) well within it.
func (d *Dispatcher) checkRetention(p *plan.Plan) error {
	retention := d.conn.Config.Defaults().Retention
	timeout := time.Duration(p.TimeoutMs) * time.Millisecond
	if timeout+retentionMargin > retention {
		return &plan.Error{PlanID: p.PlanID, Msg: fmt.Sprintf(
			"timeoutMs %d (%s) does not fit the system's retention %s less a minute: the plan's state would expire while it runs (raise --retention or lower the timeout)",
			p.TimeoutMs, timeout, retention)}
	}
	return nil
}

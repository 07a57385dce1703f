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
)

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
	// A plan that cannot be stored would fail at every delivery: it is
	// rejected, naming its size and the limit.
	stored := mustJSON(p)
	now := time.Now()
	eng, fx := execution.Start(p, now, d.cfg.DefaultMaxConcurrency, d.engineHealth)
	state := storedJSON(eng)
	if limit := d.storeLimit(); len(stored) > limit || len(state) > limit {
		d.reject(ctx, log, it, &plan.Error{PlanID: p.PlanID, Msg: fmt.Sprintf(
			"the plan takes %d bytes with its defaults and its state %d; the store holds at most %d bytes a value (max payload)", len(stored), len(state), limit)})
		return
	}
	if _, err := d.kv.Create(ctx, bus.PlanKey(p.PlanID), stored); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot store plan", err))
		return
	}
	ent := &entry{eng: eng}
	out := d.render(ent, &fx, now)
	rev, err := d.kv.Create(ctx, bus.StateKey(p.PlanID), state)
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
		out = d.render(ent, &fx, now)
	case err != nil:
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot store plan state", err))
		return
	default:
		d.stats.PlansStarted.Add(1)
		ent.rev = rev
		d.remember(s, p.PlanID, p, ent)
		log.Debug().Int("tools", len(p.Tools)).Msg("plan started")
	}
	pd, err := d.send(ent, fx, out)
	if err != nil {
		d.fail(s, p.PlanID, log, []item{it}, failed("cannot publish effects", err))
		return
	}
	pd.ack = []item{it}
	s.acks <- pd
	if ent.eng.Done() {
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
		if t.Fallback != nil {
			if _, err := known(t, t.Fallback.Skill); err != nil {
				return err
			}
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

// reject reports a plan that cannot run as a rejected execution result.
func (d *Dispatcher) reject(ctx context.Context, log zerolog.Logger, it item, cause error) {
	d.rejectCode(ctx, log, it, plan.CodeInvalidPlan, cause)
}

// rejectCode reports a plan that cannot run as a rejected execution
// result with the given code. If that cannot be published either, the
// plan comes back later (at most until the consumer's MaxDeliver).
func (d *Dispatcher) rejectCode(ctx context.Context, log zerolog.Logger, it item, code string, cause error) {
	d.stats.PlansRejected.Add(1)
	requestID := it.planID
	var ids struct {
		RequestID string `json:"requestId"`
	}
	if json.Unmarshal(it.msg.Data(), &ids) == nil && plan.ValidID(ids.RequestID) {
		requestID = ids.RequestID
	}
	now := time.Now().UTC()
	errInfo := &plan.ErrorInfo{Code: code, Category: plan.CategoryInvalidInput, Message: cause.Error()}
	if code == CodeDeliveryLimit {
		errInfo.Category = plan.CategoryInternal
	}
	res := &plan.ExecutionResult{PlanID: it.planID, RequestID: requestID, State: plan.PlanRejected, CanReplan: true,
		Error: errInfo, Tools: []plan.ToolOutcome{}, StartedAt: now, FinishedAt: now}
	log.Warn().Err(cause).Msg("plan rejected")
	d.event(plan.Event{Type: plan.EventPlanRejected, Time: now, RequestID: requestID, PlanID: it.planID, Error: errInfo})
	if _, err := d.conn.JS.Publish(ctx, bus.ExecutionSubject(it.planID), mustJSON(res), jetstream.WithMsgID(it.planID)); err != nil {
		log.Error().Err(err).Msg("cannot publish the rejection; plan will be redelivered")
		_ = it.msg.NakWithDelay(bus.RetryDelay(bus.Deliveries(it.msg)))
		return
	}
	_ = it.msg.Ack()
}

package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/templates"
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
	var gates []*templates.Gate
	if err == nil {
		gates, err = gatesOf(p)
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
	ent := &entry{eng: eng, gates: gates}
	out := d.render(ent, &fx, now)
	rev, err := d.kv.Create(ctx, bus.StateKey(p.PlanID), storedJSON(eng))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Started before: by a dispatcher that died before acknowledging,
		// or the plan was submitted again. Redo what its state implies.
		var lerr error
		if ent, lerr = d.load(ctx, s, p.PlanID); lerr != nil {
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

// gatesOf compiles the verification gates tools carry in their metadata
// (templates.ToolMeta); a gate that does not compile makes the plan invalid.
func gatesOf(p *plan.Plan) ([]*templates.Gate, error) {
	var gates []*templates.Gate
	for i, t := range p.Tools {
		if len(t.Metadata) == 0 {
			continue
		}
		meta, err := templates.ParseToolMeta(t.Metadata)
		if err != nil {
			return nil, &plan.Error{PlanID: p.PlanID, Msg: fmt.Sprintf("tool %q: metadata: %v", t.ToolID, err)}
		}
		if meta == nil || meta.Verify == nil {
			continue
		}
		if gates == nil {
			gates = make([]*templates.Gate, len(p.Tools))
		}
		gates[i] = meta.Verify
	}
	return gates, nil
}

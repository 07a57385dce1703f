package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/goap"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/text"
)

// The agents' effect shell: it loads a session's agent, lets agent.go
// decide, stores the result with compare-and-set and carries out the
// effects. Three kinds of messages drive an agent, each through a durable
// consumer shared by every planner, and each acknowledged once its turn
// is stored and carried out:
//
//   - a change of the session's state (planner-sessions, on the stream of
//     the planbus-sessions bucket): perceive, monitor, decide;
//   - the execution result of the agent's step plan (planner-executions,
//     with the replan loop's, told apart by the plan's metadata.agent);
//   - a wake-up on planbus.agents.<sessionId> (planner-agents): the
//     agent's start, and the end of a cooldown, held back by the server
//     until it is due.
//
// A turn stored by a planner that died before carrying it out is carried
// out again when its message comes back (the effects are idempotent: the
// step plan's message id is its plan id, a cancel's is the plan's, an
// outcome's the agent's).

// agentTries bounds the compare-and-set rounds of one turn.
const agentTries = 10

// agentRuntime is what the service keeps for agents.
type agentRuntime struct {
	store    jetstream.KeyValue // planbus-agents
	sessions jetstream.KeyValue // planbus-sessions, read with revisions
	mu       sync.Mutex
	domains  map[[32]byte]*goap.Domain // decoded domain documents
	// turns cancel the turn each session's agent takes in this process;
	// stops counts the stops waiting for a session's turn to end. A stop
	// cancels the turn (its search, its wait for a generation slot) and
	// turns that begin while it waits hand their message back: a stop
	// does not wait behind an agent's searches.
	turns map[string]context.CancelCauseFunc
	stops map[string]int
}

// beginTurn registers a turn of the session's agent, which a stop may
// cancel; it fails with ErrStopping while a stop waits. The returned
// function ends the registration.
func (r *agentRuntime) beginTurn(ctx context.Context, sessionID string) (context.Context, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stops[sessionID] > 0 {
		return nil, nil, ErrStopping
	}
	tctx, cancel := context.WithCancelCause(ctx)
	if r.turns == nil {
		r.turns = map[string]context.CancelCauseFunc{}
	}
	r.turns[sessionID] = cancel
	return tctx, func() {
		r.mu.Lock()
		delete(r.turns, sessionID)
		r.mu.Unlock()
		cancel(nil)
	}, nil
}

// interrupt cancels the turn the session's agent takes, if any, and holds
// off those that would begin, until the returned function is called.
func (r *agentRuntime) interrupt(sessionID string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stops == nil {
		r.stops = map[string]int{}
	}
	r.stops[sessionID]++
	if cancel := r.turns[sessionID]; cancel != nil {
		cancel(ErrStopping)
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stops[sessionID]--; r.stops[sessionID] <= 0 {
			delete(r.stops, sessionID)
		}
	}
}

// maxCachedDomains bounds the decoded domains a planner keeps.
const maxCachedDomains = 64

// Open binds the buckets and streams agents use; ctx bounds the work of
// every endpoint request the service answers.
func (s *Service) Open(ctx context.Context) error {
	s.stopping = ctx
	var err error
	if s.outcomes, err = s.conn.JS.Stream(ctx, bus.StreamOutcomes); err != nil {
		return fmt.Errorf("planner: outcomes stream: %w", err)
	}
	if s.agents.store, err = s.conn.JS.KeyValue(ctx, bus.BucketAgents); err != nil {
		return fmt.Errorf("planner: agents bucket: %w", err)
	}
	if s.agents.sessions, err = s.conn.JS.KeyValue(ctx, bus.BucketSessions); err != nil {
		return fmt.Errorf("planner: sessions bucket: %w", err)
	}
	return nil
}

// agentDomain decodes a domain document, once per document.
func (s *Service) agentDomain(doc []byte) (*goap.Domain, error) {
	key := sha256.Sum256(doc)
	s.agents.mu.Lock()
	d := s.agents.domains[key]
	s.agents.mu.Unlock()
	if d != nil {
		return d, nil
	}
	d, err := goap.Decode(doc)
	if err != nil {
		return nil, err
	}
	s.agents.mu.Lock()
	if s.agents.domains == nil || len(s.agents.domains) >= maxCachedDomains {
		s.agents.domains = map[[32]byte]*goap.Domain{}
	}
	s.agents.domains[key] = d
	s.agents.mu.Unlock()
	return d, nil
}

// loadAgent reads a session's agent; nil if it has none. "None" is the
// stream leader's word: a replica just back from a partition may not have
// an agent started while it was away, and its turns would be dropped.
func (s *Service) loadAgent(ctx context.Context, sessionID string) (*agentDoc, uint64, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	v, rev, err := bus.KVReadSure(s.conn.NC, s.agents.store)(ctx, sessionID)
	if err != nil || v == nil {
		return nil, 0, err
	}
	var doc agentDoc
	if err := json.Unmarshal(v, &doc); err != nil || doc.Request == nil {
		return nil, 0, fmt.Errorf("planner: agent of session %s: unreadable state (%v)", sessionID, err)
	}
	return &doc, rev, nil
}

// saveAgent stores doc with compare-and-set on rev (0: create).
func (s *Service) saveAgent(ctx context.Context, doc *agentDoc, rev uint64) (uint64, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return 0, err
	}
	if len(data) > s.conn.StoreLimit() {
		return 0, &tooLargeError{size: len(data), limit: s.conn.StoreLimit()}
	}
	ctx, cancel := storeOp(ctx)
	defer cancel()
	if rev == 0 {
		return s.agents.store.Create(ctx, doc.SessionID(), data)
	}
	return s.agents.store.Update(ctx, doc.SessionID(), data, rev)
}

// world reads the session state and its revision; a session with no
// state is empty, at revision floor.
func (s *Service) world(ctx context.Context, sessionID string, floor uint64) (goap.State, uint64, error) {
	e, err := s.agents.sessions.Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return goap.State{}, floor, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: session %s: %v", errStoreUnavailable, sessionID, err)
	}
	st := goap.State{}
	if err := json.Unmarshal(e.Value(), &st); err != nil || st == nil {
		// Not an object (a put by hand): a world with no facts.
		st = goap.State{}
	}
	return st, max(e.Revision(), floor), nil
}

// turn is one change of an agent, given the revision of the world it
// sees and the one it saw last.
type turn func(a *agent, worldRev, seenRev uint64) error

// agentTurn runs f on the session's running agent, stores what f changed
// with compare-and-set (running f again on the stored state if another
// planner changed it meanwhile) and carries out its effects. It returns
// the agent as it found it last (nil: the session has none); f is not
// called for an agent that has ended. redelivered: the message came
// before, and its turn may have been stored without its effects being
// carried out: they are carried out again. floor is the least revision of
// the session state the message stands for. A turn for an agent records a
// span (planbus.agent.turn) saying what it answers (trigger), under the
// request that started the agent, with links (to the plan whose end it
// takes).
func (s *Service) agentTurn(ctx context.Context, trigger, sessionID string, redelivered bool, floor uint64, f turn, links ...trace.Link) (_ *agentDoc, err error) {
	defer s.host.Lock("agent/" + sessionID)()
	if trigger != triggerStop {
		tctx, end, err := s.agents.beginTurn(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		defer end()
		ctx = tctx
		defer func() {
			if context.Cause(tctx) == ErrStopping && err != nil {
				err = ErrStopping
			}
		}()
	}
	sp := &turnSpan{tracer: s.tracer, trigger: trigger, sessionID: sessionID, links: links}
	doc, err := s.takeTurn(ctx, sp, sessionID, redelivered, floor, f)
	sp.end(doc, err)
	return doc, err
}

// turnSpan is the span of an agent's turn (planbus.agent.turn), a child of
// the request that started the agent, begun once there is an agent to act
// for.
type turnSpan struct {
	tracer             trace.Tracer
	trigger, sessionID string
	links              []trace.Link
	span               trace.Span
	ctx                context.Context // with span
	agentID            string          // whose turn span is
}

// begin returns base with the span of doc's turn, started the first time
// it is asked for doc's agent. A turn tried again after a lost
// compare-and-set may find another agent in the session (the one it began
// for stopped, a new one started): the first span ends, and the new
// agent's turn gets a span of its own, in its own trace.
func (t *turnSpan) begin(base context.Context, doc *agentDoc) context.Context {
	if t.span != nil && t.agentID == doc.ID() {
		return t.ctx
	}
	if t.span != nil {
		t.span.SetAttributes(telemetry.AttrState.String("superseded"))
		t.span.End()
	}
	t.agentID = doc.ID()
	t.ctx, t.span = t.tracer.Start(telemetry.FromMap(base, doc.Trace), telemetry.SpanAgentTurn, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(t.links...), trace.WithAttributes(telemetry.AttrRequestID.String(doc.ID()),
			telemetry.AttrSessionID.String(t.sessionID), telemetry.AttrTrigger.String(t.trigger)))
	return t.ctx
}

// end ends the span, if it began, with the agent's state after the turn.
func (t *turnSpan) end(doc *agentDoc, err error) {
	if t.span == nil {
		return
	}
	if doc != nil {
		t.span.SetAttributes(telemetry.AttrState.String(doc.Status))
		if doc.Step != nil {
			t.span.SetAttributes(telemetry.AttrPlanID.String(doc.Step.PlanID))
		}
	}
	if err != nil {
		t.span.SetStatus(codes.Error, err.Error())
	}
	t.span.End()
}

// takeTurn is agentTurn's work, under the session's lock.
func (s *Service) takeTurn(ctx context.Context, sp *turnSpan, sessionID string, redelivered bool, floor uint64, f turn) (*agentDoc, error) {
	for range agentTries {
		doc, rev, err := s.loadAgent(ctx, sessionID)
		if err != nil || doc == nil {
			return nil, err
		}
		if doc.Status != planbus.AgentRunning {
			if redelivered {
				return doc, s.agentEnsure(sp.begin(ctx, doc), doc)
			}
			return doc, nil
		}
		tctx := sp.begin(ctx, doc)
		world, wrev, err := s.world(tctx, sessionID, floor)
		if err != nil {
			return doc, err
		}
		before, _ := json.Marshal(doc)
		seen := doc.SessionRev
		now := time.Now()
		var a *agent
		d, err := s.agentDomain(doc.Domain)
		if err == nil {
			a, err = newAgent(doc, d, world, now, s.agentPlanner(tctx, doc, d))
		}
		if a != nil {
			a.debug = debugEnabled(s.log)
		}
		if err != nil {
			// A domain this planner cannot use (it was decoded when the
			// agent started; a newer planner may read it differently).
			a = &agent{doc: doc, now: now}
			a.doc.Status, a.doc.Step, a.doc.Tracker = planbus.AgentFailed, nil, nil
			a.doc.Error = &planbus.ErrorInfo{Code: planbus.CodeInvalidDomain, Category: planbus.CategoryPermanent, Message: text.Clip(err.Error(), maxErrorMessage)}
			a.event(planbus.EventAgentIdle, "", "the agent's domain cannot be used: "+err.Error()+"; the agent ends")
			a.fx.ended = true
		} else {
			doc.SessionRev = max(doc.SessionRev, wrev)
			if err := f(a, wrev, seen); err != nil {
				return doc, err
			}
			a.store()
		}
		after, _ := json.Marshal(doc)
		if bytes.Equal(before, after) {
			s.logDecisions(doc, a.fx.decisions)
			if redelivered {
				return doc, s.agentEnsure(tctx, doc)
			}
			return doc, nil
		}
		doc.Planner, doc.Updated = s.cfg.ID, now.UTC()
		_, err = s.saveAgent(tctx, doc, rev)
		if casLost(err) {
			continue
		}
		if err != nil {
			return doc, err
		}
		// Logged once the turn is stored: a turn that lost the race is
		// played again and logs then.
		s.logDecisions(doc, a.fx.decisions)
		return doc, s.agentEffects(tctx, doc, a.fx)
	}
	return nil, fmt.Errorf("planner: the agent of session %s changed %d times during one turn; trying again later", sessionID, agentTries)
}

// debugEnabled reports whether log writes debug events.
func debugEnabled(log zerolog.Logger) bool {
	return log.GetLevel() <= zerolog.DebugLevel && zerolog.GlobalLevel() <= zerolog.DebugLevel
}

// logDecisions writes a turn's decisions to the debug log, one event
// each: "agent decision" with the agent, its session, the kind of
// decision, the goal, and for a goal selection its utility and every
// goal's (the seed's goal report).
func (s *Service) logDecisions(doc *agentDoc, decisions []agentDecision) {
	if !debugEnabled(s.log) {
		return
	}
	for _, d := range decisions {
		ev := s.log.Debug().Str("agent_id", doc.ID()).Str("session_id", doc.SessionID()).Str("decision", d.Kind)
		if d.Goal != "" {
			ev = ev.Str("goal", d.Goal)
		}
		if d.Kind == decisionSelect {
			ev = ev.Float64("utility", d.Utility)
		}
		if d.Reason != "" {
			ev = ev.Str("reason", d.Reason)
		}
		if len(d.Goals) > 0 {
			ev = ev.Str("goals", goalReport(d.Goals))
		}
		ev.Str("detail", d.Detail).Msg("agent decision")
	}
}

// goalReport writes every goal's utility on one line, with why a goal is
// not eligible: "clean-dishes 70, clean-floor 40 (cooling down)".
func goalReport(goals []goap.GoalStatus) string {
	parts := make([]string, len(goals))
	for i, g := range goals {
		p := g.Goal + " " + number(g.Utility)
		switch {
		case g.Satisfied:
			p += " (satisfied)"
		case !g.Valid:
			p += " (not valid)"
		case !g.CoolingUntil.IsZero():
			p += " (cooling down)"
		case g.Utility <= 0:
			p += " (zero)"
		}
		parts[i] = p
	}
	return strings.Join(parts, ", ")
}

// What an agent's turn answers (telemetry.AttrTrigger).
const (
	triggerWake    = "wake"    // a wake-up: the agent's start, or a cooldown's end
	triggerSession = "session" // a change of the session's state
	triggerStep    = "step"    // the end of its step plan
	triggerStop    = "stop"    // planbus.agent.stop
)

// agentEffects carries out a stored turn's effects.
func (s *Service) agentEffects(ctx context.Context, doc *agentDoc, fx agentEffects) error {
	for _, ev := range fx.events {
		s.agentEvent(doc, ev)
	}
	for _, id := range fx.cancel {
		if err := s.host.CancelPlan(ctx, id, text.Clip("the agent dropped the step: "+doc.Detail, 1000)); err != nil {
			return err
		}
	}
	if st := fx.publish; st != nil {
		// The step's plan span is a child of this turn's.
		m := &nats.Msg{Subject: bus.PlanSubject(st.PlanID), Data: st.Plan, Header: telemetry.Inject(ctx, nil)}
		if _, err := s.conn.JS.PublishMsg(ctx, m, jetstream.WithMsgID(st.PlanID)); err != nil {
			return fmt.Errorf("planner: agent %s: publish step %s: %w", doc.ID(), st.PlanID, err)
		}
	}
	if !fx.wake.IsZero() {
		if err := s.publishWake(ctx, doc, fx.wake); err != nil {
			return err
		}
	}
	if fx.ended {
		return s.host.PublishOutcome(ctx, agentOutcome(doc))
	}
	return nil
}

// agentEnsure carries out again what the stored agent implies, for a turn
// whose planner may have died before carrying it out.
func (s *Service) agentEnsure(ctx context.Context, doc *agentDoc) error {
	fx := agentEffects{publish: doc.Step, wake: doc.WakeAt, ended: doc.Status != planbus.AgentRunning}
	if doc.Cancelled != "" {
		fx.cancel = []string{doc.Cancelled}
	}
	return s.agentEffects(ctx, doc, fx)
}

func (s *Service) agentEvent(doc *agentDoc, ev planbus.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.RequestID, ev.SessionID = doc.ID(), doc.SessionID()
	if doc.Step != nil && ev.PlanID == "" {
		ev.PlanID = doc.Step.PlanID
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_ = s.conn.NC.Publish(bus.EventSubject(ev.RequestID, ev.Type), data)
}

// agentOutcome is the outcome of an agent that ended, on
// planbus.outcomes.<agentId>: succeeded when no goal was left, cancelled
// when stopped, failed when its domain could not be used.
func agentOutcome(doc *agentDoc) *planbus.Outcome {
	o := &planbus.Outcome{RequestID: doc.ID(), SessionID: doc.SessionID(), Attempts: doc.Seq, Error: doc.Error, FinishedAt: doc.Updated}
	if doc.Seq > 0 {
		o.PlanID = fmt.Sprintf("%s-a%d", doc.ID(), doc.Seq)
	}
	switch doc.Status {
	case planbus.AgentIdle:
		o.Status, o.Success = planbus.StatusSucceeded, true
	case planbus.AgentStopped:
		o.Status = planbus.StatusCancelled
		o.Error = &planbus.ErrorInfo{Code: planbus.CodeCancelled, Category: planbus.CategoryCancelled, Message: "agent " + doc.Detail}
	default:
		o.Status = planbus.StatusFailed
	}
	return o
}

// agentWake is a wake-up message on planbus.agents.<sessionId>.
type agentWake struct {
	AgentID   string `json:"agentId"`
	SessionID string `json:"sessionId"`
	// FireAt is when it is due, in Unix milliseconds; 0: now.
	FireAt int64 `json:"fireAt,omitempty"`
}

// publishWake wakes the agent at t (zero: now). The message id names the
// time, so asking twice is one wake-up.
func (s *Service) publishWake(ctx context.Context, doc *agentDoc, at time.Time) error {
	w := agentWake{AgentID: doc.ID(), SessionID: doc.SessionID()}
	id := "start-" + doc.ID()
	if !at.IsZero() {
		w.FireAt = at.UnixMilli()
		id = fmt.Sprintf("wake-%s-%d", doc.ID(), w.FireAt)
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if _, err := s.conn.JS.Publish(ctx, bus.AgentSubject(doc.SessionID()), data, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("planner: agent %s: wake-up: %w", doc.ID(), err)
	}
	return nil
}

// OnWake handles a wake-up: the server holds it back until it is
// due; then the agent decides again unless a step runs.
func (s *Service) OnWake(ctx context.Context, m jetstream.Msg) error {
	var w agentWake
	if err := json.Unmarshal(m.Data(), &w); err != nil || !plan.ValidID(w.SessionID) || w.AgentID == "" {
		s.host.Drop(m, "invalid agent wake-up", err)
		return nil
	}
	if wait := time.Until(time.UnixMilli(w.FireAt)); w.FireAt > 0 && wait > 0 {
		_ = m.NakWithDelay(wait)
		return nil
	}
	_, err := s.agentTurn(ctx, triggerWake, w.SessionID, bus.Deliveries(m) > 1, 0, func(a *agent, _, _ uint64) error {
		if a.doc.ID() != w.AgentID {
			return nil // an earlier agent's
		}
		return a.onWake()
	})
	if err != nil {
		return fmt.Errorf("agent of session %s: %w", w.SessionID, err)
	}
	_ = m.Ack()
	return nil
}

// OnSessionChange handles a change of a session's state: its agent, if
// it runs, perceives it.
func (s *Service) OnSessionChange(ctx context.Context, m jetstream.Msg) error {
	sid := bus.SessionOfChange(m.Subject())
	if !plan.ValidID(sid) {
		_ = m.Ack() // a key no session has: written by hand
		return nil
	}
	var floor uint64
	if meta, err := m.Metadata(); err == nil {
		floor = meta.Sequence.Stream
	}
	_, err := s.agentTurn(ctx, triggerSession, sid, bus.Deliveries(m) > 1, floor, func(a *agent, worldRev, seenRev uint64) error {
		if worldRev <= seenRev {
			return nil // acted on already
		}
		return a.onWorld()
	})
	if err != nil {
		return fmt.Errorf("agent of session %s: %w", sid, err)
	}
	_ = m.Ack()
	return nil
}

// OnExecution handles the execution result of an agent's step plan
// and reports whether it did; a result it does not take (no agent's, or
// no longer the step in flight: a step the agent cancelled) goes the
// replan loop's way, which drops it.
func (s *Service) OnExecution(ctx context.Context, m jetstream.Msg, res *planbus.ExecutionResult) (bool, error) {
	var meta struct {
		Agent *agentMeta `json:"agent"`
	}
	if len(res.Metadata) == 0 || json.Unmarshal(res.Metadata, &meta) != nil || meta.Agent == nil ||
		meta.Agent.AgentID != res.RequestID || !plan.ValidID(meta.Agent.SessionID) {
		return false, nil
	}
	taken := false
	// The turn links to the span of the plan that ended, whose context the
	// execution result carries.
	ended := trace.LinkFromContext(telemetry.Extract(context.Background(), m.Headers()))
	_, err := s.agentTurn(ctx, triggerStep, meta.Agent.SessionID, bus.Deliveries(m) > 1, 0, func(a *agent, _, _ uint64) error {
		if a.doc.ID() != res.RequestID || a.doc.Step == nil || a.doc.Step.PlanID != res.PlanID {
			return nil
		}
		taken = true
		return a.onResult(res)
	}, ended)
	if err != nil {
		return false, fmt.Errorf("agent of session %s: %w", meta.Agent.SessionID, err)
	}
	return taken, nil
}

// Abandon is the terminal path of an agent's message that
// could not be handled DeliveryLimit times: it is dropped and logged; the
// agent goes on with the next message.
func (s *Service) Abandon(_ context.Context, m jetstream.Msg, deliveries int, cause error) error {
	s.host.Drop(m, fmt.Sprintf("agent message: gave up after %d deliveries", deliveries), cause)
	return nil
}

// agentPlanner plans for the agent with the planner's budgets, leaving
// out the skills disabled for the goal, those no worker serves and those
// whose health in the session is not usable.
func (s *Service) agentPlanner(ctx context.Context, doc *agentDoc, d *goap.Domain) agentPlanFunc {
	var skills map[string]planbus.SkillManifest
	return func(goal string, world goap.State, disabled []string) (*goap.Result, error) {
		if skills == nil {
			var err error
			if skills, err = s.host.Skills(ctx); err != nil {
				return nil, fmt.Errorf("%w: skill manifests: %v", errStoreUnavailable, err)
			}
		}
		sid := doc.SessionID()
		off := func(skill string) bool {
			return slices.Contains(disabled, skill) || !generator.HasSkill(skills, skill) || !s.host.Usable(sid, skill)
		}
		lim, release, err := s.host.EnterSearch(ctx, doc.Request)
		if err != nil {
			return nil, err
		}
		defer release()
		gctx, cancel := context.WithTimeout(ctx, generator.GenerationTimeout)
		defer cancel()
		gctx, span := s.tracer.Start(gctx, telemetry.SpanGenerate, trace.WithAttributes(telemetry.AttrRequestID.String(doc.ID()),
			telemetry.AttrKind.String(request.KindGOAP), telemetry.AttrGoal.String(goal)))
		defer span.End()
		res, err := goap.Plan(gctx, d, world, goal, goap.Options{Disabled: off, MaxMemory: lim.Memory, MaxNodes: int(lim.Nodes)})
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		var ue *goap.UnreachableError
		var be *goap.BudgetError
		switch {
		case err == nil:
			return res, nil
		case errors.As(err, &ue):
			return nil, &generator.Error{Code: planbus.CodeNoPlan, Category: planbus.CategoryPermanent, Message: err.Error()}
		case errors.Is(err, goap.ErrCanceled) && ctx.Err() == nil:
			return nil, &generator.Error{Code: planbus.CodeGOAPTimeBudget, Category: planbus.CategoryPermanent,
				Message: fmt.Sprintf("the goap planner found no plan for %s within the %s generation budget", goal, generator.GenerationTimeout)}
		case errors.Is(err, goap.ErrCanceled):
			return nil, ctx.Err()
		case errors.As(err, &be):
			code := planbus.CodeGOAPNodeBudget
			if be.Limit == goap.BudgetMemory {
				code = planbus.CodeGOAPMemoryBudget
			}
			return nil, &generator.Error{Code: code, Category: planbus.CategoryPermanent, Message: err.Error()}
		case errors.Is(err, goap.ErrInvalidState), errors.Is(err, goap.ErrEval):
			return nil, err // the world does not fit: the agent waits for it to change
		}
		return nil, &generator.Error{Code: planbus.CodeGOAPError, Category: planbus.CategoryPermanent, Message: err.Error()}
	}
}

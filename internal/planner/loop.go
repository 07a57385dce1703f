package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/health"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/text"
	"github.com/planbus/planbus/internal/wire"
)

// loop is a request's replan loop state, stored under its id in
// planbus-requests.
type loop struct {
	Request  *request.Request         `json:"request"`
	Status   planbus.RequestStatus    `json:"status"` // generating, executing, done
	Attempt  int                      `json:"attempt"`
	PlanID   string                   `json:"planId,omitempty"`
	Plan     json.RawMessage          `json:"plan,omitempty"`     // the plan being executed, to publish again after a crash
	LastPlan json.RawMessage          `json:"lastPlan,omitempty"` // the plan of the last failed attempt, for its fallbacks
	Disabled []string                 `json:"disabledSkills"`
	History  []planbus.Attempt        `json:"history"`
	Last     *planbus.ExecutionResult `json:"lastExecution,omitempty"`
	Outcome  *planbus.Outcome         `json:"outcome,omitempty"`
	Updated  time.Time                `json:"updatedAt"`
	// Cancel is set once a cancel was asked for while a plan ran: the
	// loop then ends cancelled when the plan ends, whatever it ended with
	// but success, and the plan's dispatchers get the cancel again
	// whenever the plan is published again.
	Cancel *cancelMark `json:"cancel,omitempty"`
	// Reusable holds, by tool identity, the results of tools that
	// succeeded in failed attempts, for later attempts to reuse (see
	// reuse.go).
	Reusable map[string]plan.ReuseRef `json:"reusable,omitempty"`
	// Trace is the W3C trace context of the request's span
	// (planbus.request), the parent of the spans of its later steps
	// (planbus.resume), whichever planner handles them. PlanTrace is the
	// one of the generation of Plan, which the plan's message carries,
	// also when it is published again after a crash.
	Trace     map[string]string `json:"trace,omitempty"`
	PlanTrace map[string]string `json:"planTrace,omitempty"`
}

// cancelMark records a cancel asked for on planbus.plan.cancel.
type cancelMark struct {
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// info is the error a loop cancelled this way ends with; c may be nil.
func (c *cancelMark) info() *planbus.ErrorInfo {
	msg := "cancelled on request"
	if c != nil && c.Reason != "" {
		msg += ": " + c.Reason
	}
	return &planbus.ErrorInfo{Code: planbus.CodeCancelled, Category: planbus.CategoryCancelled, Message: msg}
}

// The statuses of a loop: a request's while it runs, then done (the
// outcome has the request's status).
const (
	loopGenerating                       = planbus.RequestGenerating
	loopExecuting                        = planbus.RequestExecuting
	loopDone       planbus.RequestStatus = "done"
)

// load reads a request's loop state; nil if it has none. "None" is the
// stream leader's word: a replica just back from a partition may not have
// the state of a request accepted while it was away, and a plan's
// execution result taken for one submitted directly is dropped.
func (s *Service) load(ctx context.Context, requestID string) (*loop, uint64, error) {
	return s.loadWith(ctx, requestID, bus.KVReadSure(s.conn.NC, s.requests))
}

// loadAny is load that takes any replica's word for "none": for a new
// request, whose state is then created (and a stale "none" meets the
// state that exists).
func (s *Service) loadAny(ctx context.Context, requestID string) (*loop, uint64, error) {
	return s.loadWith(ctx, requestID, bus.KVRead(s.requests))
}

func (s *Service) loadWith(ctx context.Context, requestID string, get execution.Getter) (*loop, uint64, error) {
	octx, cancel := storeOp(ctx)
	defer cancel()
	v, rev, err := get(octx, requestID)
	if err != nil || v == nil {
		return nil, 0, err
	}
	var l loop
	if err := json.Unmarshal(v, &l); err != nil {
		return nil, 0, fmt.Errorf("loop state of %s: %w", requestID, err)
	}
	return &l, rev, nil
}

// save stores the loop with compare-and-set. The holder of the request's
// lock writes, and the lock is per process, so a conflict means another
// planner works on the request (the caller leaves it to that one), or the
// request was cancelled meanwhile: the cancel endpoint writes without the
// lock, so as not to wait for a generation (see reloadCancelled).
//
// A state too large for the store is a *tooLargeError, after its
// executions were slimmed (encodeLoop).
func (s *Service) save(ctx context.Context, l *loop, rev uint64) (uint64, error) {
	l.Updated = time.Now().UTC()
	limit := s.storeLimit()
	data, ok := encodeLoop(l, limit)
	if data == nil {
		return 0, fmt.Errorf("planner: encode loop state of %s", l.Request.RequestID)
	}
	if !ok {
		return 0, &tooLargeError{size: len(data), limit: limit}
	}
	octx, cancel := storeOp(ctx)
	defer cancel()
	var err error
	if rev == 0 {
		rev, err = s.requests.Create(octx, l.Request.RequestID, data)
	} else {
		rev, err = s.requests.Update(octx, l.Request.RequestID, data, rev)
	}
	if casLost(err) {
		s.metrics.Conflict()
	}
	return rev, err
}

// errStoreUnavailable: what a generation reads from KV (the session's
// state, the skill manifests) could not be read. The loop step is retried
// later from its stored state; no attempt is used up.
var errStoreUnavailable = errors.New("planner: store unavailable")

// onRequest starts (or resumes) the loop of an accepted request.
func (s *Service) onRequest(ctx context.Context, m jetstream.Msg) error {
	r, err := request.Decode(m.Data())
	if err != nil || r.RequestID == "" {
		s.drop(m, "invalid request", err)
		return nil
	}
	// A new request generates: it waits for its turn at the gate before it
	// takes its lock, which it shares with other requests' messages.
	if lim := s.cfg.limitsFor(r); lim.Gated {
		release, err := s.enterGate(ctx, lim)
		if err != nil {
			return err
		}
		defer release()
		ctx = context.WithValue(ctx, gateHeld{}, true)
	}
	defer s.lock(r.RequestID)()
	ctx, span := s.tracer.Start(telemetry.Extract(ctx, m.Headers()), telemetry.SpanRequest, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(telemetry.AttrRequestID.String(r.RequestID), telemetry.AttrSessionID.String(r.SessionID), telemetry.AttrKind.String(r.Kind)))
	defer span.End()
	l, rev, err := s.loadAny(ctx, r.RequestID)
	if err == nil && l == nil {
		l = &loop{Request: r, Status: loopGenerating, Disabled: []string{}, History: []planbus.Attempt{}, Trace: telemetry.Map(ctx)}
		rev, err = s.save(ctx, l, 0)
		if tl, ok := isTooLarge(err); ok {
			// Published around the endpoint, which refuses such requests:
			// it ends at once, with what it needs stored.
			s.requestTooLarge(l, len(m.Data()), tl)
			rev, err = s.save(ctx, l, 0)
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			l, rev, err = s.load(ctx, r.RequestID)
		} else if err == nil {
			s.metrics.RequestStarted(r.Kind)
		}
	}
	if err != nil {
		return fmt.Errorf("request %s: loop state: %w", r.RequestID, err)
	}
	if err := s.advance(ctx, l, rev); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return fmt.Errorf("request %s: %w", r.RequestID, err)
	}
	_ = m.Ack()
	return nil
}

// onExecution moves a loop on when its plan ends.
func (s *Service) onExecution(ctx context.Context, m jetstream.Msg) error {
	// Most plans have no loop here (they were submitted directly): their
	// results, which hold every tool's outcome, are read only as far as
	// it takes to tell.
	head, err := decodeExecutionHead(m.Data())
	if err != nil || head.RequestID == "" {
		s.drop(m, "invalid execution result", err)
		return nil
	}
	var res *planbus.ExecutionResult
	if head.agent() {
		if res, err = decodeExecution(m.Data()); err != nil {
			s.drop(m, "invalid execution result", err)
			return nil
		}
		if taken, err := s.agents.OnExecution(ctx, m, res); taken || err != nil {
			if err == nil {
				_ = m.Ack() // an agent's step (internal/agent)
			}
			return err
		}
	}
	defer s.lock(head.RequestID)()
	// A plan submitted directly is its own request (its planId is its
	// requestId; a planner's plans are <requestId>-<attempt>): it has no
	// loop state, and any replica's word for that will do.
	load := s.load
	if head.PlanID == head.RequestID {
		load = s.loadAny
	}
	l, rev, err := load(ctx, head.RequestID)
	if err != nil {
		return fmt.Errorf("request %s: loop state: %w", head.RequestID, err)
	}
	if l == nil {
		_ = m.Ack() // a plan submitted directly, not through a request
		return nil
	}
	if res == nil {
		if res, err = decodeExecution(m.Data()); err != nil {
			s.drop(m, "invalid execution result", err)
			return nil
		}
	}
	// A step of a traced request: a child of the request's span, linked to
	// the plan's (the execution result's header).
	var span trace.Span
	ctx, span = s.tracer.Start(telemetry.FromMap(ctx, l.Trace), telemetry.SpanResume, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.LinkFromContext(telemetry.Extract(context.Background(), m.Headers()))),
		trace.WithAttributes(telemetry.AttrRequestID.String(res.RequestID), telemetry.AttrPlanID.String(res.PlanID), telemetry.AttrState.String(string(res.State))))
	defer span.End()
	if l.Status == loopExecuting && l.PlanID == res.PlanID {
		s.record(l, res)
	}
	if err := s.advance(ctx, l, rev); err != nil {
		return fmt.Errorf("request %s: %w", res.RequestID, err)
	}
	_ = m.Ack()
	return nil
}

// executionHead is what the planner reads first of an execution result.
type executionHead struct {
	RequestID string          `json:"requestId"`
	PlanID    string          `json:"planId"`
	Metadata  json.RawMessage `json:"metadata"`
}

// agent reports whether the result is of a plan of a GOAP agent's
// (internal/agent), which holds its agent in metadata.agent.
func (h *executionHead) agent() bool {
	var meta struct {
		Agent json.RawMessage `json:"agent"`
	}
	return len(h.Metadata) > 0 && json.Unmarshal(h.Metadata, &meta) == nil && len(meta.Agent) > 0
}

// decodeExecutionHead reads the head of an execution result, skipping
// the rest (wire.Lenient: 0.26 against 2.2 ms and 4,000 allocations to
// decode a result of 1,000 tools whole, BenchmarkExecutionResult1000).
func decodeExecutionHead(data []byte) (executionHead, error) {
	var h executionHead
	err := wire.Lenient(data, &h)
	return h, err
}

func decodeExecution(data []byte) (*planbus.ExecutionResult, error) {
	var res planbus.ExecutionResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, err
	}
	if res.RequestID == "" {
		return nil, errors.New("no requestId")
	}
	return &res, nil
}

// planbus.CodeDeliveryLimit is the code of a request the planner gave up on: its
// messages were delivered DeliveryLimit times and could not be handled.

// abandonRequest is a request's terminal path: it ends with a failed
// outcome naming the cause.
func (s *Service) abandonRequest(ctx context.Context, m jetstream.Msg, deliveries int, cause error) error {
	r, err := request.Decode(m.Data())
	if err != nil {
		s.drop(m, "invalid request", err)
		return nil
	}
	return s.abandon(ctx, m, r.RequestID, r, deliveries, cause)
}

// abandonExecution is an execution result's terminal path: the request it
// belongs to, if any, ends with a failed outcome; one of no request is
// dropped.
func (s *Service) abandonExecution(ctx context.Context, m jetstream.Msg, deliveries int, cause error) error {
	var res planbus.ExecutionResult
	if err := json.Unmarshal(m.Data(), &res); err != nil || res.RequestID == "" {
		s.drop(m, "invalid execution result", err)
		return nil
	}
	return s.abandon(ctx, m, res.RequestID, nil, deliveries, cause)
}

// abandon ends request id with a failed outcome (DELIVERY_LIMIT), stored
// if the store lets it and published, then terminates m. r is the request
// when m carries it.
func (s *Service) abandon(ctx context.Context, m jetstream.Msg, id string, r *request.Request, deliveries int, cause error) error {
	defer s.lock(id)()
	l, rev, err := s.load(ctx, id)
	if err != nil || l == nil {
		if r == nil {
			s.drop(m, fmt.Sprintf("request %s: no loop state to end after %d deliveries", id, deliveries), cause)
			return nil
		}
		// The state cannot be read (or was never stored): publish the
		// outcome alone.
		l, rev = &loop{Request: r, Disabled: []string{}, History: []planbus.Attempt{}}, 0
	}
	if l.Status != loopDone {
		s.finish(l, planbus.StatusFailed, &planbus.ErrorInfo{Code: planbus.CodeDeliveryLimit, Category: planbus.CategoryInternal,
			Message: text.Clip(fmt.Sprintf("the planner gave up on the request after %d deliveries of %s: %v", deliveries, m.Subject(), cause), maxErrorMessage)})
	}
	if err == nil {
		if _, serr := s.save(ctx, l, rev); serr != nil {
			s.log.Warn().Err(serr).Str("request_id", id).Msg("cannot store the end of an abandoned request; publishing its outcome anyway")
		}
	}
	if err := s.publishOutcome(ctx, l.Outcome); err != nil {
		return err
	}
	s.drop(m, fmt.Sprintf("request %s: gave up after %d deliveries", id, deliveries), cause)
	return nil
}

// drop terminates a message the planner will not handle, logging and
// counting it.
func (s *Service) drop(m jetstream.Msg, why string, cause error) {
	s.stats.Dropped.Add(1)
	s.metrics.Dropped()
	s.log.Error().Err(cause).Str("subject", m.Subject()).Msg("dropping a message: " + why)
	_ = m.TermWithReason(why)
}

// record notes an execution's end in the loop: success ends it; a
// cancelled plan, or any end of a plan whose request was cancelled, ends
// it cancelled; a failure that can be replanned goes back to generating
// with the failed skills, and the skills health has disabled, added to
// disabledSkills.
func (s *Service) record(l *loop, res *planbus.ExecutionResult) {
	l.Last = res
	a := planbus.Attempt{Attempt: l.Attempt, PlanID: res.PlanID, State: res.State, Error: trimmed(res.Error), FailedSkills: res.FailedSkills}
	switch {
	case res.Success:
		l.History = append(l.History, a)
		s.finish(l, planbus.StatusSucceeded, nil)
	case res.State == planbus.PlanCancelled || l.Cancel != nil:
		l.History = append(l.History, a)
		info := trimmed(res.Error)
		if res.State != planbus.PlanCancelled || info == nil {
			// The plan ended otherwise (failed, timed out) before the
			// cancel reached it: the request still ends as asked.
			info = l.Cancel.info()
		}
		s.finish(l, planbus.StatusCancelled, info)
	case res.CanReplan && l.Attempt < l.Request.MaxAttempts:
		grown := slices.Clone(l.Disabled)
		for _, sk := range append(plan.BlamedSkills(res), s.health.Disabled(l.Request.SessionID)...) {
			if !slices.Contains(grown, sk) {
				grown = append(grown, sk)
			}
		}
		slices.Sort(grown)
		a.DisabledSkills = grown
		l.History = append(l.History, a)
		l.remember(res)
		l.Disabled, l.Status, l.LastPlan, l.Plan = grown, loopGenerating, l.Plan, nil
		s.metrics.Replanned(l.Request.Kind)
		s.event(l, planbus.Event{Type: "request.replanning", PlanID: res.PlanID, Attempt: l.Attempt,
			Message: fmt.Sprintf("attempt %d %s; generating attempt %d with disabled skills %v", l.Attempt, res.State, l.Attempt+1, grown)})
	case res.CanReplan:
		l.History = append(l.History, a)
		s.finish(l, planbus.StatusFallback, res.Error)
	default:
		l.History = append(l.History, a)
		s.finish(l, planbus.StatusFailed, res.Error)
	}
}

// advance carries the loop forward from its stored state and performs what
// the state implies: generate while generating, (re)publish the plan being
// executed, (re)publish the outcome of a finished request. Every change is
// stored before it is acted on.
func (s *Service) advance(ctx context.Context, l *loop, rev uint64) error {
	for {
		switch l.Status {
		case loopDone:
			_, err := s.save(ctx, l, rev)
			if _, ok := isTooLarge(err); ok {
				// The request is too large to keep: its outcome is not.
				s.stats.TooLarge.Add(1)
				l.Request = slimRequest(l.Request)
				_, err = s.save(ctx, l, rev)
			}
			if nl, nrev, ok := s.reloadCancelled(ctx, l, err); ok {
				l, rev = nl, nrev
				continue
			}
			if err != nil {
				return err
			}
			return s.publishOutcome(ctx, l.Outcome)
		case loopExecuting:
			if _, err := s.save(ctx, l, rev); err != nil {
				if tl, ok := isTooLarge(err); ok {
					s.planTooLarge(l, tl)
					continue
				}
				if nl, nrev, ok := s.reloadCancelled(ctx, l, err); ok {
					l, rev = nl, nrev
					continue
				}
				return err
			}
			octx, cancel := storeOp(ctx)
			_, err := s.conn.JS.PublishMsg(octx, &nats.Msg{Subject: bus.PlanSubject(l.PlanID), Data: l.Plan, Header: telemetry.HeaderFromMap(l.PlanTrace)},
				jetstream.WithMsgID(l.PlanID))
			cancel()
			if err != nil {
				return err
			}
			if l.Cancel != nil {
				// Published again after a crash: so is its cancel.
				return s.publishCancel(ctx, l.PlanID, l.Cancel)
			}
			return nil
		}
		if l.Cancel != nil {
			s.finish(l, planbus.StatusCancelled, l.Cancel.info())
			continue
		}
		if l.Attempt >= l.Request.MaxAttempts {
			last := (*planbus.ErrorInfo)(nil)
			if n := len(l.History); n > 0 {
				last = l.History[n-1].Error
			}
			s.finish(l, planbus.StatusFallback, last)
			continue
		}
		l.Attempt++
		s.event(l, planbus.Event{Type: "request.generating", Attempt: l.Attempt,
			Message: fmt.Sprintf("generating attempt %d of %d (%s)", l.Attempt, l.Request.MaxAttempts, l.Request.Kind)})
		gctx, stop := s.generating(ctx, l.Request.RequestID)
		gctx, span := s.tracer.Start(gctx, telemetry.SpanGenerate, trace.WithAttributes(telemetry.AttrRequestID.String(l.Request.RequestID),
			telemetry.AttrKind.String(l.Request.Kind), telemetry.AttrAttempt.Int(l.Attempt)))
		began := time.Now()
		p, err := s.generate(gctx, l)
		took := time.Since(began)
		l.PlanTrace = telemetry.Map(gctx)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(telemetry.AttrPlanID.String(p.PlanID), telemetry.AttrTools.Int(len(p.Tools)))
		}
		span.End()
		stop()
		if err != nil && errors.Is(context.Cause(gctx), errCancelled) {
			// Cancelled by the endpoint, which has ended the loop in the
			// store: carry on from there.
			nl, nrev, lerr := s.load(ctx, l.Request.RequestID)
			if lerr != nil || nl == nil {
				return fmt.Errorf("cancelled while generating; loop state: %v", lerr)
			}
			l, rev = nl, nrev
			continue
		}
		if errors.Is(err, errStoreUnavailable) {
			// Not the generator's failure: the attempt is not used up, and
			// the message comes back once the store answers again.
			return err
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errHandBack) {
				return err // nothing is recorded: whoever handles the message again generates this attempt
			}
			ge := generator.ErrorOf(err)
			outcome := metrics.GenFailed
			if !ge.Retryable() {
				outcome = metrics.GenPermanent
			}
			s.metrics.Generated(l.Request.Kind, outcome, took)
			l.History = append(l.History, planbus.Attempt{Attempt: l.Attempt, State: planbus.AttemptGenerationFailed, Error: trimmed(ge.Info()), DisabledSkills: slices.Clone(l.Disabled)})
			s.log.Warn().Str("request_id", l.Request.RequestID).Int("attempt", l.Attempt).Err(err).Msg("generation failed")
			if !ge.Retryable() {
				s.finish(l, planbus.StatusFallback, trimmed(ge.Info()))
			}
			continue
		}
		s.metrics.Generated(l.Request.Kind, metrics.GenSucceeded, took)
		data, _ := json.Marshal(p)
		// The last plan served this generation (template fallbacks); the
		// state keeps one plan at a time.
		l.Status, l.PlanID, l.Plan, l.LastPlan = loopExecuting, p.PlanID, data, nil
		msg := fmt.Sprintf("attempt %d: plan %s with %d tool(s)", l.Attempt, p.PlanID, len(p.Tools))
		if n := reusing(p); n > 0 {
			msg += fmt.Sprintf(", %d of them reusing earlier results", n)
		}
		s.event(l, planbus.Event{Type: "request.generated", PlanID: p.PlanID, Attempt: l.Attempt, Message: msg})
	}
}

func (s *Service) generate(ctx context.Context, l *loop) (*plan.Plan, error) {
	r := l.Request
	g, ok := s.generators[r.Kind]
	if !ok {
		return nil, &generator.Error{Code: planbus.CodeUnsupportedKind, Category: planbus.CategoryInvalidInput, Message: fmt.Sprintf("kind %q is not available", r.Kind)}
	}
	in := generator.Input{Request: r, Attempt: l.Attempt, DisabledSkills: slices.Clone(l.Disabled), LastExecution: l.Last}
	if len(l.LastPlan) > 0 {
		if p, err := plan.Decode(l.LastPlan); err == nil {
			in.LastPlan = p
		}
	}
	if n := len(l.History); n > 0 {
		in.ParentPlanID = l.History[n-1].PlanID
	}
	var err error
	sctx, scancel := storeOp(ctx)
	in.Session, err = s.states.Get(sctx, r.SessionID)
	scancel()
	if err != nil {
		return nil, fmt.Errorf("%w: session %s: %v", errStoreUnavailable, r.SessionID, err)
	}
	if in.Skills, err = s.skillManifests(ctx); err != nil {
		return nil, fmt.Errorf("%w: skill manifests: %v", errStoreUnavailable, err)
	}
	in.Health, in.HealthError = map[string]string{}, map[string]string{}
	for name := range in.Skills {
		h := s.health.Get(r.SessionID, name)
		in.Health[name] = h.State
		if h.LastError != "" && h.State != health.Healthy {
			in.HealthError[name] = h.LastError
		}
		if !h.Usable() && !slices.Contains(in.DisabledSkills, name) {
			in.DisabledSkills = append(in.DisabledSkills, name)
		}
	}
	lim := s.cfg.limitsFor(r)
	in.Memory, in.Nodes = lim.Memory, lim.Nodes
	if held, _ := ctx.Value(gateHeld{}).(bool); lim.Gated && !held {
		release, err := s.enterGate(ctx, lim)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	// The generation's time budget starts once it runs, not while it waits.
	gctx, cancel := context.WithTimeout(ctx, generator.Budget(r.Kind, s.cfg.LLM.Budget))
	defer cancel()
	p, err := g.Generate(gctx, in)
	var ge *generator.Error
	if err != nil && lim.Gated && !errors.As(err, &ge) && ctx.Err() == nil && errors.Is(gctx.Err(), context.DeadlineExceeded) {
		// A deterministic planner given the same input runs out of time
		// again: the failure is permanent, not a timeout worth retrying.
		return nil, &generator.Error{Code: generator.TimeBudgetCode(r.Kind), Category: planbus.CategoryPermanent,
			Message: fmt.Sprintf("the %s planner found no plan within the %s generation budget", r.Kind, generator.GenerationTimeout)}
	}
	if err != nil {
		return nil, err
	}
	// A listing read while the store recovers can come back short: look up
	// a skill the plan uses before calling it unknown.
	for _, t := range p.Tools {
		if _, ok := in.Skills[t.Skill]; ok || t.Skill == "" {
			continue
		}
		mctx, mcancel := storeOp(ctx)
		e, err := s.manifests.Get(mctx, t.Skill)
		mcancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("%w: skill %s: %v", errStoreUnavailable, t.Skill, err)
		default:
			var m planbus.SkillManifest
			if json.Unmarshal(e.Value(), &m) == nil {
				in.Skills[t.Skill] = m
			}
		}
	}
	return s.finishPlan(p, l, in)
}

// gateHeld marks a context whose handler already passed the gate for its
// request's generations.
type gateHeld struct{}

// enterGate waits for a generation slot and the generation's memory, until
// ctx ends or the service stops (then the message is handed back).
func (s *Service) enterGate(ctx context.Context, lim generator.Limits) (func(), error) {
	g := s.quick
	if lim.Search {
		g = s.gate
	}
	return s.enter(ctx, g, lim)
}

// enter waits for a slot of g and lim's memory (see enterGate).
func (s *Service) enter(ctx context.Context, g *generator.Gate, lim generator.Limits) (func(), error) {
	wait, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.stopping, cancel)
	defer stop()
	release, err := g.Enter(wait, lim.Memory)
	switch {
	case err == nil:
		return release, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: the planner is stopping", errHandBack)
}

// finishPlan gives a generated plan its ids and metadata and checks it.
func (s *Service) finishPlan(p *plan.Plan, l *loop, in generator.Input) (*plan.Plan, error) {
	r := l.Request
	p.PlanID = fmt.Sprintf("%s-%d", r.RequestID, l.Attempt)
	p.RequestID, p.SessionID = r.RequestID, r.SessionID
	if d := r.PlanDefaults; d != nil {
		if d.MaxConcurrency > 0 && p.MaxConcurrency == 0 {
			p.MaxConcurrency = d.MaxConcurrency
		}
		if d.TimeoutMs > 0 {
			p.TimeoutMs = d.TimeoutMs
		}
	}
	meta := map[string]any{}
	if len(p.Metadata) > 0 {
		_ = json.Unmarshal(p.Metadata, &meta)
	}
	meta["generationAttempt"] = l.Attempt
	meta["parentPlanId"] = in.ParentPlanID
	meta["generator"] = r.Kind
	meta["disabledSkills"] = in.DisabledSkills
	p.Metadata, _ = json.Marshal(meta)
	for _, t := range p.Tools {
		if slices.Contains(in.DisabledSkills, t.Skill) {
			return nil, &generator.Error{Code: planbus.CodeSkillDisabled, Category: planbus.CategoryTransient,
				Message: fmt.Sprintf("the %s planner used disabled skill %q (tool %q)", r.Kind, t.Skill, t.ToolID)}
		}
		if _, ok := in.Skills[t.Skill]; !ok {
			return nil, &generator.Error{Code: planbus.CodeUnknownSkill, Category: planbus.CategoryTransient,
				Message: fmt.Sprintf("tool %q uses unknown skill %q", t.ToolID, t.Skill)}
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	checked, err := plan.Decode(data)
	if err != nil {
		return nil, &generator.Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryTransient, Message: err.Error()}
	}
	l.reuse(checked)
	return checked, nil
}

func (s *Service) skillManifests(ctx context.Context) (map[string]planbus.SkillManifest, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	lister, err := s.manifests.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]planbus.SkillManifest{}
	for k := range lister.Keys() {
		// A skill that cannot be read now is not an unknown skill; one
		// deleted since it was listed is.
		m, err := s.skillManifest(ctx, k)
		if err != nil {
			return nil, err
		}
		if m != nil {
			out[k] = *m
		}
	}
	return out, nil
}

// skillManifest reads one skill's manifest; nil if none is advertised.
func (s *Service) skillManifest(ctx context.Context, name string) (*planbus.SkillManifest, error) {
	ctx, cancel := storeOp(ctx)
	defer cancel()
	e, err := s.manifests.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("skill %s: %w", name, err)
	}
	var m planbus.SkillManifest
	if json.Unmarshal(e.Value(), &m) != nil {
		// Not a manifest: a skill with only its name (docs/protocol.md).
		m = planbus.SkillManifest{}
	}
	m.Name = name
	return &m, nil
}

// requestEnded is the event of a request that ended with a status.
var requestEnded = map[planbus.RequestStatus]planbus.EventType{
	planbus.StatusSucceeded: planbus.EventRequestSucceeded, planbus.StatusFailed: planbus.EventRequestFailed,
	planbus.StatusFallback: planbus.EventRequestFallback, planbus.StatusCancelled: planbus.EventRequestCancelled,
}

// finish ends the loop with an outcome; advance stores and publishes it.
func (s *Service) finish(l *loop, status planbus.RequestStatus, errInfo *planbus.ErrorInfo) {
	r := l.Request
	o := &planbus.Outcome{RequestID: r.RequestID, SessionID: r.SessionID, Status: status, Success: status == planbus.StatusSucceeded,
		Fallback: status == planbus.StatusFallback, Attempts: len(l.History), PlanID: l.PlanID, DisabledSkills: l.Disabled,
		Error: errInfo, History: l.History, Execution: l.Last, FinishedAt: time.Now().UTC()}
	if o.Fallback {
		o.Narrative = s.narrate(r, errInfo, l.Last)
		o.Tools = []json.RawMessage{}
	}
	// The outcome holds the last execution: the state need not keep it twice.
	l.Status, l.Outcome, l.Plan, l.LastPlan, l.Last, l.Reusable = loopDone, o, nil, nil, nil, nil
	s.metrics.RequestEnded(status)
	s.event(l, planbus.Event{Type: requestEnded[status], PlanID: l.PlanID, Attempts: o.Attempts, Error: errInfo,
		Message: fmt.Sprintf("%s after %d attempt(s)", status, o.Attempts)})
}

// narrate fills a fallback text (Config.FallbackTemplates), chosen by
// the request id so the same request always gets the same text. The texts
// answer a request's input; a request without one (a plan, a goal) gets
// what went wrong instead, which a story about its empty input would hide,
// and what its last plan did when it ran some tools before it ended
// (last): "no plan could run" would read as if nothing had.
func (s *Service) narrate(r *request.Request, errInfo *planbus.ErrorInfo, last *planbus.ExecutionResult) string {
	input := strings.TrimSpace(string(r.Input))
	var str string
	if json.Unmarshal(r.Input, &str) == nil {
		input = str
	}
	if input == "" {
		if ran := whatRan(last); ran != "" {
			if errInfo != nil {
				return ran + ": " + errInfo.Message
			}
			return ran + ", and the attempts are used up."
		}
		if errInfo == nil {
			return "No plan for this request could run, and the attempts are used up."
		}
		return "No plan for this request could run: " + errInfo.Message
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(r.RequestID))
	t := s.cfg.FallbackTemplates[h.Sum32()%uint32(len(s.cfg.FallbackTemplates))]
	return strings.ReplaceAll(t, "{input}", input)
}

// whatRan says what the last plan did before it ended, when any of its
// tools succeeded: "Plan r-2 ran 17 of its 20 tools to success, then
// timed out"; "" when none did.
func whatRan(last *planbus.ExecutionResult) string {
	if last == nil {
		return ""
	}
	done := 0
	for _, t := range last.Tools {
		if t.State == planbus.ToolSucceeded {
			done++
		}
	}
	if done == 0 {
		return ""
	}
	ended := "failed"
	switch last.State {
	case planbus.PlanTimeout:
		ended = "timed out"
	case planbus.PlanCancelled:
		ended = "was cancelled"
	}
	return fmt.Sprintf("Plan %s ran %d of its %d tools to success, then %s", last.PlanID, done, len(last.Tools), ended)
}

func (s *Service) publishOutcome(ctx context.Context, o *planbus.Outcome) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	octx, cancel := storeOp(ctx)
	defer cancel()
	_, err = s.conn.JS.Publish(octx, bus.OutcomeSubject(o.RequestID), data, jetstream.WithMsgID("outcome-"+o.RequestID))
	return err
}

func (s *Service) event(l *loop, ev planbus.Event) {
	ev.Time, ev.RequestID, ev.SessionID = time.Now(), l.Request.RequestID, l.Request.SessionID
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_ = s.conn.NC.Publish(bus.EventSubject(ev.RequestID, ev.Type), data)
}

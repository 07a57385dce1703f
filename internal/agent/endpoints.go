package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/text"
	"github.com/planbus/planbus/schemas"
)

// The agent endpoints: planbus.agent.start (and planbus.plan.request with
// kind goap and goap.agent), planbus.agent.stop and planbus.agent.status.

// Duplicate is the answer to a start sent again: the agent it started,
// and when.
type Duplicate struct {
	What, When string
}

// maxAgentID keeps room in a plan id for the step's "-a<n>" suffix.
const maxAgentID = 112

// Start starts the session's agent for r, a request of kind goap
// with goap.agent, already checked against its schema and budgets. The
// agent's state is stored before the answer, then its first wake-up is
// published; a request with the id of the session's running agent
// publishes that wake-up again and is accepted (a client that lost the
// answer may ask again). Errors are *request.Error for the request's
// faults, else the store's.
func (s *Service) Start(ctx context.Context, r *request.Request) (*Duplicate, error) {
	g := r.GOAP
	switch {
	case g.Goal != "":
		return nil, &request.Error{Field: "/goap/goal", Msg: "an agent chooses its goals with its arbiter: leave goal out, or leave agent out to plan for this goal once"}
	case g.State != nil:
		return nil, &request.Error{Field: "/goap/state", Msg: "an agent's world is the session state: put these facts there (the remember skill) and leave state out"}
	case len(r.RequestID) > maxAgentID:
		return nil, &request.Error{Field: "/requestId", Msg: fmt.Sprintf("an agent's id takes at most %d characters, leaving room for its plans' ids", maxAgentID)}
	}
	doc, d, err := s.goap.Document(g)
	if err != nil {
		return nil, err
	}
	if len(d.Goals) == 0 {
		return nil, &request.Error{Field: "/goap", Msg: "the domain has no goals: an agent would have nothing to pursue"}
	}
	kept := *r
	kg := *g
	kg.Inline = nil // kept once, as the agent's domain
	kept.GOAP = &kg
	now := time.Now().UTC()
	a := &agentDoc{Request: &kept, Domain: doc, Status: planbus.AgentRunning, Goals: map[string]*planbus.GoalStats{},
		Planner: s.cfg.ID, Started: now, Updated: now, Detail: "starting", Trace: telemetry.Map(ctx)}
	for range agentTries {
		cur, rev, err := s.loadAgent(ctx, r.SessionID)
		if err != nil {
			return nil, err
		}
		if cur != nil && cur.ID() == r.RequestID {
			// The session's agent has this id: the same start again is
			// accepted (its wake-up published again if it runs), another
			// refused; an ended agent is not started again under its id,
			// whose plans and outcome are that agent's.
			was, _ := json.Marshal(cur.Request)
			now, _ := json.Marshal(&kept)
			if !bytes.Equal(was, now) || !sameJSON(cur.Domain, doc) {
				return nil, &request.Error{Field: "/requestId", Msg: fmt.Sprintf(
					"agent %s of session %s was started at %s with another request; a request id names one agent: start this one under a new requestId, or leave requestId out",
					cur.ID(), r.SessionID, cur.Started.UTC().Format(time.RFC3339))}
			}
			again := &Duplicate{What: "agent " + cur.ID(), When: "at " + cur.Started.UTC().Format(time.RFC3339)}
			if cur.Status != planbus.AgentRunning {
				again.When += " and has ended (" + cur.Status + ")"
				return again, nil
			}
			return again, s.publishWake(ctx, cur, time.Time{})
		}
		if cur != nil && cur.Status == planbus.AgentRunning {
			return nil, &request.Error{Field: "/sessionId", Msg: fmt.Sprintf("session %s already has a running agent, %s; stop it first (planner agent stop %s)",
				r.SessionID, cur.ID(), r.SessionID)}
		}
		// An id that ended before, an agent's of this session or another's
		// or a request's, names that: its plans and outcome are its own.
		switch m, err := s.outcomes.GetLastMsgForSubject(ctx, bus.OutcomeSubject(r.RequestID)); {
		case err == nil:
			return nil, &request.Error{Field: "/requestId", Msg: fmt.Sprintf(
				"request id %s names a request or agent that ended at %s; start this agent under a new requestId, or leave requestId out",
				r.RequestID, m.Time.UTC().Format(time.RFC3339))}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return nil, fmt.Errorf("planner: look the agent id up: %w", err)
		}
		if _, err = s.saveAgent(ctx, a, rev); casLost(err) {
			continue
		}
		if tl := (*tooLargeError)(nil); errors.As(err, &tl) {
			return nil, &request.Error{Field: "/goap", Msg: fmt.Sprintf("the agent's state with its domain takes %d bytes, over the store's limit of %d", tl.size, tl.limit)}
		}
		if err != nil {
			return nil, err
		}
		s.agentEvent(a, planbus.Event{Type: planbus.EventAgentStarted,
			Message: fmt.Sprintf("agent %s started in session %s with domain %s (%d goals)", a.ID(), a.SessionID(), d.Name, len(d.Goals))})
		return nil, s.publishWake(ctx, a, time.Time{})
	}
	return nil, fmt.Errorf("planner: the agent of session %s changed %d times while starting; try again", r.SessionID, agentTries)
}

// sameJSON tells whether two JSON documents are the same once compacted
// (a document kept in a stored state is kept compacted).
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// DecodeStop validates a request to planbus.agent.stop and decodes
// it; an error is a *request.Error naming the field.
func DecodeStop(doc []byte) (*planbus.AgentStopRequest, error) {
	if err := schemas.Validate(schemas.AgentStopRequest, doc); err != nil {
		return nil, request.SchemaError(err, `want {"sessionId": "...", "reason": "..."}`)
	}
	var q planbus.AgentStopRequest
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, &request.Error{Msg: err.Error()}
	}
	q.Reason = strings.TrimSpace(q.Reason)
	return &q, nil
}

// DecodeStatus validates a request to planbus.agent.status and
// decodes it; an error is a *request.Error naming the field.
func DecodeStatus(doc []byte) (*planbus.AgentStatusRequest, error) {
	if err := schemas.Validate(schemas.AgentStatusRequest, doc); err != nil {
		return nil, request.SchemaError(err, `want {"sessionId": "..."}`)
	}
	var q planbus.AgentStatusRequest
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, &request.Error{Msg: err.Error()}
	}
	return &q, nil
}

// HandleStop answers planbus.agent.stop: the session's agent, if it
// runs, is stopped, its turn in this process interrupted.
func (s *Service) HandleStop(req micro.Request) {
	q, err := DecodeStop(req.Data())
	if err != nil {
		s.host.Reject(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	if err := s.host.MaySession(ctx, bus.OwnerOfSubject(req.Subject()), q.SessionID); err != nil {
		s.host.Reject(req, err)
		return
	}
	// The agent's turn, if one runs here (a search of five seconds, or a
	// wait for a generation slot), is cancelled, and turns that would
	// begin wait for the stop.
	defer s.agents.interrupt(q.SessionID)()
	planID, stopped := "", false
	// The stop's turn is in the agent's trace, linked to the caller's.
	caller := trace.LinkFromContext(telemetry.Extract(context.Background(), nats.Header(req.Headers())))
	doc, err := s.agentTurn(ctx, triggerStop, q.SessionID, false, 0, func(a *agent, _, _ uint64) error {
		if a.doc.Step != nil {
			planID = a.doc.Step.PlanID
		}
		a.stop(text.Clip(q.Reason, execution.MaxCancelReason))
		stopped = true
		return nil
	}, caller)
	switch {
	case err != nil:
		s.log.Warn().Err(err).Str("session", q.SessionID).Msg("cannot stop an agent")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
	case doc == nil:
		request.RejectCode(req, planbus.CodeNotFound, "/sessionId", fmt.Sprintf("session %s has no agent", q.SessionID))
	case stopped:
		msg := fmt.Sprintf("the agent %s of session %s is stopped", doc.ID(), q.SessionID)
		if planID != "" {
			msg += "; its running plan " + planID + " is being cancelled"
		}
		_ = req.RespondJSON(planbus.AgentStopReply{SessionID: q.SessionID, AgentID: doc.ID(), Status: planbus.AgentStopStopped, PlanID: planID, Message: msg})
	default:
		_ = req.RespondJSON(planbus.AgentStopReply{SessionID: q.SessionID, AgentID: doc.ID(), Status: planbus.AgentStopEnded, Ended: doc.Status,
			Message: fmt.Sprintf("the agent %s of session %s had already ended (%s): nothing to stop", doc.ID(), q.SessionID, doc.Status)})
	}
}

// HandleStatus answers planbus.agent.status with the session's agent as
// it is in the session state now.
func (s *Service) HandleStatus(req micro.Request) {
	q, err := DecodeStatus(req.Data())
	if err != nil {
		s.host.Reject(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	st, err := s.agentStatus(ctx, q.SessionID)
	switch {
	case errors.Is(err, errNoAgent):
		request.RejectCode(req, planbus.CodeNotFound, "/sessionId", fmt.Sprintf("session %s has no agent", q.SessionID))
	case err != nil:
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
	default:
		_ = req.RespondJSON(st)
	}
}

// agentStatus reports the session's agent in the session state now.
func (s *Service) agentStatus(ctx context.Context, sessionID string) (*planbus.AgentStatus, error) {
	doc, _, err := s.loadAgent(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errNoAgent
	}
	world, _, err := s.world(ctx, sessionID, 0)
	if err != nil {
		return nil, err
	}
	d, err := s.agentDomain(doc.Domain)
	if err != nil {
		return nil, fmt.Errorf("planner: agent %s: domain: %w", doc.ID(), err)
	}
	a, err := newAgent(doc, d, world, time.Now(), nil)
	if err != nil {
		return nil, err
	}
	return a.status()
}

// StartRequest turns the body of planbus.agent.start, a plan request of
// kind goap (kind may be left out; goap.agent is implied), into the plan
// request that starts the agent, or what is wrong with it and where.
func StartRequest(data []byte) ([]byte, *request.Error) {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		return nil, &request.Error{Msg: fmt.Sprintf(`want a plan request of kind goap, e.g. {"sessionId": "s1", "goap": {"domain": "camp"}}: %v`, err)}
	}
	if k, ok := doc["kind"]; ok && k != request.KindGOAP {
		return nil, &request.Error{Field: "/kind", Msg: fmt.Sprintf("planbus.agent.start starts GOAP agents: kind must be goap or left out, not %v", k)}
	}
	doc["kind"] = request.KindGOAP
	if g, ok := doc["goap"].(map[string]any); ok {
		if v, set := g["agent"]; set && v != true {
			return nil, &request.Error{Field: "/goap/agent", Msg: "planbus.agent.start starts an agent: leave agent out or true"}
		}
		g["agent"] = true
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, &request.Error{Msg: err.Error()}
	}
	return out, nil
}

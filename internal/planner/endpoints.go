package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/agent"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/htn"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
)

// accept validates a request as the endpoint receives it and queues it.
func (s *Service) accept(ctx context.Context, doc []byte, owner string) (r *request.Request, again *sentBefore, err error) {
	if err := s.checkSize(nil, doc); err != nil {
		return nil, nil, err // before decoding: a request too large is refused cheaply
	}
	r, err = request.Decode(doc)
	if err != nil {
		return nil, nil, err
	}
	if r.RequestID == "" {
		r.RequestID = nuid.Next()
	}
	data, err := json.Marshal(r) // as queued: the switch below only checks r
	if err != nil {
		return nil, nil, err
	}
	// A request id names one request: the same request sent again (by a
	// client that lost the answer) is accepted and runs nothing new, even
	// if what the checks below read has changed since; another request
	// under the id is refused.
	if again, err := s.acceptedBefore(ctx, r, data); again != nil || err != nil {
		if again != nil {
			if err := s.mayRequest(ctx, owner, r.RequestID, "/requestId"); err != nil {
				return nil, nil, err
			}
		}
		return r, again, err
	}
	if err := s.cfg.checkBudget(r); err != nil {
		return nil, nil, err
	}
	// Ownership (owners.go): the session is the caller's or no one's, and
	// so becomes the request's id.
	if err := s.claimSession(ctx, owner, r.SessionID); err != nil {
		return nil, nil, err
	}
	if owner != "" {
		if err := s.claim(ctx, owner, requestOwnerKey(r.RequestID), "request "+r.RequestID, "/requestId"); err != nil {
			return nil, nil, err
		}
	}
	switch r.Kind {
	case request.KindExternal:
		for _, reserved := range []string{"planbus.", "$", "_INBOX"} {
			if strings.HasPrefix(r.Planner, reserved) {
				// planbus's own subjects and the server's are not planners:
				// a request must not make the planner publish there.
				return nil, nil, &request.Error{Field: "/planner",
					Msg: fmt.Sprintf("external planner %q: subjects under %s are reserved; name a planner's own subject (e.g. planners.mine)", r.Planner, reserved)}
			}
		}
		if p := s.cfg.ExternalPrefix; p != "" && !strings.HasPrefix(r.Planner, p) {
			return nil, nil, &request.Error{Field: "/planner",
				Msg: fmt.Sprintf("external planner %q: with authorization on, external planners answer on subjects under %s", r.Planner, p)}
		}
	case request.KindGOAP:
		if r.GOAP.Agent {
			dup, err := s.agents.Start(ctx, r) // no replan loop: the agent is its own (internal/agent)
			if dup != nil {
				again = &sentBefore{what: dup.What, when: dup.When}
			}
			return r, again, err
		}
		if _, err := s.goap.Domain(r.GOAP); err != nil {
			return nil, nil, err
		}
	case request.KindTemplate:
		if err := (generator.Template{Library: s.cfg.Templates}).Check(r); err != nil {
			return nil, nil, err
		}
	case request.KindPlan:
		p, err := plan.Decode(r.Plan)
		if err != nil {
			return nil, nil, &request.Error{Field: "/plan", Msg: err.Error()}
		}
		if len(p.Tools) == 0 {
			// Planners may find that nothing needs doing; a person who
			// sends a plan of nothing has most likely sent the wrong file.
			return nil, nil, &request.Error{Field: "/plan/tools", Msg: "the plan has no tools: there is nothing to run"}
		}
		known, err := s.skillManifests(ctx)
		if err != nil {
			return nil, nil, err
		}
		for i, t := range p.Tools {
			at := fmt.Sprintf("/plan/tools/%d", i)
			if err := s.checkToolInput(ctx, known, at, t.Skill, t.Input); err != nil {
				return nil, nil, err
			}
			if f := t.Fallback; f != nil {
				if err := s.checkToolInput(ctx, known, at+"/fallback", f.Skill, f.Input); err != nil {
					return nil, nil, err
				}
			}
		}
	case request.KindHTN:
		if err := htn.CheckGoal(r.HTN.Goal); err != nil {
			return nil, nil, &request.Error{Field: "/htn/goal", Msg: fmt.Sprintf("goal %q: %v", r.HTN.Goal, err)}
		}
		if _, err := (generator.HTN{Domains: s.cfg.DomainsDir}).Program(r.HTN, nil); err != nil {
			var re *request.Error
			if errors.As(err, &re) {
				return nil, nil, re
			}
			return nil, nil, &request.Error{Field: "/htn", Msg: err.Error()}
		}
	}
	if err := s.checkSize(r, data); err != nil {
		return nil, nil, err
	}
	// The request carries the endpoint's trace context to whichever planner
	// takes it from the stream.
	msg := &nats.Msg{Subject: bus.RequestSubject(r.RequestID), Data: data, Header: telemetry.Inject(ctx, nil)}
	if owner != "" {
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header.Set(ownerHeader, owner)
	}
	ack, err := s.conn.JS.PublishMsg(ctx, msg, jetstream.WithMsgID(r.RequestID))
	if err != nil {
		return nil, nil, fmt.Errorf("planner: queue request: %w", err)
	}
	if ack.Duplicate {
		// Sent under the same id a moment ago, after the look above.
		if again, err := s.acceptedBefore(ctx, r, data); again != nil || err != nil {
			return r, again, err
		}
		return r, &sentBefore{what: "request " + r.RequestID, when: "a moment ago"}, nil
	}
	return r, nil, nil
}

// checkToolInput refuses, at the tool's pointer at, a skill no worker has
// advertised and a literal input the skill's input schema refuses: the
// plan would fail there only after the tools before it had run. An input
// with references to other tools' outputs is known only when the call is
// released, and the worker checks it then. known caches the manifests.
func (s *Service) checkToolInput(ctx context.Context, known map[string]planbus.SkillManifest, at, skill string, input json.RawMessage) error {
	m, ok := known[skill]
	if !ok {
		// A listing can miss a key a worker is writing again as it runs
		// (a starting worker advertises every skill it serves): ask for
		// the skill itself before calling it unknown.
		found, err := s.skillManifest(ctx, skill)
		if err != nil {
			return err
		}
		if found == nil {
			return &request.Error{Field: at + "/skill", Msg: fmt.Sprintf("unknown skill %q: no worker has advertised it", skill)}
		}
		m, known[skill] = *found, *found
	}
	if len(m.InputSchema) == 0 || plan.InputHasRefs(input) {
		return nil
	}
	v, err := s.inputSchemas.get(m)
	if err != nil {
		return nil // a schema the planner cannot compile is the worker's to report
	}
	if err := v.Validate(input); err != nil {
		return &request.Error{Field: at + "/input", Msg: fmt.Sprintf("skill %s would refuse this input: %v", skill, err)}
	}
	return nil
}

// sentBefore describes what was accepted before under a request's id, for
// the answer to the same request sent again.
type sentBefore struct {
	what, when string
}

// acceptedBefore looks the id of r up in the accepted requests: nil if it
// is new; what it names if that is r itself (data is r as queued); a
// *request.Error if it names another request.
func (s *Service) acceptedBefore(ctx context.Context, r *request.Request, data []byte) (*sentBefore, error) {
	m, err := s.acceptedMsg(ctx, r.RequestID)
	if err != nil {
		return nil, fmt.Errorf("planner: look the request id up: %w", err)
	}
	if m == nil {
		return nil, nil
	}
	when := "at " + m.Time.UTC().Format(time.RFC3339)
	if !bytes.Equal(m.Data, data) {
		return nil, &request.Error{Field: "/requestId", Msg: fmt.Sprintf(
			"request %s was accepted %s with another body; a request id names one request: send this one under a new requestId, or leave requestId out",
			r.RequestID, when)}
	}
	return &sentBefore{what: "request " + r.RequestID, when: when}, nil
}

func (s *Service) addService() (micro.Service, error) {
	svc, err := micro.AddService(s.conn.NC, micro.Config{
		Name: bus.ServicePlanner, Version: s.cfg.Version,
		Description:  "planbus planner: plan requests in, plans out, replans on failure",
		Metadata:     map[string]string{"planner": s.cfg.ID},
		StatsHandler: func(*micro.Endpoint) any { return s.Stats() },
	})
	if err != nil {
		return nil, fmt.Errorf("planner: micro service: %w", err)
	}
	// Each endpoint twice: on its own subject, for the shared client role,
	// and on every named client's (bus.ClientSubject), where the subject
	// says who asks.
	add := func(name, subject string, h micro.HandlerFunc) error {
		h = s.recovering(name, h)
		if err := svc.AddEndpoint(name, h, micro.WithEndpointSubject(subject)); err != nil {
			return err
		}
		return svc.AddEndpoint(name+"-client", h, micro.WithEndpointSubject(bus.OwnedEndpoint(subject)))
	}
	if err := add("request", bus.SubjectPlanRequest, s.handleRequest); err != nil {
		return nil, err
	}
	if err := add("reset", bus.SubjectSessionReset, s.handleReset); err != nil {
		return nil, err
	}
	if err := add("skills", bus.SubjectSkills, s.handleSkills); err != nil {
		return nil, err
	}
	if err := add("cancel", bus.SubjectPlanCancel, s.handleCancel); err != nil {
		return nil, err
	}
	if err := add("list", bus.SubjectPlanList, s.handleList); err != nil {
		return nil, err
	}
	for _, e := range []struct {
		name, subject string
		h             micro.HandlerFunc
	}{
		{"agent-start", bus.SubjectAgentStart, s.handleAgentStart},
		{"agent-stop", bus.SubjectAgentStop, s.agents.HandleStop},
		{"agent-status", bus.SubjectAgentStatus, s.agents.HandleStatus},
		{"guide", bus.SubjectGuideTurn, s.guide.HandleTurn},
		{"approve", bus.SubjectPlanApprove, s.handleApprove},
		{"schedule-add", bus.SubjectScheduleAdd, s.handleScheduleAdd},
		{"schedule-list", bus.SubjectScheduleList, s.handleScheduleList},
		{"schedule-rm", bus.SubjectScheduleRemove, s.handleScheduleRemove},
		{"schedule-pause", bus.SubjectSchedulePause, s.handleSchedulePause},
		{"schedule-resume", bus.SubjectScheduleResume, s.handleScheduleResume},
	} {
		if err := add(e.name, e.subject, e.h); err != nil {
			return nil, err
		}
	}
	return svc, nil
}

// recovering answers a request whose handler panicked with UNAVAILABLE
// and logs the bug, instead of taking the planner down.
func (s *Service) recovering(name string, h micro.HandlerFunc) micro.HandlerFunc {
	return func(req micro.Request) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Str("endpoint", name).Msg("planner bug")
				request.RejectCode(req, planbus.CodeUnavailable, "", fmt.Sprintf("the planner failed on this request (a bug, logged): %v", r))
			}
		}()
		h(req)
	}
}

func (s *Service) handleRequest(req micro.Request) { s.respondAccept(req, req.Data()) }

// respondAccept accepts the request doc and answers req.
func (s *Service) respondAccept(req micro.Request, doc []byte) {
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	ctx, span := s.tracer.Start(telemetry.Extract(ctx, nats.Header(req.Headers())), telemetry.SpanAccept,
		trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	r, again, err := s.accept(ctx, doc, caller(req.Subject()))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		var fe *forbiddenError
		if errors.As(err, &fe) {
			rejectErr(req, err)
			return
		}
		rej := planbus.Rejected{Status: "rejected", Error: planbus.ReplyError{Code: planbus.CodeInvalidRequest, Message: err.Error()}}
		var re *request.Error
		if errors.As(err, &re) {
			rej.Error.Field, rej.Error.Message = re.Field, re.Error()
		} else {
			rej.Error.Code = planbus.CodeUnavailable
		}
		data, _ := json.Marshal(rej)
		status := "400"
		if rej.Error.Code == planbus.CodeUnavailable {
			status = "503"
		}
		_ = req.Error(status, rej.Error.Message, data)
		return
	}
	span.SetAttributes(telemetry.AttrRequestID.String(r.RequestID), telemetry.AttrKind.String(r.Kind))
	if again != nil {
		s.event(&loop{Request: r}, planbus.Event{Type: planbus.EventRequestDuplicate, Message: fmt.Sprintf(
			"%s was accepted %s: this one, the same sent again, runs nothing new; the outcome is that request's (send a new requestId to run it again)",
			again.what, again.when)})
		_ = req.RespondJSON(planbus.Accepted{RequestID: r.RequestID, SessionID: r.SessionID, Status: "accepted", Duplicate: true})
		return
	}
	s.event(&loop{Request: r}, planbus.Event{Type: planbus.EventRequestAccepted, Message: "kind " + r.Kind})
	_ = req.RespondJSON(planbus.Accepted{RequestID: r.RequestID, SessionID: r.SessionID, Status: "accepted"})
}

// handleReset restarts a session, the only way out of permanentFailure
// besides a new session id: every skill back to healthy; with "state": true the session's state is
// cleared too.
func (s *Service) handleReset(req micro.Request) {
	var q struct {
		SessionID string `json:"sessionId"`
		State     bool   `json:"state"`
	}
	if err := json.Unmarshal(req.Data(), &q); err != nil {
		request.Reject(req, "/", `want {"sessionId": "...", "state": false}: `+err.Error())
		return
	}
	if !plan.ValidID(q.SessionID) {
		request.Reject(req, "/sessionId", fmt.Sprintf("%q is not a session id: 1 to 128 letters, digits, '_' or '-'", q.SessionID))
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	if err := s.maySession(ctx, caller(req.Subject()), q.SessionID); err != nil {
		rejectErr(req, err)
		return
	}
	healed, err := s.health.Reset(ctx, q.SessionID)
	if err == nil && q.State {
		err = s.states.Delete(ctx, q.SessionID)
	}
	if err != nil {
		request.RejectCode(req, planbus.CodeUnavailable, "", "could not reset the session: "+err.Error())
		return
	}
	if healed == nil {
		healed = []string{}
	}
	_ = req.RespondJSON(planbus.SessionReset{SessionID: q.SessionID, Healed: healed, StateCleared: q.State})
}

// handleSkills lists advertised skills with their health in a session.
func (s *Service) handleSkills(req micro.Request) {
	var q struct {
		SessionID string `json:"sessionId"`
	}
	if body := bytes.TrimSpace(req.Data()); len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err := dec.Decode(&q)
		if err == nil && dec.More() {
			err = errors.New("data after the object")
		}
		if err != nil {
			request.Reject(req, "/", fmt.Sprintf(`want {"sessionId": "..."} or nothing (the default session): %v`, err))
			return
		}
	}
	if q.SessionID == "" {
		q.SessionID = planbus.DefaultSession
	}
	if !plan.ValidID(q.SessionID) {
		request.Reject(req, "/sessionId", fmt.Sprintf("%q is not a session id: 1 to 128 letters, digits, '_' or '-'", q.SessionID))
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	ms, err := s.skillManifests(ctx)
	if err != nil {
		request.RejectCode(req, planbus.CodeUnavailable, "", "could not read the skills: "+err.Error())
		return
	}
	out := planbus.SkillsReply{SessionID: q.SessionID, Skills: []planbus.SkillStatus{}}
	for _, name := range generator.SortedKeys(ms) {
		h := s.health.Get(q.SessionID, name)
		out.Skills = append(out.Skills, planbus.SkillStatus{Manifest: ms[name],
			Health: planbus.SkillHealth{Skill: h.Skill, State: h.State, Failures: h.Failures, LastError: h.LastError}})
	}
	_ = req.RespondJSON(out)
}

// handleAgentStart takes a plan request of kind goap (kind may be left
// out; goap.agent is implied) and starts the session's agent.
func (s *Service) handleAgentStart(req micro.Request) {
	doc, re := agent.StartRequest(req.Data())
	if re != nil {
		request.Reject(req, re.Field, re.Msg)
		return
	}
	s.respondAccept(req, doc)
}

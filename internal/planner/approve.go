package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

// Approvals (planbus.plan.approve). A tool with an approval step waits in
// its plan's state (waiting_approval) once it is ready. The endpoint finds
// the plan (a request id stands for the plan its loop runs; an id with no
// request is taken as a plan's), checks in the plan's stored state that
// the tool exists and waits, and hands the plan's dispatchers the
// decision as a durable command on planbus.timers.<planId>
// (execution.TimerApprove or TimerReject), the way a cancel travels. Both
// kinds share one message id per tool, so the first decision wins and a
// second one is answered NOT_WAITING. The command is stored before the
// reply: it waits in the TIMERS stream while no dispatcher runs and
// survives restarts of either side.

// refusal is an endpoint request refused with a reply code other than
// INVALID_REQUEST.
type refusal struct {
	code       planbus.Code
	field, msg string
}

func (r *refusal) Error() string { return r.msg }

func (s *Service) handleApprove(req micro.Request) {
	q, err := request.DecodeApprove(req.Data())
	if err != nil {
		rejectErr(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.stopping, endpointTimeout)
	defer cancel()
	if err := s.mayTarget(ctx, caller(req.Subject()), q.RequestID, q.PlanID); err != nil {
		rejectErr(req, err)
		return
	}
	reply, err := s.approve(ctx, q, time.Now())
	var rf *refusal
	switch {
	case errors.As(err, &rf):
		request.RejectCode(req, rf.code, rf.field, rf.msg)
	case err != nil:
		s.log.Warn().Err(err).Msg("cannot approve")
		request.RejectCode(req, planbus.CodeUnavailable, "", err.Error())
	default:
		_ = req.RespondJSON(reply)
	}
}

// approve carries out q: it checks that the tool waits for approval and
// publishes the decision for the plan's dispatchers.
func (s *Service) approve(ctx context.Context, q *planbus.ApproveRequest, now time.Time) (*planbus.ApproveReply, error) {
	id, field, planID, requestID := q.PlanID, "/planId", q.PlanID, ""
	if q.RequestID != "" {
		id, field, planID, requestID = q.RequestID, "/requestId", q.RequestID, q.RequestID
		l, _, err := s.load(ctx, q.RequestID)
		if err != nil {
			return nil, err
		}
		switch {
		case l != nil && l.Status == loopExecuting && l.PlanID != "":
			planID = l.PlanID
		case l != nil:
			return nil, &refusal{planbus.CodeNotWaiting, field, fmt.Sprintf("request %s has no plan running (%s): no tool of it waits for approval",
				id, loopStatus(l))}
		default:
			// No loop: perhaps a plan's id, or a request not yet taken up.
			r, err := s.queued(ctx, q.RequestID)
			if err != nil {
				return nil, err
			}
			if r != nil {
				return nil, &refusal{planbus.CodeNotWaiting, field, fmt.Sprintf("request %s is queued: no plan of it runs yet", id)}
			}
			requestID = ""
		}
	}
	tools, st, err := s.storedPlan(ctx, planID)
	if err != nil {
		return nil, err
	}
	switch {
	case tools == nil && planID != id:
		return nil, &refusal{planbus.CodeNotWaiting, field, fmt.Sprintf("request %s: plan %s has not started yet: no tool of it waits for approval", id, planID)}
	case tools == nil:
		return nil, &refusal{planbus.CodeNotFound, field, fmt.Sprintf("no request or plan %q (they are kept for a day)", id)}
	}
	if requestID == "" {
		requestID = st.RequestID
	}
	i := -1
	for k, t := range tools {
		if t.ToolID == q.ToolID {
			i = k
		}
	}
	if i < 0 || i >= len(st.Tools) {
		return nil, &refusal{planbus.CodeNotFound, "/toolId", fmt.Sprintf("plan %s has no tool %q", planID, q.ToolID)}
	}
	state := st.Tools[i].State
	var why string
	switch {
	case st.Status != planbus.PlanRunning:
		why = fmt.Sprintf("plan %s has ended (%s)", planID, st.Status)
	case tools[i].Approval == nil:
		why = fmt.Sprintf("tool %q of plan %s has no approval step", q.ToolID, planID)
	case state == planbus.ToolPending && st.Tools[i].Approved:
		why = fmt.Sprintf("tool %q of plan %s was approved already", q.ToolID, planID)
	case state == planbus.ToolPending:
		why = fmt.Sprintf("tool %q of plan %s is not ready yet: it waits for its dependencies", q.ToolID, planID)
	case state != planbus.ToolWaitingApproval:
		why = fmt.Sprintf("tool %q of plan %s is %s: it is not waiting for approval", q.ToolID, planID, state)
	}
	if why != "" {
		return nil, &refusal{planbus.CodeNotWaiting, "/toolId", why}
	}
	m := execution.ApprovalMessage(planID, i, q.Approve, clipReason(q.Reason), now)
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ack, err := s.conn.JS.Publish(ctx, bus.TimerSubject(planID), data, jetstream.WithMsgID(m.MsgID()))
	if err != nil {
		return nil, fmt.Errorf("planner: decision on tool %q of plan %s: %w", q.ToolID, planID, err)
	}
	if ack.Duplicate {
		return nil, &refusal{planbus.CodeNotWaiting, "/toolId", fmt.Sprintf("a decision on tool %q of plan %s was sent already", q.ToolID, planID)}
	}
	reply := &planbus.ApproveReply{RequestID: requestID, PlanID: planID, ToolID: q.ToolID, Status: planbus.ApproveApproved,
		Message: fmt.Sprintf("tool %q of plan %s approved: it runs next", q.ToolID, planID)}
	if !q.Approve {
		reply.Status = planbus.ApproveRejected
		reply.Message = fmt.Sprintf("tool %q of plan %s rejected: it fails with code %s", q.ToolID, planID, planbus.CodeRejected)
	}
	s.log.Info().Str("request_id", requestID).Str("plan_id", planID).Str("tool_id", q.ToolID).Str("decision", reply.Status).Msg("approval step decided")
	return reply, nil
}

// loopStatus says where a loop without a running plan is.
func loopStatus(l *loop) string {
	if l.Status == loopDone && l.Outcome != nil {
		return "ended " + string(l.Outcome.Status)
	}
	return string(l.Status)
}

// storedTool is what approve reads of a stored plan's tools.
type storedTool struct {
	ToolID   string         `json:"toolId"`
	Approval *plan.Approval `json:"approval"`
}

// storedPlan reads plan id's tools and state as the dispatchers stored
// them; both are nil if the plan has not started (or expired).
func (s *Service) storedPlan(ctx context.Context, id string) ([]storedTool, *execution.State, error) {
	stored, _, err := execution.ReadStored(ctx, bus.StateKey(id), bus.KVRead(s.plans))
	if err != nil {
		return nil, nil, fmt.Errorf("planner: state of plan %s: %w", id, err)
	}
	if stored == nil {
		return nil, nil, nil
	}
	tools, err := s.planTools(ctx, id)
	if tools == nil || err != nil {
		return nil, nil, err
	}
	st := &execution.State{PlanID: stored.PlanID, RequestID: stored.RequestID, Status: stored.Status, Tools: make([]execution.ToolState, len(stored.Tools))}
	for i, t := range stored.Tools {
		st.Tools[i] = execution.ToolState{State: t.State, Approved: t.Approved}
	}
	return tools, st, nil
}

// planTools reads the tools of stored plan id; nil if it has none.
func (s *Service) planTools(ctx context.Context, id string) ([]storedTool, error) {
	pe, err := s.plans.Get(ctx, bus.PlanKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p struct {
		Tools []storedTool `json:"tools"`
	}
	if err := json.Unmarshal(pe.Value(), &p); err != nil {
		return nil, fmt.Errorf("planner: stored plan %s: %w", id, err)
	}
	return p.Tools, nil
}

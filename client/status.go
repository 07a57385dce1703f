package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
)

// Status is what the system holds about a request or a plan now.
type Status struct {
	// Request is the request's loop; nil for a plan published on its own.
	Request *RequestStatus `json:"request,omitempty"`
	// Plan is the request's latest plan, or the plan asked about; nil
	// while none has started.
	Plan *PlanStatus `json:"plan,omitempty"`
}

// RequestStatus is a request's replan loop.
type RequestStatus struct {
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
	Kind      string `json:"kind"`
	// Status is planbus.RequestQueued, RequestGenerating,
	// RequestExecuting or RequestCancelling while the request runs, then
	// its outcome's status.
	Status planbus.RequestStatus `json:"status"`
	// Attempt is the plan generation the loop is at.
	Attempt int `json:"attempt"`
	// PlanID is the plan of the latest attempt, if one was generated.
	PlanID         string            `json:"planId"`
	DisabledSkills []string          `json:"disabledSkills,omitempty"`
	History        []planbus.Attempt `json:"history,omitempty"`
	// Outcome is set once the request has ended.
	Outcome *planbus.Outcome `json:"outcome,omitempty"`
	// BarePlan: the request carries a plan submitted on its own
	// (SubmitPlan, `planner submit` of a Plan JSON).
	BarePlan  bool      `json:"barePlan,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Ended reports whether the request has ended.
func (r *RequestStatus) Ended() bool { return r.Outcome != nil }

// PlanStatus is a plan's execution state.
type PlanStatus struct {
	PlanID    string `json:"planId"`
	RequestID string `json:"requestId"`
	// State is planbus.PlanRunning or how the plan ended.
	State      planbus.PlanState  `json:"state"`
	StartedAt  time.Time          `json:"startedAt"`
	FinishedAt time.Time          `json:"finishedAt"` // zero while it runs
	Error      *planbus.ErrorInfo `json:"error,omitempty"`
	Tools      []ToolStatus       `json:"tools,omitempty"`
}

// ToolStatus is one tool of a plan, in plan order.
type ToolStatus struct {
	ToolID string `json:"toolId"`
	// Skill is the skill of the tool's latest attempt (its fallback's,
	// once the fallback runs).
	Skill   string            `json:"skill"`
	State   planbus.ToolState `json:"state"` // planbus.ToolPending, ToolRunning, ...
	Attempt int               `json:"attempt"`
	// At is when the running attempt was released, when a retry is due,
	// or when the tool ended.
	At     time.Time          `json:"at"`
	Reason planbus.Reason     `json:"reason,omitempty"`
	Error  *planbus.ErrorInfo `json:"error,omitempty"`
	// Prompt is the tool's approval step's prompt, if it has one; while
	// State is planbus.ToolWaitingApproval the tool waits for Approve or
	// Reject.
	Prompt string `json:"prompt,omitempty"`
	// Reused: the tool took an earlier attempt's result instead of
	// running.
	Reused bool `json:"reused,omitempty"`
}

// storedLoop is what the client reads of a request's loop state (KV
// planbus-requests, kept by the planner).
type storedLoop struct {
	Request struct {
		RequestID string          `json:"requestId"`
		SessionID string          `json:"sessionId"`
		Kind      string          `json:"kind"`
		Metadata  json.RawMessage `json:"metadata"`
	} `json:"request"`
	Status   planbus.RequestStatus `json:"status"`
	Attempt  int                   `json:"attempt"`
	PlanID   string                `json:"planId"`
	Disabled []string              `json:"disabledSkills"`
	History  []planbus.Attempt     `json:"history"`
	Outcome  *planbus.Outcome      `json:"outcome"`
	Updated  time.Time             `json:"updatedAt"`
	Cancel   *struct{}             `json:"cancel"`
}

// Status reads what the system holds about id, a request id or a plan id:
// a request's loop and its latest plan, a request accepted but not yet
// taken up (status queued), or a plan published on its own. It reads
// buckets and streams by key, as the client role may. An id nothing is
// known of is ErrNotFound.
func (c *Client) Status(ctx context.Context, id string) (*Status, error) {
	if !plan.ValidID(id) {
		return nil, fmt.Errorf("client: %q is not a request or plan id: 1 to 128 letters, digits, '_' or '-'", id)
	}
	var out Status
	req, err := c.requestStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	planID := id
	if req != nil {
		out.Request = req
		planID = req.PlanID
	}
	if planID != "" {
		if out.Plan, err = c.planStatus(ctx, planID); err != nil {
			return nil, err
		}
	}
	if out.Request == nil && out.Plan == nil {
		return nil, fmt.Errorf("%w: no request or plan %q (they are kept for a day)", ErrNotFound, id)
	}
	return &out, nil
}

// requestStatus reads a request's loop, or finds it queued; nil if
// neither.
func (c *Client) requestStatus(ctx context.Context, id string) (*RequestStatus, error) {
	doc, err := c.get(ctx, bus.BucketRequests, id)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return c.queued(ctx, id)
	}
	var l storedLoop
	if err := json.Unmarshal(doc, &l); err != nil {
		return nil, fmt.Errorf("client: loop state of request %s: %w", id, err)
	}
	r := &RequestStatus{RequestID: id, SessionID: l.Request.SessionID, Kind: l.Request.Kind, Status: l.Status,
		Attempt: l.Attempt, PlanID: l.PlanID, DisabledSkills: l.Disabled, History: l.History, Outcome: l.Outcome,
		BarePlan: barePlan(l.Request.Metadata), UpdatedAt: l.Updated}
	switch {
	case l.Outcome != nil:
		r.Status = l.Outcome.Status
		if r.PlanID == "" {
			r.PlanID = l.Outcome.PlanID
		}
	case l.Status == planbus.RequestExecuting && l.Cancel != nil:
		r.Status = planbus.RequestCancelling
	}
	return r, nil
}

// queued finds a request in the REQUESTS stream that has no loop state
// yet.
func (c *Client) queued(ctx context.Context, id string) (*RequestStatus, error) {
	m, err := c.acceptedRequest(ctx, id)
	if m == nil || err != nil {
		return nil, err
	}
	var r struct {
		SessionID string          `json:"sessionId"`
		Kind      string          `json:"kind"`
		Metadata  json.RawMessage `json:"metadata"`
	}
	_ = json.Unmarshal(m.Data, &r)
	return &RequestStatus{RequestID: id, SessionID: r.SessionID, Kind: r.Kind, Status: planbus.RequestQueued,
		BarePlan: barePlan(r.Metadata), UpdatedAt: m.Time.UTC()}, nil
}

func barePlan(meta json.RawMessage) bool {
	var m map[string]any
	_ = json.Unmarshal(meta, &m)
	b, _ := m[BarePlanKey].(bool)
	return b
}

// planStatus reads a plan's state and definition; nil if it has none.
func (c *Client) planStatus(ctx context.Context, planID string) (*PlanStatus, error) {
	kv, err := c.bucket(ctx, bus.BucketPlans)
	if err != nil {
		return nil, err
	}
	st, _, err := execution.ReadStored(ctx, bus.StateKey(planID), bus.KVRead(kv))
	if err != nil {
		return nil, fmt.Errorf("client: state of plan %s: %w", planID, err)
	}
	if st == nil {
		return nil, nil
	}
	pdoc, err := c.get(ctx, bus.BucketPlans, bus.PlanKey(planID))
	if err != nil {
		return nil, err
	}
	p, err := plan.Decode(pdoc)
	if err != nil || len(p.Tools) != len(st.Tools) {
		return nil, fmt.Errorf("client: plan %s: its stored definition does not match its state (%v)", planID, err)
	}
	ps := &PlanStatus{PlanID: planID, RequestID: st.RequestID, State: st.Status, Error: st.Error,
		StartedAt: time.UnixMilli(st.StartedAt).UTC(), Tools: make([]ToolStatus, len(st.Tools))}
	if st.FinishedAt > 0 {
		ps.FinishedAt = time.UnixMilli(st.FinishedAt).UTC()
	}
	for i, t := range st.Tools {
		ts := ToolStatus{ToolID: p.Tools[i].ToolID, Skill: p.Tools[i].Variant(max(t.Attempt, 1)).Skill, State: t.State,
			Attempt: t.Attempt, Reason: t.Reason, Error: t.Error, Reused: t.Reused}
		if a := p.Tools[i].Approval; a != nil {
			ts.Prompt = a.Prompt
		}
		if t.At > 0 {
			ts.At = time.UnixMilli(t.At).UTC()
		}
		ps.Tools[i] = ts
	}
	return ps, nil
}

// Cancel cancels a request, or a plan published on its own; id is a
// request id or a plan id (a plan's id stands for its request). A request
// whose plan runs is being cancelled when Cancel returns (status
// cancelling: the plan's running calls are stopped, its pending tools
// skipped, and the outcome, status cancelled, follows); one that had no
// plan running yet is cancelled (status cancelled); one that had ended is
// left as it was (status ended). An id nothing is known of is ErrNotFound.
// reason, which may be empty, is said in the outcome and the events; the
// planner refuses one of more than 1,024 characters.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*planbus.CancelReply, error) {
	try := func(q planbus.CancelRequest) (*planbus.CancelReply, error) {
		body, err := json.Marshal(q)
		if err != nil {
			return nil, err
		}
		var reply planbus.CancelReply
		if err := c.call(ctx, bus.SubjectPlanCancel, body, &reply); err != nil {
			return nil, err
		}
		return &reply, nil
	}
	reply, err := try(planbus.CancelRequest{RequestID: id, Reason: reason})
	if errors.Is(err, ErrNotFound) {
		reply, err = try(planbus.CancelRequest{PlanID: id, Reason: reason})
	}
	return reply, err
}

// Approve approves tool toolID, waiting for approval in the running plan
// of request id (or in plan id): a dispatcher releases it. Reject rejects
// it instead: it fails with code REJECTED without running, and its
// failure semantics apply (a required tool fails the plan, which is not
// replanned). reason, which may be empty, is said in the events (and a
// rejection's in the tool's error); the planner refuses one of more than
// 1,024 characters. A tool that is not waiting (no approval step, not
// ready yet, decided on already, plan ended) is a *RejectedError with code
// planbus.CodeNotWaiting; an unknown id or tool is ErrNotFound.
func (c *Client) Approve(ctx context.Context, id, toolID, reason string) (*planbus.ApproveReply, error) {
	return c.decide(ctx, planbus.ApproveRequest{RequestID: id, ToolID: toolID, Approve: true, Reason: reason})
}

// Reject rejects tool toolID of request or plan id; see Approve.
func (c *Client) Reject(ctx context.Context, id, toolID, reason string) (*planbus.ApproveReply, error) {
	return c.decide(ctx, planbus.ApproveRequest{RequestID: id, ToolID: toolID, Reason: reason})
}

// decide sends q to planbus.plan.approve. The planner takes a request id
// with no request as a plan's id, so one call serves both.
func (c *Client) decide(ctx context.Context, q planbus.ApproveRequest) (*planbus.ApproveReply, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	var reply planbus.ApproveReply
	if err := c.call(ctx, bus.SubjectPlanApprove, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

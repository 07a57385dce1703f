package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/telemetry"
)

// BarePlanKey is the member of a request's metadata that SubmitPlan sets
// to true: the request carries a bare plan, and those who show it (like
// `planner watch`) show the plan's execution result as for a plan run on
// its own.
const BarePlanKey = "barePlan"

// SubmitRequest sends a plan request (schemas/plan-request.schema.json) to
// the planner and returns once the planner has accepted it, with its
// requestId, without waiting for the outcome. A request without a
// requestId is sent with a new one (the document given is not changed). A
// request the planner refuses is a *RejectedError naming the problem, as
// is another request under a requestId already used; the same request
// sent again is accepted with Accepted.Duplicate set, and runs nothing
// new.
func (c *Client) SubmitRequest(ctx context.Context, request []byte) (*planbus.Accepted, error) {
	doc, _ := withRequestID(request)
	var acc planbus.Accepted
	if err := c.call(ctx, bus.SubjectPlanRequest, doc, &acc); err != nil {
		return nil, err
	}
	return &acc, nil
}

// SubmitPlanJSON sends a bare Plan JSON (schemas/plan.schema.json), a plan
// file say, to the planner as a request of kind plan and returns once it is
// accepted; SubmitPlan does the same for a planbus.Plan built in Go. The
// request id is the plan's requestId, else its planId, else a new one;
// the session is the plan's. The planner runs the plan as
// <requestId>-1. A plan the planner refuses is a *RejectedError naming the
// problem (its fields under /plan).
func (c *Client) SubmitPlanJSON(ctx context.Context, plan []byte) (*planbus.Accepted, error) {
	req, err := planRequest(plan)
	if err != nil {
		return nil, err
	}
	return c.SubmitRequest(ctx, req)
}

// withRequestID returns request with a requestId, and that id. A document
// that is not a JSON object is returned as it is (the planner refuses it
// and says why), with an empty id; so is one whose requestId is not a
// string.
func withRequestID(request []byte) ([]byte, string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(request, &fields) != nil || fields == nil {
		return request, ""
	}
	if raw, ok := fields["requestId"]; ok {
		var id string
		_ = json.Unmarshal(raw, &id)
		return request, id
	}
	id := NewID()
	fields["requestId"], _ = json.Marshal(id)
	doc, err := json.Marshal(fields)
	if err != nil {
		return request, ""
	}
	return doc, id
}

// planRequest wraps a bare plan into a request of kind plan.
func planRequest(plan []byte) ([]byte, error) {
	var ids struct {
		PlanID    string `json:"planId"`
		RequestID string `json:"requestId"`
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(plan, &ids); err != nil {
		return nil, fmt.Errorf("client: the plan is not a JSON object: %w", err)
	}
	id := ids.RequestID
	if id == "" {
		id = ids.PlanID
	}
	if id == "" {
		id = NewID()
	}
	req := map[string]any{"kind": "plan", "requestId": id, "plan": json.RawMessage(plan),
		"metadata": map[string]any{BarePlanKey: true}}
	if ids.SessionID != "" {
		req["sessionId"] = ids.SessionID
	}
	doc, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("client: the plan is not valid JSON: %w", err)
	}
	return doc, nil
}

// Run submits a plan request and waits for its outcome, passing every
// event of the request to onEvent (which may be nil) as it happens. A
// request that fails or falls back is not an error: its outcome says so.
// A request the planner refuses is a *RejectedError. The same request sent
// again under its requestId gets the first one's outcome (and a
// request.duplicate event).
func (c *Client) Run(ctx context.Context, request []byte, onEvent func(planbus.Event)) (*planbus.Outcome, error) {
	doc, id := withRequestID(request)
	if id == "" {
		// Not a request the planner will take: let it say why.
		if _, err := c.SubmitRequest(ctx, doc); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("client: the planner accepted a request without a requestId")
	}
	// Follow first, so that nothing the request does is missed.
	w, err := c.follow(ctx, id, bus.StreamOutcomes, bus.OutcomeSubject(id), onEvent != nil)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	var acc planbus.Accepted
	if err := c.call(ctx, bus.SubjectPlanRequest, doc, &acc); err != nil {
		return nil, err
	}
	return w.outcome(ctx, false, onEvent)
}

// RunPlan submits a bare plan as SubmitPlan does and waits for the
// request's outcome; its Execution is the plan's execution result (nil
// if no plan ran: a skill disabled in the session, say; the outcome says
// why).
func (c *Client) RunPlan(ctx context.Context, plan []byte, onEvent func(planbus.Event)) (*planbus.Outcome, error) {
	req, err := planRequest(plan)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx, req, onEvent)
}

// ExecutePlan publishes a plan straight to the dispatchers, on
// planbus.plans.<planId>, bypassing the planner, and waits for its
// execution result, passing the events of its request to onEvent (which
// may be nil). A plan without a planId gets a new one; its requestId
// defaults to its planId. This needs the right to publish plans, which
// the client role does not have: with authorization on, use RunPlan. A
// plan the dispatcher refuses ends in state rejected, which is not an
// error.
//
// A planId names one plan. The same plan given again (the same document)
// is not run again: ExecutePlan waits for, or returns, the result of the
// first. Another plan under a planId already used is refused with an
// error matching ErrPlanIDTaken, and nothing is published.
func (c *Client) ExecutePlan(ctx context.Context, plan []byte, onEvent func(planbus.Event)) (*planbus.ExecutionResult, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(plan, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("client: the plan is not a JSON object: %v", err)
	}
	var planID, requestID string
	_ = json.Unmarshal(fields["planId"], &planID)
	_ = json.Unmarshal(fields["requestId"], &requestID)
	doc := plan
	if planID == "" || requestID == "" {
		if planID == "" {
			planID = NewID()
			fields["planId"], _ = json.Marshal(planID)
		}
		if requestID == "" {
			requestID = planID
		}
		var err error
		if doc, err = json.Marshal(fields); err != nil {
			return nil, fmt.Errorf("client: the plan is not valid JSON: %w", err)
		}
	}
	if err := c.checkPlanID(ctx, planID, doc); err != nil {
		return nil, err
	}
	w, err := c.follow(ctx, requestID, bus.StreamExecutions, bus.ExecutionSubject(planID), onEvent != nil)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	msg := &nats.Msg{Subject: bus.PlanSubject(planID), Data: doc, Header: telemetry.Inject(ctx, nil)}
	ack, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(planID))
	if err != nil {
		return nil, fmt.Errorf("client: publish plan %s: %w", planID, err)
	}
	if ack.Duplicate {
		// Published a moment ago, after the look above.
		if err := c.checkPlanID(ctx, planID, doc); err != nil {
			return nil, err
		}
	}
	return w.execution(ctx, false, onEvent, "")
}

// checkPlanID looks planID up among the plans submitted: an error
// matching ErrPlanIDTaken if it names a plan other than doc.
func (c *Client) checkPlanID(ctx context.Context, planID string, doc []byte) error {
	s, err := c.js.Stream(ctx, bus.StreamPlans)
	if err != nil {
		return fmt.Errorf("client: look plan id %s up: %w", planID, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, bus.Partitioned(bus.SubjectPlansAll).Of(planID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("client: look plan id %s up: %w", planID, err)
	case !bytes.Equal(m.Data, doc):
		return fmt.Errorf("%w: plan id %s names another plan, submitted at %s: give this one a new planId, or leave planId out",
			ErrPlanIDTaken, planID, m.Time.UTC().Format(time.RFC3339))
	}
	return nil
}

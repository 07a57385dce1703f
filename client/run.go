package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus"
)

// Run is a request the planner accepted: a handle to wait for its outcome,
// follow its events, read its status or cancel it. Submit and SubmitPlan
// return one.
// A Run holds nothing open: it is its request id, and may be made for any
// request id with Client.RunOf.
type Run struct {
	c *Client
	// ID is the request's id: the plan of a bare plan runs as ID-1.
	ID string
	// Accepted is the planner's answer; Accepted.Duplicate says the
	// request had been accepted before under its id, and nothing new runs.
	Accepted planbus.Accepted
}

// SubmitPlan checks plan against the plan schema (planbus.Plan.Validate),
// sends it to the planner as a request of kind plan and returns once it is
// accepted, with a handle to follow it. The request id is the plan's
// RequestID, else its PlanID, else a new one; the session is the plan's.
// A plan the schema refuses is not sent (the error names each place); one
// the planner refuses is a *RejectedError naming the problem (its fields
// under /plan).
func (c *Client) SubmitPlan(ctx context.Context, plan planbus.Plan) (*Run, error) {
	doc, err := checked("plan", plan)
	if err != nil {
		return nil, err
	}
	req, err := planRequest(doc)
	if err != nil {
		return nil, err
	}
	return c.submit(ctx, req)
}

// checked is v's JSON once v.Validate passes; what names the document in
// the error.
func checked(what string, v interface{ Validate() error }) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("client: %s: %w", what, err)
	}
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", what, err)
	}
	return doc, nil
}

// submit sends a request document, with a requestId added if it has none,
// and returns the handle of the request accepted.
func (c *Client) submit(ctx context.Context, doc []byte) (*Run, error) {
	doc, id := withRequestID(doc)
	acc, err := c.SubmitRequest(ctx, doc)
	if err != nil {
		return nil, err
	}
	return &Run{c: c, ID: id, Accepted: *acc}, nil
}

// Submit checks req against the request schema (planbus.Request.Validate),
// sends it to the planner and returns once it is accepted, with a handle to
// follow it. A request without a RequestID is sent with a new one. A
// request the schema refuses is not sent (the error names each place);
// one the planner refuses is a *RejectedError naming the problem; the same
// request sent again is accepted with Run.Accepted.Duplicate set.
func (c *Client) Submit(ctx context.Context, req planbus.Request) (*Run, error) {
	doc, err := checked("request", req)
	if err != nil {
		return nil, err
	}
	return c.submit(ctx, doc)
}

// RunOf is the handle of the request id, submitted earlier or elsewhere.
func (c *Client) RunOf(requestID string) *Run {
	return &Run{c: c, ID: requestID, Accepted: planbus.Accepted{RequestID: requestID}}
}

// Wait waits for the request's outcome; it returns at once if the request
// has ended. A request that fails or falls back is not an error: its
// outcome says so (Outcome.Success, Outcome.Error), and Outcome.Output
// reads a tool's output.
func (r *Run) Wait(ctx context.Context) (*planbus.Outcome, error) {
	return r.c.Await(ctx, r.ID)
}

// Events passes onEvent every event of the request, those that already
// happened (kept for an hour) and those to come, in order, and returns the
// outcome once the request has ended.
func (r *Run) Events(ctx context.Context, onEvent func(planbus.Event)) (*planbus.Outcome, error) {
	return r.c.Watch(ctx, r.ID, onEvent)
}

// Status reads what the system holds about the request now.
func (r *Run) Status(ctx context.Context) (*Status, error) {
	return r.c.Status(ctx, r.ID)
}

// Cancel cancels the request (Client.Cancel); reason may be empty.
func (r *Run) Cancel(ctx context.Context, reason string) (*planbus.CancelReply, error) {
	return r.c.Cancel(ctx, r.ID, reason)
}

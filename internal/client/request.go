package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/planner"
)

// RejectedError is the planner's answer to a request that is not valid.
type RejectedError struct {
	Reply planner.Rejected
}

func (e *RejectedError) Error() string { return e.Reply.Error.Message }

// Request sends a plan request to the planner and waits for its outcome,
// passing every event of the request to onEvent (which may be nil). A
// missing requestId is filled in. A request the planner refuses is a
// *RejectedError naming the problem.
func Request(ctx context.Context, conn *bus.Conn, doc []byte, onEvent func(plan.Event)) (*planner.Outcome, error) {
	// A document that is not an object with a valid requestId is sent as
	// it is: the planner refuses it and says why.
	var fields map[string]json.RawMessage
	requestID := NewID()
	if json.Unmarshal(doc, &fields) == nil {
		if raw, ok := fields["requestId"]; ok {
			_ = json.Unmarshal(raw, &requestID)
		} else {
			fields["requestId"], _ = json.Marshal(requestID)
			doc, _ = json.Marshal(fields)
		}
	}
	if !plan.ValidID(requestID) {
		requestID = NewID()
	}
	outcomes, stop, err := await(ctx, conn, bus.StreamOutcomes, bus.OutcomeSubject(requestID))
	if err != nil {
		return nil, err
	}
	defer stop()
	var events chan *nats.Msg
	if onEvent != nil {
		events = make(chan *nats.Msg, 4096)
		esub, err := conn.NC.ChanSubscribe(bus.EventsOfRequest(requestID), events)
		if err != nil {
			return nil, fmt.Errorf("client: subscribe: %w", err)
		}
		defer func() { _ = esub.Unsubscribe() }()
	}
	if err := conn.NC.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("client: flush: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	reply, err := conn.NC.RequestWithContext(rctx, bus.SubjectPlanRequest, doc)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("client: no planner answered on %s: %w", bus.SubjectPlanRequest, err)
	}
	if reply.Header.Get("Nats-Service-Error-Code") != "" {
		rej := &RejectedError{}
		if json.Unmarshal(reply.Data, &rej.Reply) != nil || rej.Reply.Error.Message == "" {
			rej.Reply.Error.Message = reply.Header.Get("Nats-Service-Error")
		}
		return nil, rej
	}
	deliver := func(m *nats.Msg) {
		var ev plan.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			onEvent(ev)
		}
	}
	for {
		select {
		case m := <-events:
			deliver(m)
		case data := <-outcomes:
			// A round trip to the server makes sure every event it routed
			// to us before now is queued.
			if events != nil {
				_ = conn.NC.FlushTimeout(time.Second)
			}
			for len(events) > 0 {
				deliver(<-events)
			}
			var o planner.Outcome
			if err := json.Unmarshal(data, &o); err != nil {
				return nil, fmt.Errorf("client: outcome of %s: %w", requestID, err)
			}
			return &o, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w for request %s: %w", ErrNoResult, requestID, context.Cause(ctx))
		}
	}
}

// RunThroughPlanner runs p the way a client that may not publish plans
// (the client role) can: as a request of kind plan to the planner's
// endpoint. The request id is p's requestId, else its planId, else a new
// one; the planner runs the plan as <requestId>-1. It returns the
// request's outcome and, when the plan ran, its execution result. A plan
// the planner refuses is a *RejectedError.
func RunThroughPlanner(ctx context.Context, conn *bus.Conn, p *plan.Plan, onEvent func(plan.Event)) (*plan.ExecutionResult, *planner.Outcome, error) {
	requestID := p.RequestID
	if requestID == "" {
		requestID = p.PlanID
	}
	if requestID == "" {
		requestID = NewID()
	}
	req := map[string]any{"kind": planner.KindPlan, "requestId": requestID, "plan": p}
	if p.SessionID != "" {
		req["sessionId"] = p.SessionID
	}
	doc, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("client: plan %s: %w", p.PlanID, err)
	}
	o, err := Request(ctx, conn, doc, onEvent)
	if err != nil {
		return nil, nil, err
	}
	return o.Execution, o, nil
}

// Package client submits plans and waits for their outcome, the way any
// NATS client can: subscribe to the plan's execution subject and its
// request's events, then publish the plan on planbus.plans.<planId>.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
)

// ErrNoResult means ctx ended before the plan's execution result arrived.
var ErrNoResult = errors.New("client: no execution result")

// NewID returns a fresh id for plans and requests.
func NewID() string { return nuid.Next() }

// Run submits p and waits for its execution result, passing every event of
// its request to onEvent (which may be nil) as it arrives. Missing planId
// and requestId are filled in. A plan that fails or is rejected is not an
// error: its result says so.
func Run(ctx context.Context, conn *bus.Conn, p *plan.Plan, onEvent func(plan.Event)) (*plan.ExecutionResult, error) {
	if p.PlanID == "" {
		p.PlanID = NewID()
	}
	if p.RequestID == "" {
		p.RequestID = p.PlanID
	}
	results, stop, err := await(ctx, conn, bus.StreamExecutions, bus.ExecutionSubject(p.PlanID))
	if err != nil {
		return nil, err
	}
	defer stop()
	var events chan *nats.Msg // nil when nobody listens: that case never fires
	if onEvent != nil {
		events = make(chan *nats.Msg, 4096)
		esub, err := conn.NC.ChanSubscribe(bus.EventsOfRequest(p.RequestID), events)
		if err != nil {
			return nil, fmt.Errorf("client: subscribe: %w", err)
		}
		defer func() { _ = esub.Unsubscribe() }()
	}
	deliver := func(m *nats.Msg) {
		var ev plan.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			onEvent(ev)
		}
	}
	// Both subscriptions must be in place at the server before the plan
	// can produce anything.
	if err := conn.NC.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("client: flush: %w", err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if _, err := conn.JS.Publish(ctx, bus.PlanSubject(p.PlanID), data, jetstream.WithMsgID(p.PlanID)); err != nil {
		return nil, fmt.Errorf("client: submit plan %s: %w", p.PlanID, err)
	}
	for {
		select {
		case m := <-events:
			deliver(m)
		case data := <-results:
			// A round trip to the server makes sure every event it routed
			// to us before now is queued.
			if events != nil {
				_ = conn.NC.FlushTimeout(time.Second)
			}
			for len(events) > 0 {
				deliver(<-events)
			}
			var res plan.ExecutionResult
			if err := json.Unmarshal(data, &res); err != nil {
				return nil, fmt.Errorf("client: execution result of %s: %w", p.PlanID, err)
			}
			return &res, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w for plan %s: %w", ErrNoResult, p.PlanID, context.Cause(ctx))
		}
	}
}

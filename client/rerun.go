package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
)

// RerunOf is the member of a request's metadata that Rerun sets: the id
// of the request (or plan) it runs again.
const RerunOf = "rerunOf"

// RerunOptions say how Rerun runs a request again.
type RerunOptions struct {
	// FailedOnly runs only the tools of the latest plan that did not
	// succeed (failed, timed out, skipped, cancelled), as a plan of its
	// own: the tools that succeeded are not run again, and the inputs
	// that referred to them take their outputs.
	FailedOnly bool
	// RequestID is the new request's id; empty makes one.
	RequestID string
}

// Rerun submits the request id (or a plan run on its own, by its id)
// again under a new request id and returns once the planner has accepted
// it. The new request's metadata names id under RerunOf. With
// o.FailedOnly, id's latest plan must have ended; a plan whose tools all
// succeeded has nothing to run again, an error. An id nothing is known of
// is ErrNotFound.
func (c *Client) Rerun(ctx context.Context, id string, o RerunOptions) (*planbus.Accepted, error) {
	if !plan.ValidID(id) {
		return nil, fmt.Errorf("client: %q is not a request or plan id", id)
	}
	newID := o.RequestID
	if newID == "" {
		newID = NewID()
	}
	accepted, err := c.acceptedRequest(ctx, id)
	if err != nil {
		return nil, err
	}
	var req []byte
	if accepted != nil {
		req = accepted.Data
	}
	var doc []byte
	switch {
	case o.FailedOnly:
		planID := id
		if req != nil {
			st, err := c.requestStatus(ctx, id)
			if err != nil {
				return nil, err
			}
			if st == nil || st.PlanID == "" {
				return nil, fmt.Errorf("client: request %s has no plan yet: nothing ran, rerun it whole", id)
			}
			planID = st.PlanID
		}
		remaining, err := c.remainingPlan(ctx, planID)
		if err != nil {
			return nil, err
		}
		fields := map[string]any{"kind": "plan", "plan": remaining}
		if req != nil {
			var r struct {
				SessionID string          `json:"sessionId"`
				Input     json.RawMessage `json:"input"`
			}
			_ = json.Unmarshal(req, &r)
			if r.SessionID != "" {
				fields["sessionId"] = r.SessionID
			}
			if len(r.Input) > 0 {
				fields["input"] = r.Input
			}
		}
		doc, err = withRerun(fields, newID, id, true)
		if err != nil {
			return nil, err
		}
	case req != nil:
		var fields map[string]any
		if err := json.Unmarshal(req, &fields); err != nil {
			return nil, fmt.Errorf("client: request %s as accepted: %w", id, err)
		}
		doc, err = withRerun(fields, newID, id, false)
		if err != nil {
			return nil, err
		}
	default:
		pdoc, err := c.get(ctx, bus.BucketPlans, bus.PlanKey(id))
		if err != nil {
			return nil, err
		}
		if pdoc == nil {
			return nil, fmt.Errorf("%w: no request or plan %q (they are kept for a day)", ErrNotFound, id)
		}
		var p map[string]any
		if err := json.Unmarshal(pdoc, &p); err != nil {
			return nil, fmt.Errorf("client: plan %s as stored: %w", id, err)
		}
		delete(p, "planId")
		delete(p, "requestId")
		doc, err = withRerun(map[string]any{"kind": "plan", "plan": p}, newID, id, false)
		if err != nil {
			return nil, err
		}
	}
	return c.SubmitRequest(ctx, doc)
}

// withRerun is a request document of fields under requestID, its
// metadata naming the request it runs again.
func withRerun(fields map[string]any, requestID, of string, failedOnly bool) ([]byte, error) {
	meta, _ := fields["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[RerunOf] = of
	if failedOnly {
		meta["rerunFailedOnly"] = true
	}
	fields["metadata"], fields["requestId"] = meta, requestID
	return json.Marshal(fields)
}

// acceptedRequest is request id's message as the planner accepted it,
// or nil if there is none.
func (c *Client) acceptedRequest(ctx context.Context, id string) (*jetstream.RawStreamMsg, error) {
	st, err := c.stream(ctx, bus.StreamRequests)
	if err != nil {
		return nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, bus.RequestSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: request %s: %w", id, err)
	}
	return m, nil
}

// remainingPlan is the part of ended plan planID that did not succeed, as
// a plan document: its tools that did not succeed, their dependencies on
// the ones that did dropped and their references to them replaced by
// those outputs.
func (c *Client) remainingPlan(ctx context.Context, planID string) (map[string]any, error) {
	st, err := c.stream(ctx, bus.StreamExecutions)
	if err != nil {
		return nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, bus.ExecutionSubject(planID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("client: plan %s has not ended (cancel it, or wait for its end) or is no longer kept: only an ended plan's failed tools can be run again", planID)
	}
	if err != nil {
		return nil, fmt.Errorf("client: execution of plan %s: %w", planID, err)
	}
	var res planbus.ExecutionResult
	if err := json.Unmarshal(m.Data, &res); err != nil {
		return nil, fmt.Errorf("client: execution of plan %s: %w", planID, err)
	}
	pdoc, err := c.get(ctx, bus.BucketPlans, bus.PlanKey(planID))
	if err != nil {
		return nil, err
	}
	if pdoc == nil {
		return nil, fmt.Errorf("%w: plan %s is no longer kept", ErrNotFound, planID)
	}
	var p map[string]any
	if err := json.Unmarshal(pdoc, &p); err != nil {
		return nil, fmt.Errorf("client: plan %s as stored: %w", planID, err)
	}
	tools, _ := p["tools"].([]any)
	if len(res.Tools) != len(tools) {
		return nil, fmt.Errorf("client: the execution of plan %s does not list its tools (too large to keep): its failed tools cannot be told apart", planID)
	}
	done := map[string]json.RawMessage{}
	for _, t := range res.Tools {
		if t.State == planbus.ToolSucceeded {
			done[t.ToolID] = t.Output
		}
	}
	if len(done) == len(tools) {
		return nil, fmt.Errorf("client: every tool of plan %s succeeded: there is nothing to run again (rerun it whole without failed-only)", planID)
	}
	var keep []any
	for _, raw := range tools {
		t, _ := raw.(map[string]any)
		id, _ := t["toolId"].(string)
		if _, ok := done[id]; ok {
			continue
		}
		if deps, ok := t["dependencies"].([]any); ok {
			t["dependencies"] = slices.DeleteFunc(append([]any{}, deps...), func(d any) bool {
				s, _ := d.(string)
				_, ok := done[s]
				return ok
			})
		}
		delete(t, "reuseFrom")
		for _, at := range []map[string]any{t, asMap(t["fallback"])} {
			if at == nil || at["input"] == nil {
				continue
			}
			in, _ := json.Marshal(at["input"])
			out, err := plan.InlineRefs(in, done)
			if err != nil {
				return nil, fmt.Errorf("client: plan %s, tool %s: %w", planID, id, err)
			}
			var v any
			_ = json.Unmarshal(out, &v)
			at["input"] = v
		}
		keep = append(keep, t)
	}
	p["tools"] = keep
	delete(p, "planId")
	delete(p, "requestId")
	if d, _ := p["description"].(string); d != "" {
		p["description"] = fmt.Sprintf("The tools of %s that did not succeed: %s", planID, d)
	} else {
		p["description"] = fmt.Sprintf("The tools of %s that did not succeed", planID)
	}
	return p, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/schemas"
)

// StartAgent starts a session's GOAP agent on planbus.agent.start: request
// is a plan request of kind goap ("kind" may be left out; "goap":
// {"agent": true} is implied), e.g. {"sessionId": "camp", "goap":
// {"domain": "camp"}}. It returns once the agent's state is stored, with
// the agent's id (the requestId: given, or a new one), which names its
// events (planbus.events.<id>.>) and its outcome when it ends; Watch and
// Await follow it like a request. A session has one running agent at a
// time: starting another is a *RejectedError naming /sessionId.
func (c *Client) StartAgent(ctx context.Context, request []byte) (*planbus.Accepted, error) {
	doc, _ := withRequestID(request)
	var acc planbus.Accepted
	if err := c.call(ctx, bus.SubjectAgentStart, doc, &acc); err != nil {
		return nil, err
	}
	return &acc, nil
}

// StopAgent stops the session's agent; the plan it runs is cancelled.
// A session without an agent is ErrNotFound; an agent that had ended is
// answered with status planbus.AgentStopEnded.
func (c *Client) StopAgent(ctx context.Context, sessionID, reason string) (*planbus.AgentStopReply, error) {
	body, err := json.Marshal(planbus.AgentStopRequest{SessionID: sessionID, Reason: reason})
	if err != nil {
		return nil, err
	}
	if err := schemas.Validate(schemas.AgentStopRequest, body); err != nil {
		return nil, fmt.Errorf("client: stop agent: %w", err)
	}
	var reply planbus.AgentStopReply
	if err := c.call(ctx, bus.SubjectAgentStop, body, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// AgentStatus reports the session's agent: its goal, plan and step, each
// goal's utility, validity and cooldown in the session state now (with the
// text report), and what it did per goal. A session without an agent is
// ErrNotFound.
func (c *Client) AgentStatus(ctx context.Context, sessionID string) (*planbus.AgentStatus, error) {
	body, err := json.Marshal(planbus.AgentStatusRequest{SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	if err := schemas.Validate(schemas.AgentStatusRequest, body); err != nil {
		return nil, fmt.Errorf("client: agent status: %w", err)
	}
	var st planbus.AgentStatus
	if err := c.call(ctx, bus.SubjectAgentStatus, body, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

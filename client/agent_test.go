package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

func TestAgentCallsRefuseAndNotFound(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.AgentStatus(ctx, "ghost"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("status of a session without an agent: %v, want ErrNotFound", err)
	}
	if _, err := c.StopAgent(ctx, "ghost", ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("stop of a session without an agent: %v, want ErrNotFound", err)
	}
	if _, err := c.StopAgent(ctx, "not a session", ""); err == nil || errors.Is(err, client.ErrNotFound) {
		t.Errorf("stop of a bad session id: %v, want it refused before it is sent", err)
	}
	var rej *client.RejectedError
	_, err := c.StartAgent(ctx, []byte(`{"sessionId": "s", "goap": {"inline": {"name": "x", "facts": {}, "actions": [], "goals": []}}}`))
	if !errors.As(err, &rej) || rej.Reply.Error.Code != planbus.CodeInvalidRequest {
		t.Errorf("an agent of a domain without goals: %v, want a rejection", err)
	}
}

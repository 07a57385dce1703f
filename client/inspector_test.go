package client_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

// A skill that failed for good in a session shows so in Skills, and
// ResetSession makes it healthy again there.
func TestSkillsAndResetSession(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	healthOf := func(session, skill string) planbus.SkillHealth {
		t.Helper()
		reply, err := c.Inspector().Skills(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		if want := cmp.Or(session, planbus.DefaultSession); reply.SessionID != want {
			t.Errorf("skills of session %q, want %q", reply.SessionID, want)
		}
		for _, s := range reply.Skills {
			if s.Manifest.Name == skill {
				return s.Health
			}
		}
		t.Fatalf("skill %s not listed in %+v", skill, reply.Skills)
		return planbus.SkillHealth{}
	}
	if h := healthOf("s-reset", "fail"); h.State != planbus.HealthHealthy {
		t.Fatalf("fail in a new session: %+v, want healthy", h)
	}
	// A network error on the only attempt: temporaryFailure, then
	// permanentFailure as the retries have run out.
	out, err := c.RunPlan(ctx, []byte(`{"sessionId": "s-reset", "tools": [{"toolId": "f", "skill": "fail",
		"input": {"category": "network", "code": "DOWN", "message": "the link is down"}, "retryPolicy": {"maxAttempts": 1}}]}`), nil)
	if err != nil || out.Success {
		t.Fatalf("the failing plan: %+v %v", out, err)
	}
	if h := healthOf("s-reset", "fail"); h.State != planbus.HealthPermanentFailure || h.LastError != "the link is down" {
		t.Errorf("fail after a network error on its only attempt: %+v, want permanentFailure with the error", h)
	}
	if h := healthOf("", "fail"); h.State != planbus.HealthHealthy {
		t.Errorf("fail in the default session: %+v, want healthy", h)
	}
	reset, err := c.Inspector().ResetSession(ctx, "s-reset", false)
	if err != nil || !slices.Equal(reset.Healed, []string{"fail"}) || reset.StateCleared {
		t.Fatalf("reset: %+v %v, want fail healed", reset, err)
	}
	if h := healthOf("s-reset", "fail"); h.State != planbus.HealthHealthy {
		t.Errorf("fail after the reset: %+v, want healthy", h)
	}
	var rej *client.RejectedError
	if _, err := c.Inspector().ResetSession(ctx, "not a session", true); !errors.As(err, &rej) || rej.Reply.Error.Field != "/sessionId" {
		t.Errorf("reset of a bad session id: %v, want a rejection at /sessionId", err)
	}
}

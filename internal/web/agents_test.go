package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/planbus/planbus/internal/web"
)

// An agent's page says how it ended: one that found no plan five times in
// a row gave up (failed, AGENT_GAVE_UP), with its goals' counts.
func TestAgentPageShowsAGiveUp(t *testing.T) {
	s := start(t, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := s.cl.StartAgent(ctx, []byte(`{"requestId":"hopeless","sessionId":"hope","goap":{"inline":{
		"name":"nowhere","facts":{"door":false},
		"actions":[{"name":"look","skill":"echo","effects":{"door":false}}],
		"goals":[{"name":"open","conditions":{"door":true},"utility":10,"cooldownMs":1}]}}}`)); err != nil {
		t.Fatal(err)
	}
	o, err := s.cl.Await(ctx, "hopeless")
	if err != nil || o.Success || o.Error == nil || o.Error.Code != "AGENT_GAVE_UP" {
		t.Fatalf("outcome %+v (%v), want AGENT_GAVE_UP", o, err)
	}
	s.get(t, "/agents/hope").must(t, "agent", http.StatusOK, `data-status="failed"`, "<code>AGENT_GAVE_UP</code>",
		`data-goal="open"`, "nowhere")
	s.get(t, "/agents/nobody").must(t, "no agent", http.StatusNotFound)
	s.get(t, "/agents/a.b").must(t, "bad session", http.StatusBadRequest)
}

package web

import (
	"context"
	"fmt"
	"net/http"
)

// agentPage shows a session's GOAP agent: its status (running, or how it
// ended: stopped, idle, failed, and why, AGENT_GAVE_UP among them), its
// goal and plan, and the goal report, as planner agent status prints it.
func (s *Server) agentPage(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("session")
	if !idPattern.MatchString(session) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a session id: 1 to 128 letters, digits, '_' or '-'", session))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	st, err := s.cl.AgentStatus(ctx, session)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "agent", map[string]any{"Title": "Agent of session " + session, "Agent": st})
}

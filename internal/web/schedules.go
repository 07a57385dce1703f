package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/wire"
)

// schedulesPage lists the schedules (planner schedule ls) with their
// last ticks, and pause, resume and remove buttons.
func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	list, err := s.cl.Schedules(ctx)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "schedules", map[string]any{"Title": "Schedules", "Schedules": list, "Now": time.Now(),
		"Notice": r.URL.Query().Get("notice")})
}

// scheduleVerb pauses, resumes or removes a schedule.
func (s *Server) scheduleVerb(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !s.checkCSRF(w, r) {
		return
	}
	name, verb := r.PathValue("name"), r.PathValue("verb")
	if !wire.IsName(name) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a schedule name", name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	var act func(context.Context, string) (*planbus.Schedule, error)
	var done string
	switch verb {
	case "pause":
		act, done = s.cl.PauseSchedule, "paused"
	case "resume":
		act, done = s.cl.ResumeSchedule, "resumed"
	case "rm":
		act, done = s.cl.RemoveSchedule, "removed"
	default:
		s.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("no action %q on schedules: pause, resume or rm", verb))
		return
	}
	if _, err := act(ctx, name); err != nil {
		s.failure(w, r, err)
		return
	}
	s.log.Info().Str("schedule", name).Str("verb", verb).Msg("schedule changed from the web view")
	http.Redirect(w, r, "/schedules?notice="+url.QueryEscape("Schedule "+name+" "+done+"."), http.StatusSeeOther)
}

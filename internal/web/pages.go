package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/wire"
)

// Ids as the schemas have them (schemas/common.schema.json):
// ^[A-Za-z0-9_-]{1,128}$, ^[A-Za-z0-9_.:-]{1,128}$ and ^[A-Za-z0-9_-]{1,64}$.
var (
	idPattern     = namePattern{max: 128}
	toolIDPattern = namePattern{max: 128, extra: ".:"}
	skillPattern  = skillName{}
)

// skillName matches a skill name, namespaced or not (wire.IsSkill).
type skillName struct{}

// MatchString reports whether s is a skill name.
func (skillName) MatchString(s string) bool { return wire.IsSkill(s) }

// namePattern matches 1 to max characters, each an ASCII letter or digit,
// '_', '-' or one of extra. It does a regular expression's work without
// one: regexp compiles {1,128} to 128 copies of the class, 300 KB made at
// the start of every command of the binary.
type namePattern struct {
	max   int
	extra string
}

// MatchString reports whether s is such a name.
func (p namePattern) MatchString(s string) bool {
	if len(s) == 0 || len(s) > p.max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' ||
			strings.IndexByte(p.extra, c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// pageTimeout bounds what one page reads from the system.
const pageTimeout = 15 * time.Second

// render writes page name with data, within the layout.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, data map[string]any) {
	t, ok := pages()[name]
	if !ok {
		http.Error(w, "web: no page "+name, http.StatusInternalServerError)
		return
	}
	data["Page"] = name
	data["CSRF"] = s.csrf(r)
	data["Version"] = s.cfg.Version
	data["Login"] = s.cfg.Token != ""
	s.write(w, code, t, "layout", data)
}

// fragment writes a template that is a part of a page (a table, a
// panel), for the page's script to put in place.
func (s *Server) fragment(w http.ResponseWriter, r *http.Request, name string, data map[string]any) {
	data["CSRF"] = s.csrf(r)
	s.write(w, http.StatusOK, pages()[name], name, data)
}

func (s *Server) write(w http.ResponseWriter, code int, t *template.Template, name string, data map[string]any) {
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error().Err(err).Str("template", name).Msg("cannot render")
		http.Error(w, "web: cannot render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, b.String())
}

// errorPage shows what went wrong.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", map[string]any{"Title": http.StatusText(code), "Code": code, "Message": msg})
}

// failure shows an error of the system's: not found, refused, or not
// answering.
func (s *Server) failure(w http.ResponseWriter, r *http.Request, err error) {
	var rej *client.RejectedError
	switch {
	case errors.Is(err, client.ErrNotFound), errors.Is(err, errNotFound):
		s.errorPage(w, r, http.StatusNotFound, err.Error())
	case errors.As(err, &rej):
		s.errorPage(w, r, http.StatusUnprocessableEntity, err.Error())
	default:
		s.log.Warn().Err(err).Str("path", r.URL.Path).Msg("cannot read the system")
		s.errorPage(w, r, http.StatusBadGateway, "The system did not answer: "+err.Error())
	}
}

// requestKinds and requestStatuses are the filters of the requests page.
var (
	requestKinds    = []string{"plan", "external", "htn", "goap", "template"}
	requestStatuses = []planbus.RequestStatus{planbus.RequestQueued, planbus.RequestGenerating, planbus.RequestExecuting, planbus.RequestCancelling,
		planbus.StatusSucceeded, planbus.StatusFailed, planbus.StatusFallback, planbus.StatusCancelled}
)

// joinStatuses lists statuses for a message.
func joinStatuses(statuses []planbus.RequestStatus) string {
	var b strings.Builder
	for i, s := range statuses {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}

// listQuery reads the requests page's filters, checking each.
func listQuery(r *http.Request) (q planbus.ListRequest, kind string, err error) {
	v := r.URL.Query()
	q.Status, q.SessionID, kind = planbus.RequestStatus(v.Get("status")), v.Get("session"), v.Get("kind")
	q.Limit = 50
	if q.Status != "" && !slices.Contains(requestStatuses, q.Status) {
		return q, kind, fmt.Errorf("status %q: want one of %s", q.Status, joinStatuses(requestStatuses))
	}
	if q.SessionID != "" && !idPattern.MatchString(q.SessionID) {
		return q, kind, fmt.Errorf("session %q: a session id is 1 to 128 letters, digits, '_' or '-'", q.SessionID)
	}
	if kind != "" && !slices.Contains(requestKinds, kind) {
		return q, kind, fmt.Errorf("kind %q: want one of %s", kind, strings.Join(requestKinds, ", "))
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return q, kind, fmt.Errorf("limit %q: want 1 to 1000", l)
		}
		q.Limit = n
	}
	q.Kind = kind
	if q.Text = strings.TrimSpace(v.Get("text")); len(q.Text) > 256 {
		return q, kind, fmt.Errorf("text: at most 256 characters")
	}
	if since := strings.TrimSpace(v.Get("since")); since != "" {
		if d, err := time.ParseDuration(since); err == nil && d > 0 {
			q.Since = time.Now().Add(-d)
		} else if at, err := time.Parse(time.RFC3339, since); err == nil {
			q.Since = at
		} else {
			return q, kind, fmt.Errorf("since %q: want a duration back from now (1h) or a time (RFC 3339)", since)
		}
	}
	q.Waiting = v.Get("waiting") == "1"
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil || n == 0 {
			return q, kind, fmt.Errorf("before %q: want a cursor of an earlier page", b)
		}
		q.Before = n
	}
	return q, kind, nil
}

// requestsPage lists recent requests, newest first, with filters; with
// ?partial=1 only the table, which the page's script reloads when
// requests change.
func (s *Server) requestsPage(w http.ResponseWriter, r *http.Request) {
	q, kind, err := listQuery(r)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Filter "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	reply, err := s.cl.Inspector().List(ctx, q)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	title := "Requests"
	if q.Waiting {
		title = "Waiting for approval"
	}
	older := ""
	if reply.More {
		next := r.URL.Query()
		next.Set("before", strconv.FormatUint(reply.Next, 10))
		next.Del("partial")
		older = "/requests?" + next.Encode()
	}
	data := map[string]any{"Title": title, "Requests": reply.Requests, "More": reply.More, "Older": older, "Now": time.Now(),
		"Status": q.Status, "Session": q.SessionID, "Kind": kind, "Limit": q.Limit, "Text": q.Text,
		"Since": r.URL.Query().Get("since"), "Waiting": q.Waiting, "Paged": q.Before > 0,
		"Statuses": requestStatuses, "Kinds": requestKinds}
	if r.URL.Query().Get("partial") == "1" {
		s.fragment(w, r, "requests-table", data)
		return
	}
	s.render(w, r, http.StatusOK, "requests", data)
}

// requestPage shows one request: its loop, attempts, outcome.
func (s *Server) requestPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a request id: 1 to 128 letters, digits, '_' or '-'", id))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	st, err := s.cl.Status(ctx, id)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	if st.Request == nil {
		// A plan run on its own has no request loop: its page is the plan's.
		http.Redirect(w, r, "/plans/"+st.Plan.PlanID, http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "request", map[string]any{"Title": "Request " + id, "Req": st.Request, "Plan": st.Plan,
		"Now": time.Now(), "Notice": r.URL.Query().Get("notice")})
}

// postedID checks a form posted to a request's path (its size, its CSRF
// token, the id in the path) and returns the id; when it is not ok the
// answer is written.
func (s *Server) postedID(w http.ResponseWriter, r *http.Request) (string, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !s.checkCSRF(w, r) {
		return "", false
	}
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a request or plan id", id))
		return "", false
	}
	return id, true
}

// maxReason is the longest cancel reason the planner takes.
const maxReason = 1024

// cancel cancels a request (or the plan's, for a plan id).
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := s.postedID(w, r)
	if !ok {
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if n := len([]rune(reason)); n > maxReason {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("The reason has %d characters; at most %d are taken.", n, maxReason))
		return
	}
	if reason == "" {
		reason = "cancelled from the web view"
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	reply, err := s.cl.Cancel(ctx, id, reason)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	s.log.Info().Str("request_id", reply.RequestID).Str("plan_id", reply.PlanID).Str("status", reply.Status).Msg("cancel asked from the web view")
	back := "/requests/" + id
	if next := r.PostFormValue("back"); strings.HasPrefix(next, "/plans/") && idPattern.MatchString(strings.TrimPrefix(next, "/plans/")) {
		back = next
	}
	http.Redirect(w, r, back+"?notice="+url.QueryEscape(reply.Message), http.StatusSeeOther)
}

// rerun runs a request again under a new id (client.Rerun), whole or,
// with failedOnly, only what did not succeed, and opens the new request.
func (s *Server) rerun(w http.ResponseWriter, r *http.Request) {
	id, ok := s.postedID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	failedOnly := r.PostFormValue("failedOnly") == "1"
	acc, err := s.cl.Rerun(ctx, id, client.RerunOptions{FailedOnly: failedOnly})
	if err != nil {
		s.failure(w, r, err)
		return
	}
	s.log.Info().Str("request_id", id).Str("rerun", acc.RequestID).Bool("failed_only", failedOnly).Msg("rerun asked from the web view")
	what := "A rerun of " + id
	if failedOnly {
		what = "A rerun of what did not succeed in " + id
	}
	http.Redirect(w, r, "/requests/"+acc.RequestID+"?notice="+url.QueryEscape(what), http.StatusSeeOther)
}

// planData reads what the view knows of a plan.
func (s *Server) planData(ctx context.Context, planID string, withEvents bool) (*planModel, error) {
	def, err := s.src.plan(ctx, planID)
	if err != nil {
		return nil, err
	}
	m := newModel(def)
	st, err := s.cl.Status(ctx, planID)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		return nil, err
	}
	if st != nil && st.Plan != nil && st.Plan.PlanID == planID {
		m.applyStatus(st.Plan)
		if m.RequestID == "" {
			m.RequestID = st.Plan.RequestID
		}
	}
	if withEvents {
		evs, err := s.src.events(ctx, m.requestID(), planID)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			m.apply(ev)
		}
	}
	res, err := s.src.execution(ctx, planID)
	if err != nil {
		return nil, err
	}
	m.applyExecution(res)
	return m, nil
}

// requestID is the request the plan's events are published under: its
// own id for a plan published without one.
func (m *planModel) requestID() string {
	if m.RequestID != "" {
		return m.RequestID
	}
	return m.PlanID
}

// planPage shows a plan: its DAG drawn, its tools' states
// (live, through planEvents), its critical path.
func (s *Server) planPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a plan id: 1 to 128 letters, digits, '_' or '-'", id))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	m, err := s.planData(ctx, id, true)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	data := map[string]any{"Title": "Plan " + id, "Plan": m, "Counts": m.counts(), "Now": time.Now(),
		"Critical": positions(m.critical(time.Now())), "Notice": r.URL.Query().Get("notice"), "GraphLimit": s.cfg.GraphLimit}
	if len(m.Tools) <= s.cfg.GraphLimit {
		svg, err := s.draw.svg(m)
		if err != nil {
			s.log.Warn().Err(err).Str("plan_id", id).Msg("cannot draw the plan")
			data["GraphError"] = err.Error()
		} else {
			data["SVG"] = template.HTML(svg) // ids and skills only, which the schemas restrict to safe characters, escaped besides
		}
	}
	s.render(w, r, http.StatusOK, "plan", data)
}

// positions numbers the tools of a path from 1, by id.
func positions(ids []string) map[string]int {
	out := make(map[string]int, len(ids))
	for i, id := range ids {
		out[id] = i + 1
	}
	return out
}

// toolPage is the panel of one tool: its attempts, input, output, error,
// worker and durations.
func (s *Server) toolPage(w http.ResponseWriter, r *http.Request) {
	id, tool := r.PathValue("id"), r.PathValue("tool")
	if !idPattern.MatchString(id) || !toolIDPattern.MatchString(tool) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q/%q is not a plan id and a tool id", id, tool))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	m, err := s.planData(ctx, id, true)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	t := m.tool(tool)
	if t == nil {
		s.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("Plan %s has no tool %q.", id, tool))
		return
	}
	waiting := false
	if s.cfg.Approvals != nil && !ended(t.State) {
		if waiting, err = s.cfg.Approvals.Waiting(ctx, id, tool); err != nil {
			s.log.Warn().Err(err).Msg("cannot ask whether the tool waits for approval")
		}
	}
	data := map[string]any{"Plan": m, "Tool": t, "Waiting": waiting, "Now": time.Now()}
	if r.URL.Query().Get("partial") == "1" {
		s.fragment(w, r, "tool-panel", data)
		return
	}
	data["Title"] = "Tool " + tool + " of plan " + id
	s.render(w, r, http.StatusOK, "tool", data)
}

// decide approves or rejects a waiting tool (see Approver).
func (s *Server) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if s.cfg.Approvals == nil {
			s.errorPage(w, r, http.StatusNotFound, "This system has no approvals: no tool waits for one.")
			return
		}
		if !s.checkCSRF(w, r) {
			return
		}
		id, tool := r.PathValue("id"), r.PathValue("tool")
		if !idPattern.MatchString(id) || !toolIDPattern.MatchString(tool) {
			s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q/%q is not a plan id and a tool id", id, tool))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
		defer cancel()
		if err := s.cfg.Approvals.Decide(ctx, id, tool, approve, r.PostFormValue("reason")); err != nil {
			s.failure(w, r, err)
			return
		}
		http.Redirect(w, r, "/plans/"+id+"#tool="+tool, http.StatusSeeOther)
	}
}

// skillRow is one skill on the skills page.
type skillRow struct {
	Manifest  planbus.SkillManifest
	State     string
	Failures  int
	LastError string
	Workers   []string
	History   []healthEntry
	Schema    string
	OutSchema string
}

// skillsPage shows the skills: manifests, the workers that serve them,
// their health in a session with its history.
func (s *Server) skillsPage(w http.ResponseWriter, r *http.Request) {
	session := r.URL.Query().Get("session")
	if session == "" {
		session = planbus.DefaultSession
	}
	if !idPattern.MatchString(session) {
		s.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("session %q: a session id is 1 to 128 letters, digits, '_' or '-'", session))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	sk, err := s.src.skills(ctx, session)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	workers, err := s.src.services(ctx, bus.ServiceToolworker)
	if err != nil {
		s.failure(w, r, err)
		return
	}
	serving := map[string][]string{}
	for _, in := range workers {
		for _, e := range in.Endpoints {
			serving[e.Name] = append(serving[e.Name], in.Worker())
		}
	}
	var rows []skillRow
	for _, x := range sk.Skills {
		row := skillRow{Manifest: x.Manifest, State: x.Health.State, Failures: x.Health.Failures, LastError: x.Health.LastError,
			Workers: serving[x.Manifest.Name]}
		if row.State == "" {
			row.State = "healthy"
		}
		if len(x.Manifest.InputSchema) > 0 {
			row.Schema = pretty(x.Manifest.InputSchema)
		}
		if len(x.Manifest.OutputSchema) > 0 {
			row.OutSchema = pretty(x.Manifest.OutputSchema)
		}
		if row.History, err = s.src.healthHistory(ctx, session, x.Manifest.Name); err != nil {
			s.failure(w, r, err)
			return
		}
		rows = append(rows, row)
	}
	var sessions []string
	if reply, err := s.cl.Inspector().List(ctx, planbus.ListRequest{Limit: 200}); err == nil {
		sessions = sessionsOf(reply.Requests)
	}
	if !slices.Contains(sessions, session) {
		sessions = append([]string{session}, sessions...)
	}
	s.render(w, r, http.StatusOK, "skills", map[string]any{"Title": "Skills", "Session": session, "Sessions": sessions, "Skills": rows})
}

// systemPage shows the running components (the micro services'
// instances) and the streams' and consumers' backlogs.
func (s *Server) systemPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	type service struct {
		Name      string
		Instances []instance
	}
	var services []service
	var skills []string
	for _, name := range []string{bus.ServicePlanner, bus.ServiceDispatcher, bus.ServiceToolworker} {
		ins, err := s.src.services(ctx, name)
		if err != nil {
			s.failure(w, r, err)
			return
		}
		services = append(services, service{Name: name, Instances: ins})
		if name == bus.ServiceToolworker {
			for _, in := range ins {
				for _, e := range in.Endpoints {
					if !slices.Contains(skills, e.Name) {
						skills = append(skills, e.Name)
					}
				}
			}
		}
	}
	slices.Sort(skills)
	streams, consumers := s.src.backlogs(ctx, skills)
	s.render(w, r, http.StatusOK, "system", map[string]any{"Title": "System", "Services": services, "Streams": streams,
		"Consumers": consumers, "Now": time.Now(), "URL": s.nc.ConnectedUrlRedacted()})
}

// maxSubmit is the largest document the submit form takes.
const maxSubmit = 8 << 20

func (s *Server) submitPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "submit", map[string]any{"Title": "Submit"})
}

// submit sends a Plan JSON or a plan request to the planner and shows
// the request it became.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSubmit+64<<10)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The document is too large: at most %d MiB.", maxSubmit>>20))
		return
	}
	if !s.checkCSRF(w, r) {
		return
	}
	doc := strings.TrimSpace(r.PostFormValue("document"))
	again := func(code int, problem string) {
		s.render(w, r, code, "submit", map[string]any{"Title": "Submit", "Document": doc, "Problem": problem})
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &fields); err != nil || fields == nil {
		msg := "not a JSON object"
		if err != nil {
			msg = err.Error()
		}
		again(http.StatusBadRequest, "The document is not a JSON object: "+msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	var acc *planbus.Accepted
	var err error
	if _, isRequest := fields["kind"]; isRequest {
		acc, err = s.cl.SubmitRequest(ctx, []byte(doc))
	} else {
		acc, err = s.cl.SubmitPlanJSON(ctx, []byte(doc))
	}
	var rej *client.RejectedError
	if errors.As(err, &rej) {
		problem := rej.Reply.Error.Message
		if f := rej.Reply.Error.Field; f != "" && !strings.Contains(problem, f) {
			problem = "at " + f + ": " + problem
		}
		again(http.StatusUnprocessableEntity, "The planner refused it: "+problem)
		return
	}
	if err != nil {
		s.failure(w, r, err)
		return
	}
	s.log.Info().Str("request_id", acc.RequestID).Msg("submitted from the web view")
	http.Redirect(w, r, "/requests/"+acc.RequestID, http.StatusSeeOther)
}

// pretty indents a JSON document for reading; what is not JSON is shown
// as it is.
func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

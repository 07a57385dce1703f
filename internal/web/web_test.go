package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/web"
)

// Every page of a diamond that ran: the requests list (and its table
// alone), the request, the plan with its DAG drawn and its
// critical path, a tool's panel with its output and worker, the skills
// and the system.
func TestPagesOfADiamond(t *testing.T) {
	s := start(t, web.Config{})
	o := s.run(t, withID(t, readPlan(t, "diamond.json"), "dia"))
	if !o.Success || o.PlanID != "dia-1" {
		t.Fatalf("outcome %+v, want plan dia-1 to succeed", o)
	}

	s.get(t, "/").must(t, "/", http.StatusSeeOther)
	js := s.get(t, "/static/app.js")
	js.must(t, "the script", http.StatusOK, "new EventSource(url)")
	if ct := js.hdr.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("the script's Content-Type %q", ct)
	}
	list := s.get(t, "/requests")
	list.must(t, "requests", http.StatusOK, `<a href="/requests/dia">dia</a>`, `data-status="succeeded"`, `href="/plans/dia-1"`,
		`<script src="/static/app.js" defer></script>`)
	if csp := list.hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q: scripts are not limited to the view's", csp)
	}
	part := s.get(t, "/requests?partial=1")
	part.must(t, "requests table", http.StatusOK, `data-request="dia"`)
	if strings.Contains(part.body, "<html") {
		t.Errorf("the table alone came with the layout:\n%s", part.body)
	}
	s.get(t, "/requests?status=failed").must(t, "requests, failed only", http.StatusOK, "No requests match these filters")
	s.get(t, "/requests?kind=plan&session=default").must(t, "requests, by kind and session", http.StatusOK, `data-request="dia"`)

	s.get(t, "/requests/dia").must(t, "request", http.StatusOK, `<a href="/plans/dia-1" id="plan-link">dia-1</a>`,
		`data-ended="true"`, `<span class="badge st-succeeded">succeeded</span>`)

	pl := s.get(t, "/plans/dia-1")
	pl.must(t, "plan", http.StatusOK, "<svg", `id="t/A"`, `id="t/D"`, `id="e/A/B"`, `id="e/C/D"`, `class="node tool"`,
		`data-tool="A" data-state="succeeded"`, `data-tool="D" data-state="succeeded"`, `data-plan="dia-1" data-state="succeeded"`)
	// The critical path runs from A through one of the sleeps to D.
	crit := regexp.MustCompile(`data-tool="([A-D])" data-state="succeeded" data-critical="(\d)"`).FindAllStringSubmatch(pl.body, -1)
	var path []string
	for _, m := range crit {
		path = append(path, m[2]+m[1])
	}
	if got := strings.Join(path, " "); got != "1A 2B 3D" && got != "1A 2C 3D" && got != "1A 3D 2C" {
		t.Errorf("critical path %q, want A, B or C, D", got)
	}

	panel := s.get(t, "/plans/dia-1/tools/D?partial=1")
	panel.must(t, "tool D", http.StatusOK, `data-tool="D"`, "Lisbon", "sleptMs", "Attempts", `class="worker"`)
	if strings.Contains(panel.body, "<html") {
		t.Errorf("the panel alone came with the layout")
	}
	s.get(t, "/plans/dia-1/tools/B").must(t, "tool B's page", http.StatusOK, "<html", `&#34;ms&#34;: 200`, "← plan dia-1")

	s.get(t, "/skills").must(t, "skills", http.StatusOK, `data-skill="echo" data-health="healthy"`, `data-skill="sleep"`, "<code>",
		`data-skill="words"`, "<summary>input schema</summary>", "<summary>output schema</summary>", `&#34;words&#34;: {`)
	sys := s.get(t, "/system")
	sys.must(t, "system", http.StatusOK, bus.ServicePlanner, bus.ServiceDispatcher, bus.ServiceToolworker,
		"<code>"+bus.StreamTools+"</code>", `data-consumer="skill-echo"`, `data-consumer="dispatcher-results"`, "and its 8 partitions", "planbus.invoke.echo")
	if strings.Contains(sys.body, "None answers") {
		t.Errorf("a service has no instance on the system page:\n%s", sys.body)
	}
}

// A failed tool's error is on its row's state, its panel and the
// request's outcome; the optional failure and the skipped dependent too.
func TestFailedToolErrorIsShown(t *testing.T) {
	s := start(t, web.Config{})
	o := s.run(t, withID(t, readPlan(t, "required-failure.json"), "rf"))
	if o.Success {
		t.Fatalf("outcome %+v, want a failure", o)
	}
	pl := s.get(t, "/plans/rf-1")
	pl.must(t, "plan", http.StatusOK, `data-tool="B" data-state="failed"`, `data-tool="C" data-state="skipped"`, `data-tool="O" data-state="failed"`,
		`id="plan-error"`)
	s.get(t, "/plans/rf-1/tools/B?partial=1").must(t, "tool B", http.StatusOK, `class="error tool-error"`, "the bridge is out", "permanent")
	s.get(t, "/plans/rf-1/tools/C?partial=1").must(t, "tool C", http.StatusOK, "dependency")
	req := s.get(t, "/requests/rf")
	req.must(t, "request", http.StatusOK, `id="outcome"`, "the bridge is out", string(o.Error.Code))
	if o.Fallback {
		req.must(t, "request", http.StatusOK, `id="fallback"`, html.EscapeString(o.Narrative))
	}
	s.get(t, "/skills").must(t, "skills", http.StatusOK, `data-skill="fail"`)
}

// The plan's stream: a snapshot, then each tool's changes as they
// happen, the critical path, and the end.
func TestPlanEventsFollowARun(t *testing.T) {
	s := start(t, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	doc := []byte(`{"planId": "live", "tools": [
		{"toolId": "A", "skill": "echo"},
		{"toolId": "B", "skill": "sleep", "dependencies": ["A"], "input": {"ms": 600}},
		{"toolId": "C", "skill": "echo", "dependencies": ["B"]}]}`)
	started := make(chan struct{})
	go func() {
		_, _ = s.cl.RunPlan(ctx, doc, func(ev planbus.Event) {
			if ev.Type == planbus.EventToolStarted && ev.ToolID == "B" {
				close(started)
			}
		})
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("B never started")
	}
	events, resp := s.openStream(t, ctx, "/plans/live-1/events")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	var names []string
	states := map[string]planbus.ToolState{}
	var end string
	for ev := range events {
		names = append(names, ev.name)
		switch ev.name {
		case "snapshot":
			var sn struct {
				Tools []struct {
					ID    string
					State planbus.ToolState
				}
			}
			if err := json.Unmarshal([]byte(ev.data), &sn); err != nil {
				t.Fatal(err)
			}
			for _, tl := range sn.Tools {
				states[tl.ID] = tl.State
			}
		case "tool":
			var tl struct {
				ID    string
				State planbus.ToolState
			}
			if err := json.Unmarshal([]byte(ev.data), &tl); err != nil {
				t.Fatal(err)
			}
			states[tl.ID] = tl.State
		case "end":
			end = ev.data
		}
	}
	if len(names) == 0 || names[0] != "snapshot" {
		t.Fatalf("events %v: want a snapshot first", names)
	}
	if !strings.Contains(strings.Join(names, " "), "tool") {
		t.Errorf("events %v: no tool change while B ran", names)
	}
	if end != `{"state":"succeeded"}` {
		t.Errorf("end %q, events %v; want the plan to end succeeded", end, names)
	}
	for _, id := range []string{"A", "B", "C"} {
		if states[id] != planbus.ToolSucceeded {
			t.Errorf("tool %s: %q at the end, want succeeded", id, states[id])
		}
	}

	// A plan that has ended: its snapshot and done.
	events, _ = s.openStream(t, ctx, "/plans/live-1/events")
	var got []string
	for ev := range events {
		got = append(got, ev.name)
	}
	if strings.Join(got, " ") != "snapshot done" {
		t.Errorf("events of an ended plan %v, want snapshot done", got)
	}
	if p := s.get(t, "/plans/nothing/events"); p.code != http.StatusNotFound {
		t.Errorf("stream of no plan: %d, want 404", p.code)
	}
}

// The requests' stream says "changed" when a request is accepted.
func TestChangesStream(t *testing.T) {
	s := start(t, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	events, _ := s.openStream(t, ctx, "/events")
	mine, _ := s.openStream(t, ctx, "/events?request=chg")
	// The streams subscribe before they answer; a request accepted now
	// is seen by both.
	if _, err := s.cl.SubmitPlanJSON(ctx, []byte(`{"planId": "chg", "tools": [{"toolId": "A", "skill": "echo"}]}`)); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan sseEvent{events, mine} {
		select {
		case ev := <-ch:
			if ev.name != "changed" {
				t.Errorf("event %q, want changed", ev.name)
			}
		case <-ctx.Done():
			t.Fatal("no change seen")
		}
	}
	if p := s.get(t, "/events?request=no%20t"); p.code != http.StatusBadRequest {
		t.Errorf("a bad request id: %d, want 400", p.code)
	}
}

// Cancel from the plan's page: refused without the page's CSRF token,
// done with it.
func TestCancelNeedsTheCSRFToken(t *testing.T) {
	s := start(t, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := s.cl.SubmitPlanJSON(ctx, []byte(`{"planId": "long", "tools": [{"toolId": "S", "skill": "sleep", "input": {"ms": 30000}}]}`)); err != nil {
		t.Fatal(err)
	}
	s.waitStarted(t, ctx, "long", "S")
	pl := s.get(t, "/plans/long-1")
	pl.must(t, "plan", http.StatusOK, `action="/requests/long/cancel"`, `data-tool="S" data-state="running"`)
	token := pl.csrf(t)

	s.post(t, "/requests/long/cancel", url.Values{"reason": {"no token"}}).must(t, "cancel without a token", http.StatusForbidden, "CSRF")
	s.post(t, "/requests/long/cancel", url.Values{"csrf": {"forged"}}).must(t, "cancel with a forged token", http.StatusForbidden)
	s.do(t, http.MethodPost, "/requests/long/cancel", strings.NewReader(url.Values{"csrf": {token}}.Encode()), http.Header{
		"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://elsewhere.example"},
	}).must(t, "cancel from another site", http.StatusForbidden)
	if st, err := s.cl.Status(ctx, "long"); err != nil || st.Request.Ended() {
		t.Fatalf("a refused cancel changed the request: %+v %v", st, err)
	}
	s.post(t, "/requests/long/cancel", url.Values{"csrf": {strings.Repeat("x", 10)}, "reason": {strings.Repeat("r", 2000)}}).
		must(t, "cancel with a bad token and a long reason", http.StatusForbidden)
	s.post(t, "/requests/long/cancel", url.Values{"csrf": {token}, "reason": {strings.Repeat("r", 1025)}}).
		must(t, "cancel with a long reason", http.StatusBadRequest, "1025 characters")

	done := s.post(t, "/requests/long/cancel", url.Values{"csrf": {token}, "back": {"/plans/long-1"}, "reason": {"enough"}})
	done.must(t, "cancel", http.StatusSeeOther)
	if loc := done.hdr.Get("Location"); !strings.HasPrefix(loc, "/plans/long-1?notice=") {
		t.Errorf("after the cancel: to %q, want back to the plan", loc)
	}
	o, err := s.cl.Await(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != planbus.StatusCancelled {
		t.Errorf("outcome %s, want cancelled", o.Status)
	}
	s.get(t, "/plans/long-1").must(t, "plan", http.StatusOK, `data-tool="S" data-state="cancelled"`)
	s.post(t, "/requests/nothing/cancel", url.Values{"csrf": {token}}).must(t, "cancel of nothing", http.StatusNotFound)
}

// The submit form: a plan runs and its request's page is next; what is
// not a valid document is refused with the reason, and nothing runs.
func TestSubmitForm(t *testing.T) {
	s := start(t, web.Config{})
	form := s.get(t, "/submit")
	form.must(t, "submit", http.StatusOK, `<textarea name="document"`)
	token := form.csrf(t)
	ok := s.post(t, "/submit", url.Values{"csrf": {token}, "document": {string(withID(t, readPlan(t, "diamond.json"), "sub"))}})
	ok.must(t, "submit a plan", http.StatusSeeOther)
	if loc := ok.hdr.Get("Location"); loc != "/requests/sub" {
		t.Errorf("after the submit: to %q, want /requests/sub", loc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if o, err := s.cl.Await(ctx, "sub"); err != nil || !o.Success {
		t.Fatalf("the submitted plan: %+v %v", o, err)
	}
	req := s.post(t, "/submit", url.Values{"csrf": {token}, "document": {`{"kind": "plan", "requestId": "subreq", "plan": {"tools": [{"toolId": "a", "skill": "echo"}]}}`}})
	req.must(t, "submit a request", http.StatusSeeOther)

	cases := []struct {
		name, doc string
		code      int
		want      string
	}{
		{"not JSON", `{"tools": [`, http.StatusBadRequest, "not a JSON object"},
		{"not an object", `[1, 2]`, http.StatusBadRequest, "not a JSON object"},
		{"a cycle", `{"planId": "cyc", "tools": [{"toolId": "a", "skill": "echo", "dependencies": ["b"]}, {"toolId": "b", "skill": "echo", "dependencies": ["a"]}]}`,
			http.StatusUnprocessableEntity, "cycle"},
		{"an unknown skill", `{"planId": "unk", "tools": [{"toolId": "a", "skill": "nosuch"}]}`, http.StatusUnprocessableEntity, "nosuch"},
		{"a request of no kind known", `{"kind": "magic"}`, http.StatusUnprocessableEntity, "kind"},
	}
	for _, tc := range cases {
		p := s.post(t, "/submit", url.Values{"csrf": {token}, "document": {tc.doc}})
		p.must(t, tc.name, tc.code, `id="problem"`, tc.want)
		if !strings.Contains(p.body, "<textarea") {
			t.Errorf("%s: the form is not shown again with the document", tc.name)
		}
	}
	for _, id := range []string{"cyc", "unk"} {
		if _, err := s.cl.Status(ctx, id); err == nil {
			t.Errorf("refused document %s was accepted", id)
		}
	}
	s.post(t, "/submit", url.Values{"document": {`{"tools": []}`}}).must(t, "submit without a token", http.StatusForbidden)
}

// Bad addresses get an error naming what was wrong; nothing found is 404.
// (A view without approvals answers 404 on their routes.)
func TestBadInputGetsAnError(t *testing.T) {
	s := start(t, web.Config{NoApprovals: true})
	s.run(t, withID(t, readPlan(t, "diamond.json"), "bad"))
	cases := []struct {
		path string
		code int
		want string
	}{
		{"/plans/no%20such", http.StatusBadRequest, "is not a plan id"},
		{"/plans/unknown", http.StatusNotFound, "unknown"},
		{"/plans/bad-1/tools/Z", http.StatusNotFound, `no tool &#34;Z&#34;`},
		{"/plans/bad-1/tools/a%2Fb", http.StatusBadRequest, "tool id"},
		{"/requests/%3Cscript%3E", http.StatusBadRequest, "&lt;script&gt;"},
		{"/requests/unknown", http.StatusNotFound, "unknown"},
		{"/requests?status=bogus", http.StatusBadRequest, `status &#34;bogus&#34;`},
		{"/requests?kind=bogus", http.StatusBadRequest, "kind"},
		{"/requests?limit=0", http.StatusBadRequest, "limit"},
		{"/requests?session=a.b", http.StatusBadRequest, "session"},
		{"/skills?session=a%20b", http.StatusBadRequest, "session"},
		{"/plans/bad-1/tools/A/approve", http.StatusMethodNotAllowed, ""},
		{"/nothing", http.StatusNotFound, ""},
	}
	for _, tc := range cases {
		s.get(t, tc.path).must(t, tc.path, tc.code, tc.want)
	}
	s.post(t, "/plans/bad-1/tools/A/approve", url.Values{}).must(t, "approve without approvals", http.StatusNotFound, "no approvals")
}

// approvals is a hook of the tests: tool W of any plan waits.
type approvals struct{ decided chan string }

func (a *approvals) Waiting(_ context.Context, _, toolID string) (bool, error) {
	return toolID == "S", nil
}
func (a *approvals) Decide(_ context.Context, planID, toolID string, approve bool, reason string) error {
	a.decided <- fmt.Sprintf("%s/%s %v %s", planID, toolID, approve, reason)
	return nil
}

// The approval hook: a waiting tool's panel has Approve and Reject, which
// post the decision with the CSRF token.
func TestApprovalHook(t *testing.T) {
	ap := &approvals{decided: make(chan string, 1)}
	s := start(t, web.Config{Approvals: ap})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := s.cl.SubmitPlanJSON(ctx, []byte(`{"planId": "ap", "tools": [{"toolId": "S", "skill": "sleep", "input": {"ms": 30000}}]}`)); err != nil {
		t.Fatal(err)
	}
	s.waitStarted(t, ctx, "ap", "S")
	panel := s.get(t, "/plans/ap-1/tools/S?partial=1")
	panel.must(t, "panel", http.StatusOK, `action="/plans/ap-1/tools/S/approve"`, `action="/plans/ap-1/tools/S/reject"`)
	s.post(t, "/plans/ap-1/tools/S/reject", url.Values{"reason": {"no"}}).must(t, "reject without a token", http.StatusForbidden)
	s.post(t, "/plans/ap-1/tools/S/reject", url.Values{"csrf": {panel.csrf(t)}, "reason": {"no"}}).must(t, "reject", http.StatusSeeOther)
	if got := <-ap.decided; got != "ap-1/S false no" {
		t.Errorf("decision %q, want ap-1/S false no", got)
	}
	if _, err := s.cl.Cancel(ctx, "ap", ""); err != nil {
		t.Fatal(err)
	}
}

// By default the view decides through the planner's endpoint, as
// `planner approve` does: a tool that waits for a person shows Approve
// and Reject, and Approve lets the plan go on.
func TestClientApprovals(t *testing.T) {
	s := start(t, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	waiting := make(chan struct{})
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		var once sync.Once
		_, _ = s.cl.Watch(wctx, "rel", func(ev planbus.Event) {
			if ev.Type == planbus.EventToolWaiting && ev.ToolID == "deploy" {
				once.Do(func() { close(waiting) })
			}
		})
	}()
	if _, err := s.cl.SubmitPlanJSON(ctx, []byte(`{"planId": "rel", "tools": [
		{"toolId": "build", "skill": "echo", "input": {"v": 1}},
		{"toolId": "deploy", "skill": "echo", "dependencies": ["build"], "approval": {"prompt": "Deploy?"}}]}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("deploy never waited for approval")
	}
	panel := s.get(t, "/plans/rel-1/tools/deploy?partial=1")
	panel.must(t, "panel", http.StatusOK, `action="/plans/rel-1/tools/deploy/approve"`, `action="/plans/rel-1/tools/deploy/reject"`)
	s.post(t, "/plans/rel-1/tools/deploy/approve", url.Values{}).must(t, "approve without a token", http.StatusForbidden)
	s.post(t, "/plans/rel-1/tools/deploy/approve", url.Values{"csrf": {panel.csrf(t)}}).must(t, "approve", http.StatusSeeOther)
	out, err := s.cl.Await(ctx, "rel")
	if err != nil || !out.Success {
		t.Fatalf("after approval: %v %+v, want the plan to succeed", err, out)
	}
}

// The page of what waits for approval links to the waiting tool; the
// requests page filters by text and time and pages on; the schedules page
// lists a schedule and pauses, resumes and removes it.
func TestWaitingSchedulesAndFilters(t *testing.T) {
	s := start(t, web.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.cl.SubmitPlanJSON(ctx, []byte(`{"planId": "gate", "description": "ship the deploy", "tools": [
		{"toolId": "deploy", "skill": "echo", "approval": {"prompt": "Deploy?"}}]}`)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"other-1", "other-2"} {
		if _, err := s.cl.SubmitPlanJSON(ctx, []byte(`{"planId": "`+id+`", "description": "nightly report", "tools": [{"toolId": "a", "skill": "echo"}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	bustest.Eventually(t, time.Minute, "gate waits for approval", func() (bool, string) {
		p := s.get(t, "/requests?waiting=1")
		return strings.Contains(p.body, `href="/plans/gate-1/tools/deploy"`), p.body
	})
	s.get(t, "/requests?waiting=1").must(t, "what waits", http.StatusOK, "Waiting for approval", `data-request="gate"`)
	if p := s.get(t, "/requests?waiting=1"); strings.Contains(p.body, `data-request="other-1"`) {
		t.Errorf("a request that does not wait is listed among those that do")
	}
	found := s.get(t, "/requests?text=DEPLOY&since=1h")
	found.must(t, "text filter", http.StatusOK, `data-request="gate"`)
	if strings.Contains(found.body, `data-request="other-`) {
		t.Errorf("the text filter let the nightly reports through")
	}
	s.get(t, "/requests?since=yesterday").must(t, "a bad since", http.StatusBadRequest, "since")
	first := s.get(t, "/requests?limit=1")
	first.must(t, "one a page", http.StatusOK, `id="older"`)
	m := regexp.MustCompile(`<a href="(/requests\?[^"]*before=\d+[^"]*)">Older requests`).FindStringSubmatch(first.body)
	if m == nil {
		t.Fatalf("no link to older requests:\n%s", first.body)
	}
	older := s.get(t, html.UnescapeString(m[1]))
	older.must(t, "the older page", http.StatusOK)
	rows := regexp.MustCompile(`<tr data-request="([^"]+)"`)
	firstRows, olderRows := rows.FindAllStringSubmatch(first.body, -1), rows.FindAllStringSubmatch(older.body, -1)
	if len(firstRows) != 1 || len(olderRows) != 1 || firstRows[0][1] == olderRows[0][1] {
		t.Errorf("pages of one: %v then %v; want one request each, not the same", firstRows, olderRows)
	}

	if _, err := s.cl.AddSchedule(ctx, planbus.ScheduleSpec{Name: "nightly", Cron: "0 0 2 * * *", TimeZone: "Europe/Lisbon",
		Request: []byte(`{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`)}); err != nil {
		t.Fatal(err)
	}
	list := s.get(t, "/schedules")
	list.must(t, "schedules", http.StatusOK, `data-schedule="nightly" data-paused="false"`, "0 0 2 * * *", "Europe/Lisbon", `action="/schedules/nightly/pause"`)
	s.post(t, "/schedules/nightly/pause", url.Values{"csrf": {"forged"}}).must(t, "pause with a forged token", http.StatusForbidden)
	s.post(t, "/schedules/nightly/pause", url.Values{"csrf": {list.csrf(t)}}).must(t, "pause", http.StatusSeeOther)
	s.get(t, "/schedules").must(t, "paused", http.StatusOK, `data-paused="true"`, `action="/schedules/nightly/resume"`)
	s.post(t, "/schedules/nightly/sideways", url.Values{"csrf": {list.csrf(t)}}).must(t, "an unknown action", http.StatusNotFound)
	s.post(t, "/schedules/nightly/rm", url.Values{"csrf": {list.csrf(t)}}).must(t, "remove", http.StatusSeeOther)
	s.get(t, "/schedules").must(t, "removed", http.StatusOK, "No schedules")
}

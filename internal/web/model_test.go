package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

func diamond() *planDef {
	return &planDef{PlanID: "p", RequestID: "r", Tools: []toolDef{
		{ToolID: "A", Skill: "echo"},
		{ToolID: "B", Skill: "sleep", Dependencies: []string{"A"}, RetryPolicy: &planbus.RetryPolicy{MaxAttempts: 3}},
		{ToolID: "C", Skill: "sleep", Dependencies: []string{"A"}},
		{ToolID: "D", Skill: "echo", Dependencies: []string{"B", "C"}},
	}}
}

// The model only moves tools forward: events read back after the state
// they led to change nothing, a retry's next attempt does.
func TestModelMovesForwardOnly(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	m := newModel(diamond())
	m.applyStatus(&client.PlanStatus{PlanID: "p", State: planbus.PlanRunning, Tools: []client.ToolStatus{
		{ToolID: "A", State: planbus.ToolSucceeded, Attempt: 1, At: at(50)},
		{ToolID: "B", State: planbus.ToolRunning, Attempt: 2, At: at(300)},
		{ToolID: "C", State: planbus.ToolRunning, Attempt: 1, At: at(60)},
		{ToolID: "D", State: planbus.ToolPending},
	}})
	evs := []planbus.Event{
		{Type: planbus.EventPlanStarted, Time: at(0), PlanID: "p"},
		{Type: planbus.EventToolReleased, Time: at(1), PlanID: "p", ToolID: "A", Attempt: 1},
		{Type: planbus.EventToolStarted, Time: at(2), PlanID: "p", ToolID: "A", Attempt: 1, WorkerID: "w1"},
		{Type: planbus.EventToolSucceeded, Time: at(50), PlanID: "p", ToolID: "A", Attempt: 1, WorkerID: "w1", DurationMs: 48},
		{Type: planbus.EventToolReleased, Time: at(51), PlanID: "p", ToolID: "B", Attempt: 1},
		{Type: planbus.EventToolRetrying, Time: at(200), PlanID: "p", ToolID: "B", Attempt: 1, DelayMs: 100,
			Error: &planbus.ErrorInfo{Code: "X", Message: "flaky", Category: "transient"}},
		{Type: planbus.EventToolReleased, Time: at(300), PlanID: "p", ToolID: "B", Attempt: 2},
		{Type: planbus.EventToolStarted, Time: at(301), PlanID: "p", ToolID: "B", Attempt: 2, WorkerID: "w2"},
		{Type: planbus.EventToolSucceeded, Time: at(900), PlanID: "other", ToolID: "B", Attempt: 2}, // another plan's
	}
	for _, ev := range evs {
		m.apply(ev)
		if a := m.tool("A"); a.State != planbus.ToolSucceeded {
			t.Errorf("%s of A (attempt %d) moved A back to %s", ev.Type, ev.Attempt, a.State)
		}
	}
	a, b := m.tool("A"), m.tool("B")
	if a.State != planbus.ToolSucceeded || a.WorkerID != "w1" || a.DurationMs != 48 || !a.FirstAt.Equal(at(1)) {
		t.Errorf("A: %+v", a)
	}
	if b.State != planbus.ToolRunning || b.Attempt != 2 || b.WorkerID != "w2" || len(b.Attempts) != 2 {
		t.Fatalf("B: state %s attempt %d worker %s attempts %d, want running 2 w2 2", b.State, b.Attempt, b.WorkerID, len(b.Attempts))
	}
	if first := b.Attempts[0]; first.State != planbus.ToolFailed || first.Error.Message != "flaky" || first.DelayMs != 100 {
		t.Errorf("B's first attempt: %+v", first)
	}
	// B has run for 849 ms at 900, C for 840: B's branch is critical.
	if got := m.critical(at(900)); !slices.Equal(got, []string{"A", "B", "D"}) {
		t.Errorf("critical path %v, want A B D", got)
	}

	changed, planChanged := m.apply(planbus.Event{Type: planbus.EventToolSucceeded, Time: at(950), PlanID: "p", ToolID: "B", Attempt: 2, DurationMs: 640})
	if changed != b || planChanged || b.State != planbus.ToolSucceeded || !b.EndedAt.Equal(at(950)) {
		t.Errorf("B's success: changed %v, B %+v", changed, b)
	}
	out, _ := json.Marshal(map[string]string{"city": "Lisbon"})
	m.applyExecution(&planbus.ExecutionResult{PlanID: "p", State: planbus.PlanSucceeded, Success: true, FinishedAt: at(1000), Tools: []planbus.ToolOutcome{
		{ToolID: "D", Skill: "echo", State: planbus.ToolSucceeded, Attempts: 1, Output: out, WorkerID: "w1", DurationMs: 3,
			StartedAt: at(960), FinishedAt: at(990)},
	}})
	if d := m.tool("D"); d.State != planbus.ToolSucceeded || string(d.Output) != string(out) || d.span(at(5000)) != 30*time.Millisecond {
		t.Errorf("D after the execution result: %+v (span %s)", d, d.span(at(5000)))
	}
	if m.State != planbus.PlanSucceeded || !planEnded(m.State) {
		t.Errorf("plan %s, want succeeded", m.State)
	}
	// An event of the run read back after the end changes nothing.
	if changed, planChanged := m.apply(planbus.Event{Type: planbus.EventPlanStarted, Time: at(0), PlanID: "p"}); changed != nil || planChanged || m.State != planbus.PlanSucceeded {
		t.Errorf("plan.started after the end moved the plan to %s", m.State)
	}
}

// The drawing: each tool's node and each dependency's edge has the id the
// page's script finds it by, whatever characters the schema allows in a
// tool id.
func TestDrawing(t *testing.T) {
	def := &planDef{PlanID: "d", Tools: []toolDef{{ToolID: "a.b:c-d_e", Skill: "echo"}, {ToolID: "z", Skill: "sleep", Dependencies: []string{"a.b:c-d_e"}}}}
	r := newRenderer(1)
	svg, err := r.svg(newModel(def))
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, want := range []string{`<svg`, `id="t/a.b:c-d_e"`, `id="t/z"`, `id="e/a.b:c-d_e/z"`, `class="node tool"`, `class="edge dep"`} {
		if !strings.Contains(s, want) {
			t.Errorf("no %s in\n%s", want, s)
		}
	}
	if !strings.HasPrefix(s, "<svg") {
		t.Errorf("the drawing starts with %.40q, want <svg", s)
	}
	again, _ := r.svg(newModel(def))
	if &again[0] != &svg[0] {
		t.Errorf("a plan was drawn twice")
	}
	other, err := r.svg(newModel(&planDef{PlanID: "e", Tools: []toolDef{{ToolID: "x", Skill: "echo"}}}))
	if err != nil || !strings.Contains(string(other), `id="t/x"`) {
		t.Fatalf("another plan: %v", err)
	}
	if len(r.cache) != 1 {
		t.Errorf("%d drawings kept, want 1 (the cache's size)", len(r.cache))
	}
	hostile := &planDef{PlanID: "h", Tools: []toolDef{{ToolID: `<script>alert(1)</script>`, Skill: "echo"}}}
	if svg, err := r.svg(newModel(hostile)); err == nil || !strings.Contains(err.Error(), "<script>") {
		t.Errorf("a tool id the schema refuses was drawn: %s (%v)", svg, err)
	}
}

// After the login, the view only sends a visitor to one of its own
// pages.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/requests", "//evil.example", "/\\evil.example", "https://evil.example", "", "/plans/x?y=1", "javascript:alert(1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.HasPrefix(got, "/\\") {
			t.Fatalf("safeNext(%q) = %q: not a path of this view", next, got)
		}
		if got != next && got != "/requests" {
			t.Fatalf("safeNext(%q) = %q: changed, not replaced", next, got)
		}
	})
}

// The requests page's filters: whatever the query, an error or filters
// the planner's list endpoint takes.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"", "status=failed&kind=plan&session=s1&limit=10", "limit=0", "limit=99999999999999999999", "session=a.b", "status=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := &http.Request{URL: &url.URL{RawQuery: raw}}
		q, kind, err := listQuery(r)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > 1000 || (q.Status != "" && !slices.Contains(requestStatuses, q.Status)) ||
			(q.SessionID != "" && !idPattern.MatchString(q.SessionID)) || (kind != "" && !slices.Contains(requestKinds, kind)) {
			t.Fatalf("%q: accepted %+v kind %q", raw, q, kind)
		}
	})
}

// The names the view checks without regexp, against the schemas' patterns.
func FuzzNamePattern(f *testing.F) {
	for _, s := range []string{"", "a", "plan-1", "t.b:c-d_e", strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("y", 128),
		strings.Repeat("y", 129), "a b", "é", "a/b", "\x00", "a\n"} {
		f.Add(s)
	}
	patterns := []struct {
		p  interface{ MatchString(string) bool }
		re *regexp.Regexp
	}{
		{idPattern, regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)},
		{toolIDPattern, regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)},
		{skillPattern, regexp.MustCompile(`^([A-Za-z0-9_-]{1,64}\.)?[A-Za-z0-9_-]{1,64}$`)},
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range patterns {
			if got, want := c.p.MatchString(s), c.re.MatchString(s); got != want {
				t.Fatalf("%+v.MatchString(%q) = %v, %s says %v", c.p, s, got, c.re, want)
			}
		}
	})
}

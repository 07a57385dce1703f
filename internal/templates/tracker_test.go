package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ok(step, output string) Result {
	return Result{Step: step, Succeeded: true, Output: json.RawMessage(output)}
}

func failed(step, why string, retryable bool) Result {
	return Result{Step: step, Error: why, Retryable: retryable}
}

func track(t *testing.T, l *Library, id string, vars map[string]string) *Tracker {
	t.Helper()
	tmpl, found := l.Template(id)
	if !found {
		t.Fatalf("no template %s", id)
	}
	in, err := Instantiate(tmpl, vars)
	if err != nil {
		t.Fatal(err)
	}
	return NewTracker(in, t0)
}

// TestTrackerGolden plays results into trackers and records, after each,
// the decision and the summary.
func TestTrackerGolden(t *testing.T) {
	l := starter(t)
	extra := mustDecode(t, lib(`{"id":"deploy","name":"Deploy","steps":[
			{"id":"build","skill":"shell","input":{"argv":["make"]},"verify":{"type":"exitCode"},"onFail":{"retries":2,"backoffMs":50,"then":"fallback","plan":"rollback"}},
			{"id":"ship","skill":"echo"}]}`,
		`{"id":"rollback","name":"Rollback","steps":[{"id":"undo","skill":"echo"}]}`))
	shell := func(stdout, stderr string) string {
		b, _ := json.Marshal(map[string]any{"exitCode": 0, "stdout": stdout, "stderr": stderr})
		return string(b)
	}
	scenarios := []struct {
		name    string
		lib     *Library
		id      string
		results []Result
	}{
		{"feature_branch_abort", l, "git_feature_branch", []Result{
			ok("status", shell("## main...origin/main\n M login.go\n", "")),
			ok("branch", shell("", "Switched to a new branch 'feature/login'\n")),
			ok("stage", shell("", "")),
		}},
		{"feature_branch_done", l, "git_feature_branch", []Result{
			ok("status", shell("## main\n M login.go\n", "")),
			ok("branch", shell("", "Switched to a new branch 'feature/login'\n")),
			ok("stage", shell("add 'login.go'\n", "")),
			ok("commit", shell("[feature/login 1a2b3c4] Work in progress\n 1 file changed\n", "")),
			failed("push", "TOOL_TIMEOUT: no answer in 60s", true),
			ok("push", shell("", "branch 'feature/login' set up to track 'origin/feature/login'.\n")),
		}},
		{"logs_fallback_and_dag", l, "log_investigation", []Result{
			ok("locate", shell("-- No entries --\n", "")),
			ok("locate", shell("2026-01-02T03:00:00+0000 web nginx[1]: connect() failed\n", "")),
			ok("filter", shell("2026-01-02T03:00:00+0000 web nginx[1]: connect() failed\n", "")),
			failed("trace", "EXIT_NONZERO: grep exited with code 2", false),
			ok("identify", shell("1\tconnect() failed\n", "")),
			ok("report", `{"investigations":{"nginx":{}}}`),
		}},
		{"bugfix_skip_then_abort", l, "bugfix_workflow", []Result{
			failed("reproduce", "EXIT_NONZERO: go exited with code 1: --- FAIL: TestLogin", true),
			ok("isolate", shell("./internal/auth/login_test.go:12:func TestLogin(t *testing.T) {\n", "")),
			ok("fix", shell("", "Applied patch internal/auth/login.go cleanly.\n")),
			ok("test", shell("ok  \texample.com/app/internal/auth\t0.01s [no tests to run]\n", "")),
		}},
		{"retries_then_fallback_plan", extra, "deploy", []Result{
			ok("build", `{"exitCode":2}`),
			failed("build", "EXIT_NONZERO: make exited with code 2", true),
			ok("build", `{"stdout":"no exit code"}`),
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			tr := track(t, sc.lib, sc.id, starterVars[sc.id])
			var b strings.Builder
			fmt.Fprintf(&b, "== start\n%s\n", tr.Summary())
			for i, r := range sc.results {
				r.At = t0.Add(time.Duration(i+1) * time.Minute)
				d, err := tr.Observe(r)
				if err != nil {
					t.Fatalf("result %d (%s): %v", i+1, r.Step, err)
				}
				what := "succeeded"
				if !r.Succeeded {
					what = "failed: " + r.Error
				}
				fmt.Fprintf(&b, "\n== %s %s\n-> %s", r.Step, what, d.Action)
				if d.Step != "" || d.Plan != "" {
					fmt.Fprintf(&b, " step=%q plan=%q", d.Step, d.Plan)
				}
				if d.DelayMs > 0 {
					fmt.Fprintf(&b, " after %dms", d.DelayMs)
				}
				fmt.Fprintf(&b, ": %s\n%s\n", d.Reason, tr.Summary())
			}
			golden(t, filepath.Join("tracker", sc.name+".txt"), []byte(b.String()))
		})
	}
}

func TestTrackerStates(t *testing.T) {
	tr := track(t, starter(t), "log_investigation", map[string]string{"unit": "nginx"})
	if got := tr.Next(); !cmp.Equal(got, []string{"locate"}) {
		t.Errorf("Next = %v", got)
	}
	if _, err := tr.Observe(ok("filter", `{}`)); !errors.Is(err, ErrNotReady) {
		t.Errorf("filter before locate: %v", err)
	}
	if _, err := tr.Observe(ok("locate_file", `{}`)); !errors.Is(err, ErrUnknownStep) {
		t.Errorf("a fallback step's own id: %v", err)
	}
	before := tr.State()
	if _, err := tr.Observe(ok("nope", `{}`)); !errors.Is(err, ErrUnknownStep) {
		t.Errorf("unknown step: %v", err)
	}
	if diff := cmp.Diff(before, tr.State()); diff != "" {
		t.Errorf("an error changed the state (-before +after):\n%s", diff)
	}
	for _, r := range []Result{ok("locate", `{"stdout":"x"}`), ok("filter", `{"stdout":"x"}`)} {
		if _, err := tr.Observe(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Observe(ok("locate", `{"stdout":"x"}`)); !errors.Is(err, ErrResolved) {
		t.Errorf("duplicate result: %v", err)
	}
	if got := tr.Next(); !cmp.Equal(got, []string{"identify", "trace"}) {
		t.Errorf("Next = %v, want the two steps after filter", got)
	}
	if _, err := tr.Observe(ok("trace", `{"stdout":""}`)); err != nil { // refused, then skipped
		t.Fatal(err)
	}
	if got := tr.Next(); !cmp.Equal(got, []string{"identify"}) {
		t.Errorf("Next = %v", got)
	}
	if tr.Done() {
		t.Error("done too early")
	}
	for _, r := range []Result{ok("identify", `{"stdout":"1 x"}`), ok("report", `{"investigations":{}}`)} {
		if _, err := tr.Observe(r); err != nil {
			t.Fatal(err)
		}
	}
	st := tr.State()
	if !tr.Done() || st.Status != StatusCompleted || tr.Next() != nil {
		t.Errorf("status %s, next %v", st.Status, tr.Next())
	}
	var statuses []StepStatus
	for _, s := range st.Steps {
		statuses = append(statuses, s.Status)
	}
	if want := []StepStatus{StepVerified, StepVerified, StepVerified, StepSkipped, StepVerified}; !cmp.Equal(statuses, want) {
		t.Errorf("steps %v, want %v", statuses, want)
	}
	if _, err := tr.Observe(ok("report", `{}`)); !errors.Is(err, ErrEnded) {
		t.Errorf("after the end: %v", err)
	}

	// Without a gate a success is "completed".
	plain := mustDecode(t, lib(`{"id":"p","name":"P","steps":[{"id":"a","skill":"echo"}]}`))
	tr = track(t, plain, "p", nil)
	d, err := tr.Observe(ok("a", `null`))
	if err != nil || d.Action != ActionAdvance || tr.State().Steps[0].Status != StepCompleted {
		t.Errorf("decision %+v, err %v, state %+v", d, err, tr.State().Steps[0])
	}
}

func TestStaleness(t *testing.T) {
	active := func(turns int, idle time.Duration) *State {
		return &State{Status: StatusActive, Turns: turns, ProgressAt: t0.Add(-idle)}
	}
	tests := []struct {
		name   string
		s      Staleness
		st     *State
		stale  bool
		reason string
	}{
		{"fresh", Staleness{MaxTurns: 10, MaxAgeMs: 60000}, active(0, 0), false, ""},
		{"one turn short", Staleness{MaxTurns: 10}, active(9, 0), false, ""},
		{"at max turns", Staleness{MaxTurns: 10}, active(10, 0), false, ""},
		{"past max turns", Staleness{MaxTurns: 10}, active(11, 0), true, "no progress in 11 turns, stale after 10"},
		{"turns off", Staleness{}, active(1000, 1000*time.Hour), false, ""},
		{"just young enough", Staleness{MaxAgeMs: 60000}, active(0, 59999*time.Millisecond), false, ""},
		{"max age", Staleness{MaxAgeMs: 60000}, active(0, time.Minute), true, "no progress for 1m0s (maxAgeMs 60000)"},
		{"clock behind progress", Staleness{MaxAgeMs: 60000}, active(0, -time.Hour), false, ""},
		{"turns checked first", Staleness{MaxTurns: 1, MaxAgeMs: 1}, active(2, time.Hour), true, "no progress in 2 turns, stale after 1"},
		{"completed is never stale", Staleness{MaxTurns: 1}, &State{Status: StatusCompleted, Turns: 5}, false, ""},
		{"aborted is never stale", Staleness{MaxAgeMs: 1}, &State{Status: StatusAborted, ProgressAt: t0.Add(-time.Hour)}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stale, reason := tt.s.Check(tt.st, t0)
			if stale != tt.stale || reason != tt.reason {
				t.Errorf("Check = %v, %q; want %v, %q", stale, reason, tt.stale, tt.reason)
			}
		})
	}
}

// A plan whose user moved on expires; progress resets
// the count.
func TestTrackerExpires(t *testing.T) {
	l := mustDecode(t, lib(`{"id":"p","name":"P","staleness":{"maxTurns":3,"maxAgeMs":600000},
		"steps":[{"id":"a","skill":"echo","onFail":{"retries":5}},{"id":"b","skill":"echo"}]}`))
	tr := track(t, l, "p", nil)
	for range 3 {
		tr.Turn()
	}
	if _, err := tr.Observe(failed("a", "flaky", true)); err != nil { // a retry is no progress, and no turn
		t.Fatal(err)
	}
	if stale, _ := tr.Stale(t0); stale || tr.State().Turns != 3 {
		t.Errorf("stale after 3 turns (%d counted) with maxTurns 3", tr.State().Turns)
	}
	tr.Turn()
	if stale, why := tr.Stale(t0); !stale || why != "no progress in 4 turns, stale after 3" {
		t.Errorf("after 4 turns: %v %q", stale, why)
	}
	if _, err := tr.Observe(Result{Step: "a", Succeeded: true, At: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if st := tr.State(); st.Turns != 0 || !st.ProgressAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("progress did not reset: turns %d at %v", st.Turns, st.ProgressAt)
	}
	if stale, _ := tr.Stale(t0.Add(10 * time.Minute)); stale {
		t.Error("stale 9 minutes after progress with maxAgeMs 10 minutes")
	}
	if stale, why := tr.Stale(t0.Add(11 * time.Minute)); !stale || why != "no progress for 10m0s (maxAgeMs 600000)" {
		t.Errorf("10 minutes after progress: %v %q", stale, why)
	}
	// A result without a time keeps the last progress time.
	if _, err := tr.Observe(ok("b", `1`)); err != nil {
		t.Fatal(err)
	}
	if st := tr.State(); !st.ProgressAt.Equal(t0.Add(time.Minute)) || st.Status != StatusCompleted {
		t.Errorf("state %+v", st)
	}
	tr.Turn()
	if stale, _ := tr.Stale(t0.Add(time.Hour)); stale || tr.State().Turns != 0 {
		t.Error("a completed plan went stale or counted turns")
	}
}

func TestResume(t *testing.T) {
	l := starter(t)
	tmpl, _ := l.Template("git_merge_pr")
	tr := track(t, l, "git_merge_pr", starterVars["git_merge_pr"])
	for _, r := range []Result{ok("fetch", `{"exitCode":0}`), ok("checkout", `{"stderr":"Switched to branch 'main'"}`), failed("merge", "EXIT_NONZERO", false)} {
		if _, err := tr.Observe(r); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := json.Marshal(tr.State())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatal(err)
	}
	back, err := Resume(tmpl, st)
	if err != nil {
		t.Fatal(err)
	}
	if back.Summary() != tr.Summary() {
		t.Errorf("resumed summary differs:\n%s\n---\n%s", back.Summary(), tr.Summary())
	}
	d, err := back.Observe(ok("merge", `{"exitCode":0,"stdout":"Merge made by the 'ort' strategy."}`))
	if err != nil || d.Action != ActionAdvance || back.State().Steps[2].Via != "merge_commit" {
		t.Errorf("after resume: %+v %v %+v", d, err, back.State().Steps[2])
	}

	other, _ := l.Template("git_feature_branch")
	tests := []struct {
		name   string
		tmpl   *Template
		change func(*State)
		is     error
		want   string
	}{
		{"other template", other, func(*State) {}, ErrStateMismatch, "state of git_merge_pr v1.0, template git_feature_branch v1.0"},
		{"other version", tmpl, func(s *State) { s.Version = "0.9" }, ErrStateMismatch, "state of git_merge_pr v0.9"},
		{"fewer steps", tmpl, func(s *State) { s.Steps = s.Steps[:4] }, ErrStateMismatch, "4 steps in the state, 5 in the template"},
		{"renamed step", tmpl, func(s *State) { s.Steps[1].ID = "switch" }, ErrStateMismatch, `step 2 is "switch" in the state, "checkout" in the template`},
		{"bad status", tmpl, func(s *State) { s.Status = "paused" }, ErrStateMismatch, `unknown status "paused"`},
		{"bad step status", tmpl, func(s *State) { s.Steps[0].Status = "done" }, ErrStateMismatch, `step "fetch": unknown status "done"`},
		{"bad via", tmpl, func(s *State) { s.Steps[0].Via = "merge_commit" }, ErrStateMismatch, `step "fetch": via "merge_commit", but its fallback step is ""`},
		{"negative attempts", tmpl, func(s *State) { s.Steps[0].Attempts = -1 }, ErrStateMismatch, `step "fetch": -1 attempts`},
		{"bad vars", tmpl, func(s *State) { s.Vars["branch"] = "-x" }, ErrVars, `variable "branch": "-x" does not match`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s State
			_ = json.Unmarshal(doc, &s)
			tt.change(&s)
			_, err := Resume(tt.tmpl, s)
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %v containing %q", err, tt.is, tt.want)
			}
		})
	}
}

func TestResultOf(t *testing.T) {
	at := t0.Add(time.Second)
	tests := []struct {
		in   planbus.ToolResult
		want Result
	}{
		{planbus.ToolResult{ToolID: "a", State: planbus.ToolSucceeded, Output: json.RawMessage(`{"x":1}`), FinishedAt: at},
			Result{Step: "a", Succeeded: true, Output: json.RawMessage(`{"x":1}`), Retryable: true, At: at}},
		{planbus.ToolResult{ToolID: "a", State: planbus.ToolFailed, Error: &planbus.ErrorInfo{Code: "HTTP_404", Message: "not found", Category: planbus.CategoryPermanent}},
			Result{Step: "a", Error: "HTTP_404: not found"}},
		{planbus.ToolResult{ToolID: "a", State: planbus.ToolFailed, Error: &planbus.ErrorInfo{Code: "EXIT_NONZERO", Message: "exit 1", Category: planbus.CategoryInternal}},
			Result{Step: "a", Error: "EXIT_NONZERO: exit 1", Retryable: true}},
		{planbus.ToolResult{ToolID: "a", State: planbus.ToolTimeout}, Result{Step: "a", Error: "timeout", Retryable: true}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ResultOf(&tt.in)); diff != "" {
			t.Errorf("ResultOf(%+v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

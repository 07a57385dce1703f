package plannercmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/worker"
)

// startSystem runs a planbus node on a test server and returns its URL.
func startSystem(t *testing.T) (string, *bus.Conn) {
	t.Helper()
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 2,
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{}), DrainTimeout: time.Second}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return cfg.URL, bustest.Dial(t, cfg)
}

func writeFile(t *testing.T, name, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// progressLines are the tool and plan lines of a run's progress, without
// their times, worker names and ids, sorted: what the plan did, whoever
// ran it.
func progressLines(stderr string) []string {
	time := regexp.MustCompile(`^\s*\S+\s+`)
	worker := regexp.MustCompile(`started on \S+`)
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		l = time.ReplaceAllString(l, "")
		switch {
		case strings.HasPrefix(l, "plan ") && strings.Contains(l, " started: "):
			out = append(out, "plan started")
		case strings.HasPrefix(l, "plan succeeded"), strings.HasPrefix(l, "plan failed"):
			out = append(out, strings.Fields(l)[1])
		case regexp.MustCompile(`^[A-Za-z]\s+(released|started|succeeded|failed|skipped|cancelled)`).MatchString(l):
			l = worker.ReplaceAllString(l, "started on a worker")
			l = regexp.MustCompile(` in \S+$`).ReplaceAllString(l, "")
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	slices.Sort(out)
	return out
}

// comparable is what a result shows of a plan's run, without ids and
// times.
func comparable(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	var res planbus.ExecutionResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	tools := map[string]string{}
	for _, o := range res.Tools {
		tools[o.ToolID] = strings.Join([]string{o.Skill, string(o.State), string(o.Reason), string(o.Output)}, " ")
	}
	return map[string]any{"state": res.State, "success": res.Success, "canReplan": res.CanReplan, "tools": tools,
		"failedTools": res.FailedTools}
}

// planner submit, then planner watch, shows what planner run shows of the
// same plan: the same result and exit code, the same progress; and
// planner ls --json lists the request.
func TestSubmitThenWatchReproducesRun(t *testing.T) {
	url, _ := startSystem(t)
	for _, tc := range []struct {
		file string
		code int
	}{{"diamond.json", cli.ExitOK}, {"required-failure.json", cli.ExitFailed}} {
		t.Run(tc.file, func(t *testing.T) {
			file := example(t, tc.file)
			run := runPlanner(t, "run", "--nats-url", url, file)
			if run.code != tc.code {
				t.Fatalf("run exit %d, want %d; stderr:\n%s", run.code, tc.code, run.stderr)
			}
			sub := runPlanner(t, "submit", "--nats-url", url, file)
			if sub.code != cli.ExitOK {
				t.Fatalf("submit exit %d; stderr:\n%s", sub.code, sub.stderr)
			}
			id := strings.TrimSpace(sub.stdout)
			if id == "" || strings.Contains(id, "\n") {
				t.Fatalf("submit printed %q, want one requestId", sub.stdout)
			}
			watch := runPlanner(t, "watch", "--nats-url", url, id)
			if watch.code != run.code {
				t.Fatalf("watch exit %d, run exit %d; watch stderr:\n%s", watch.code, run.code, watch.stderr)
			}
			if err := schemas.Validate(schemas.ExecutionResult, []byte(lastLine(watch.stdout))); err != nil {
				t.Fatalf("watch's last line is not an execution result, as run's is: %v", err)
			}
			if got, want := comparable(t, watch.stdout), comparable(t, run.stdout); !jsonEqual(got, want) {
				t.Errorf("watch's result %v, run's %v", got, want)
			}
			if got, want := progressLines(watch.stderr), progressLines(run.stderr); !slices.Equal(got, want) || len(want) < 4 {
				t.Errorf("watch's progress %q\nrun's %q", got, want)
			}
			// Attached again after the end, watch shows the same again.
			again := runPlanner(t, "watch", "--nats-url", url, id)
			if again.code != run.code || !slices.Equal(progressLines(again.stderr), progressLines(run.stderr)) ||
				!jsonEqual(comparable(t, again.stdout), comparable(t, run.stdout)) {
				t.Errorf("watch of the ended request: exit %d, progress %q", again.code, progressLines(again.stderr))
			}

			ls := runPlanner(t, "ls", "--nats-url", url, "--json")
			if ls.code != cli.ExitOK {
				t.Fatalf("ls exit %d; stderr:\n%s", ls.code, ls.stderr)
			}
			var list planbus.ListReply
			if err := json.Unmarshal([]byte(ls.stdout), &list); err != nil {
				t.Fatalf("ls --json printed %q: %v", ls.stdout, err)
			}
			if len(list.Requests) == 0 || list.Requests[0].RequestID != id {
				t.Fatalf("ls --json %s: want %s first", ls.stdout, id)
			}
			want := map[int]planbus.RequestStatus{cli.ExitOK: planbus.StatusSucceeded, cli.ExitFailed: planbus.StatusFallback}[tc.code]
			if r := list.Requests[0]; r.Kind != "plan" || r.Status != want || r.Attempts != 1 || r.AcceptedAt.IsZero() {
				t.Errorf("listed %+v, want kind plan, status %s, 1 attempt", r, want)
			}
		})
	}
	table := runPlanner(t, "ls", "--nats-url", url, "--status", "fallback")
	lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
	if table.code != cli.ExitOK || len(lines) != 2 || !regexp.MustCompile(`^ID\s+KIND\s+STATUS\s+ATTEMPTS\s+AGE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`\s+plan\s+fallback\s+1\s+\d+s$`).MatchString(lines[1]) {
		t.Errorf("ls --status fallback: exit %d\n%s", table.code, table.stdout)
	}
	if o := runPlanner(t, "ls", "--nats-url", url, "--status", "sideways"); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--status") {
		t.Errorf("ls --status sideways: exit %d, stderr %q", o.code, o.stderr)
	}
	// The filters of the example, and a page that stops at its
	// limit says how to go on.
	// diamond.json's description says "in parallel": its submitted
	// request is found by it (what run sent straight to the dispatchers
	// is not a request).
	found := runPlanner(t, "ls", "--nats-url", url, "--since", "1h", "--text", "PARALLEL", "--kind", "plan")
	lines = strings.Split(strings.TrimSpace(found.stdout), "\n")
	if found.code != cli.ExitOK || len(lines) != 2 || !strings.Contains(lines[1], " succeeded ") {
		t.Errorf("ls --since 1h --text PARALLEL --kind plan: exit %d\n%s%s", found.code, found.stdout, found.stderr)
	}
	if o := runPlanner(t, "ls", "--nats-url", url, "--since", "1h", "--text", "PARALLEL", "--kind", "htn"); o.code != cli.ExitOK || strings.Count(o.stdout, "\n") != 1 {
		t.Errorf("ls --text PARALLEL --kind htn: exit %d\n%s", o.code, o.stdout)
	}
	// A page that stops at its limit says how to go on.
	first := runPlanner(t, "ls", "--nats-url", url, "--limit", "1")
	lines = strings.Split(strings.TrimSpace(first.stdout), "\n")
	if first.code != cli.ExitOK || len(lines) != 3 || !strings.HasPrefix(lines[2], "(more: the next page is planner ls --before ") {
		t.Fatalf("ls --limit 1: exit %d\n%s%s", first.code, first.stdout, first.stderr)
	}
	next := strings.Fields(lines[2])[8]
	page := runPlanner(t, "ls", "--nats-url", url, "--before", next, "--json")
	var rest planbus.ListReply
	if err := json.Unmarshal([]byte(page.stdout), &rest); err != nil || len(rest.Requests) != 1 || rest.More ||
		strings.Contains(first.stdout, rest.Requests[0].RequestID) {
		t.Errorf("the next page (--before %s): %s%s", next, page.stdout, page.stderr)
	}
}

// planner cancel ends a running plan of a 30 s sleep in well under its
// time: the watch that follows it ends with the outcome cancelled, the
// running tool cancelled and the one after it skipped.
func TestCancelEndsARunningSleep(t *testing.T) {
	url, conn := startSystem(t)
	file := writeFile(t, "sleep.json", `{"kind": "plan", "plan": {"tools": [
		{"toolId": "nap", "skill": "sleep", "input": {"ms": 30000}},
		{"toolId": "after", "skill": "echo", "dependencies": ["nap"]}]}}`)
	sub := runPlanner(t, "submit", "--nats-url", url, file)
	if sub.code != cli.ExitOK {
		t.Fatalf("submit exit %d; stderr:\n%s", sub.code, sub.stderr)
	}
	id := strings.TrimSpace(sub.stdout)
	watched := make(chan outcome, 1)
	go func() { watched <- runPlanner(t, "watch", "--nats-url", url, id) }()
	// Wait until the sleep runs on a worker.
	c := newClient(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		st, err := c.Status(ctx, id)
		if err == nil && st.Plan != nil && st.Plan.Tools[0].State == planbus.ToolRunning {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the sleep never ran")
		case <-time.After(20 * time.Millisecond):
		}
	}
	o := runPlanner(t, "cancel", "--nats-url", url, "--reason", "not needed", id)
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "being cancelled") {
		t.Fatalf("cancel exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	// The outcome below says it ended cancelled, not by its sleep's end.
	var w outcome
	select {
	case w = <-watched:
	case <-ctx.Done():
		t.Fatal("the request did not end after planner cancel")
	}
	if w.code != cli.ExitFailed {
		t.Errorf("watch exit %d, want 1 (cancelled); stderr:\n%s", w.code, w.stderr)
	}
	var out planbus.Outcome
	if err := json.Unmarshal([]byte(lastLine(w.stdout)), &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != planbus.StatusCancelled || out.Execution == nil || out.Execution.State != planbus.PlanCancelled {
		t.Fatalf("outcome %s, execution %+v: want cancelled", out.Status, out.Execution)
	}
	got := map[string]string{}
	for _, tl := range out.Execution.Tools {
		got[tl.ToolID] = string(tl.State) + "/" + string(tl.Reason)
	}
	if got["nap"] != "cancelled/cancelled" || got["after"] != "skipped/cancelled" {
		t.Errorf("tools %v, want nap cancelled and after skipped, reason cancelled", got)
	}
	for _, want := range []string{"plan cancelled: cancelled on request: not needed", "cancelled: cancelled after 1 attempt(s)"} {
		if !strings.Contains(w.stderr, want) {
			t.Errorf("watch's progress lacks %q:\n%s", want, w.stderr)
		}
	}
	if o := runPlanner(t, "cancel", "--nats-url", url, id); o.code != cli.ExitOK || !strings.Contains(o.stdout, "already ended (cancelled)") {
		t.Errorf("cancel again: exit %d, %q", o.code, o.stdout)
	}
	if o := runPlanner(t, "cancel", "--nats-url", url, "nosuchthing"); o.code != cli.ExitFailed || !strings.Contains(o.stderr, `"nosuchthing"`) {
		t.Errorf("cancel of nothing: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := runPlanner(t, "watch", "--nats-url", url, "nosuchthing"); o.code != cli.ExitFailed || !strings.Contains(o.stderr, "no request or plan") || !strings.Contains(o.stderr, "an agent is watched by its session's id") {
		t.Errorf("watch of nothing: exit %d, stderr %q", o.code, o.stderr)
	}
}

// submit refuses what run refuses, with exit 2 and the reason, and every
// client verb needs a running system.
func TestClientVerbsRefuseBadInput(t *testing.T) {
	url, _ := startSystem(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--nats-url", url, example(t, "cycle.json")}, "cycle: B -> C -> B"},
		{[]string{"submit", "--nats-url", url, writeFile(t, "empty.json", `{"tools":[]}`)}, "at /tools"},
		{[]string{"submit", "--nats-url", url, writeFile(t, "unknown.json", `{"tools":[{"toolId":"a","skill":"teleport"}]}`)}, `unknown skill "teleport"`},
		{[]string{"submit", "--nats-url", url, writeFile(t, "kind.json", `{"kind":"nope"}`)}, "/kind"},
		{[]string{"submit", example(t, "diamond.json")}, "--nats-url"},
		{[]string{"watch", "a.b"}, "--nats-url"},
		{[]string{"watch", "--nats-url", url, "a.b"}, "want one request or plan id"},
		{[]string{"cancel", "--nats-url", url}, "want one request or plan id"},
		{[]string{"ls", "--nats-url", url, "extra"}, "takes no arguments"},
		{[]string{"ls", "--nats-url", url, "--limit", "0"}, "--limit"},
		{[]string{"ls", "--nats-url", url, "--since", "yesterday"}, `--since "yesterday": want a duration back from now`},
		{[]string{"ls", "--nats-url", url, "--until", "-1h"}, `--until "-1h"`},
		{[]string{"ls", "--nats-url", url, "--kind", "Plan!"}, "--kind"},
		{[]string{"ls", "--nats-url", url, "--text", strings.Repeat("x", 300)}, "--text"},
		{[]string{"schedule", "add", "x", "--nats-url", url}, "want NAME --cron EXPR FILE"},
		{[]string{"schedule", "add", "x", writeFile(t, "p.json", `{"tools":[]}`), "--cron", "@hourly", "--nats-url", url}, "at /tools"},
		{[]string{"schedule", "rm", "--nats-url", url}, "want one schedule NAME"},
		{[]string{"schedule", "sideways"}, `unknown verb "sideways"`},
		{[]string{"rerun", "--nats-url", url}, "want one request or plan id"},
		{[]string{"rerun", "--nats-url", url, "x", "--id", "a.b"}, `--id "a.b"`},
	} {
		o := runPlanner(t, tc.args...)
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, o.code, o.stderr, tc.want)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// A request submitted again under its id runs nothing new: submit prints
// the id again and says on stderr that it is a duplicate.
func TestSubmitSaysDuplicate(t *testing.T) {
	url, _ := startSystem(t)
	file := filepath.Join(t.TempDir(), "req.json")
	doc := `{"kind":"plan","requestId":"dup-1","plan":{"tools":[{"toolId":"a","skill":"echo","input":{}}]}}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	first := runPlanner(t, "submit", "--nats-url", url, file)
	if first.code != cli.ExitOK || strings.TrimSpace(first.stdout) != "dup-1" || strings.Contains(first.stderr, "duplicate") {
		t.Fatalf("first submit: exit %d, stdout %q, stderr %q", first.code, first.stdout, first.stderr)
	}
	again := runPlanner(t, "submit", "--nats-url", url, file)
	if again.code != cli.ExitOK || strings.TrimSpace(again.stdout) != "dup-1" || !strings.Contains(again.stderr, "duplicate: request dup-1 was accepted before") {
		t.Fatalf("second submit: exit %d, stdout %q, stderr %q; want the id and a duplicate: line", again.code, again.stdout, again.stderr)
	}
}

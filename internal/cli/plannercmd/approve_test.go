package plannercmd

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
)

// planner watch shows a tool of examples/plans/approval.json waiting for approval, with its prompt and
// the command that approves it; planner approve releases it and the watch
// ends with the plan's success. planner approve --reject fails the next
// request's tool and the request with it. Decisions on nothing, or on
// what does not wait, exit 1; bad usage exits 2.
func TestApproveVerb(t *testing.T) {
	url, conn := startSystem(t)
	c := newClient(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	file := writeFile(t, "release.json", `{"kind": "plan", "plan": {"tools": [
		{"toolId": "build", "skill": "echo"},
		{"toolId": "deploy", "skill": "echo", "dependencies": ["build"], "approval": {"prompt": "Deploy to production?"}}]}}`)
	waiting := func(id string) {
		t.Helper()
		for {
			st, err := c.Status(ctx, id)
			if err == nil && st.Plan != nil && st.Plan.Tools[1].State == planbus.ToolWaitingApproval {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatal("deploy never waited for approval")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	submit := func(file string) string {
		t.Helper()
		sub := runPlanner(t, "submit", "--nats-url", url, file)
		if sub.code != cli.ExitOK {
			t.Fatalf("submit exit %d; stderr:\n%s", sub.code, sub.stderr)
		}
		return strings.TrimSpace(sub.stdout)
	}

	id := submit(example(t, "approval.json"))
	watched := make(chan outcome, 1)
	go func() { watched <- runPlanner(t, "watch", "--nats-url", url, id) }()
	waiting(id)
	if o := runPlanner(t, "status", "--nats-url", url, id); o.code != cli.ExitOK ||
		!strings.Contains(o.stdout, `waiting_approval`) || !strings.Contains(o.stdout, `"Deploy 1.4.2 to production?": planner approve `+id+" deploy") {
		t.Errorf("status exit %d, stdout:\n%s\nstderr: %s", o.code, o.stdout, o.stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"nosuchthing", "deploy"}, cli.ExitFailed, `"nosuchthing"`},
		{[]string{id, "nosuch"}, cli.ExitFailed, `has no tool "nosuch"`},
		{[]string{id, "build"}, cli.ExitFailed, "no approval step"},
		{[]string{id}, cli.ExitUsage, "want a request or plan id and a tool id"},
		{[]string{"--reason", strings.Repeat("x", 1025), id, "deploy"}, cli.ExitUsage, "/reason"},
	} {
		o := runPlanner(t, append([]string{"approve", "--nats-url", url}, tc.args...)...)
		if o.code != tc.code || !strings.Contains(o.stderr, tc.says) {
			t.Errorf("approve %v: exit %d, stderr %q; want %d saying %q", tc.args, o.code, o.stderr, tc.code, tc.says)
		}
	}
	if o := runPlanner(t, "approve", id, "deploy"); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--nats-url") {
		t.Errorf("approve without a system: exit %d, stderr %q", o.code, o.stderr)
	}
	o := runPlanner(t, "approve", "--nats-url", url, "--reason", "checked", id, "deploy")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "approved") {
		t.Fatalf("approve exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	w := <-watched
	if w.code != cli.ExitOK {
		t.Fatalf("watch exit %d; stderr:\n%s", w.code, w.stderr)
	}
	for _, want := range []string{"waiting for approval: Deploy 1.4.2 to production? — planner approve " + id + " deploy", "approved: checked", "plan succeeded"} {
		if !strings.Contains(w.stderr, want) {
			t.Errorf("watch's progress lacks %q:\n%s", want, w.stderr)
		}
	}

	id = submit(file)
	waiting(id)
	o = runPlanner(t, "approve", "--nats-url", url, "--reject", "--json", "--reason", "not today", id, "deploy")
	var reply planbus.ApproveReply
	if o.code != cli.ExitOK || json.Unmarshal([]byte(lastLine(o.stdout)), &reply) != nil || reply.Status != planbus.ApproveRejected {
		t.Fatalf("reject exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	out, err := c.Await(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != planbus.StatusFailed || out.Error == nil || out.Error.Code != planbus.CodeRejected {
		t.Errorf("outcome %s %+v, want failed with REJECTED", out.Status, out.Error)
	}
	if o := runPlanner(t, "approve", "--nats-url", url, id, "deploy"); o.code != cli.ExitFailed || !strings.Contains(o.stderr, "no plan running") {
		t.Errorf("approve after the end: exit %d, stderr %q", o.code, o.stderr)
	}
}

// planner run on its own private node says, in the line of a tool
// waiting for approval, how to reach that node; the command it shows
// approves the tool and the run ends with the plan's success.
func TestRunShowsHowToApprove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var stdout, stderr bustest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"run", example(t, "approval.json")}, invocation{}.io(&stdout, &stderr))
	}()
	line := regexp.MustCompile(`waiting for approval: Deploy 1\.4\.2 to production\? — planner approve (--nats-url nats://127\.0\.0\.1:\d+) (\S+) deploy\n`)
	var m []string
	for m == nil {
		m = line.FindStringSubmatch(stderr.String())
		select {
		case code := <-done:
			t.Fatalf("run ended (%d) before the tool waited; stderr:\n%s", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("no waiting line; stderr:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	o := runPlanner(t, append(append([]string{"approve"}, strings.Fields(m[1])...), m[2], "deploy")...)
	if o.code != cli.ExitOK {
		t.Fatalf("the command the run showed: exit %d, stderr %q", o.code, o.stderr)
	}
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("run exit %d; stderr:\n%s", code, stderr.String())
	}
	if res := lastResult(t, stdout.String(), stderr.String()); !res.Success || res.Tools[1].State != planbus.ToolSucceeded {
		t.Errorf("result %+v", res)
	}
}

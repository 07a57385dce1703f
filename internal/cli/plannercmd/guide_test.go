package plannercmd

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/worker"
)

// planner guide plays turns of a guided session against a running
// planner with the starter library: it prints the context, says on stderr
// what the turn did, and takes a tool's output from flags.
func TestGuideVerb(t *testing.T) {
	lib, err := templates.ReadFile(filepath.Join(bustest.RepoRoot(t), "examples", "templates", "library.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1, Planner: planner.Config{Templates: lib},
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{}), DrainTimeout: time.Second}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	url := cfg.URL

	o := runPlanner(t, "guide", "--nats-url", url, "--session", "cli-1", "--domain", "bugfix", "fix", "the", "bug", "in", "parser.go")
	if o.code != cli.ExitOK || !strings.HasPrefix(o.stdout, "[ACTIVE PLAN: bugfix_workflow]\nStep 1 of 5: Reproduce the bug ← YOU ARE HERE\n") ||
		!strings.HasSuffix(o.stdout, "INSTRUCTION: Execute Step 1 now. Do not skip ahead. Verify the result before proceeding.\n") ||
		strings.TrimSpace(o.stderr) != "activated: Plan activated: Bug fix (Go) (5 steps)" {
		t.Fatalf("activation: exit %d\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}
	o = runPlanner(t, "guide", "--nats-url", url, "--session", "cli-1", "--tool", "shell", "--output", "--- FAIL: TestParse")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "Step 2 of 5: Find the test ← YOU ARE HERE") || !strings.HasPrefix(o.stderr, "advanced: Step 1 verified") {
		t.Fatalf("step 1: exit %d\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}
	// A failed check of a warn step: the step stays, with a warning.
	o = runPlanner(t, "guide", "--nats-url", url, "--session", "cli-1", "--output-json", `{"stdout":""}`, "--exit-code", "1")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "WARNING: Step 2 failed verification: /stdout is empty. Retry it.") || !strings.HasPrefix(o.stderr, "warned: ") {
		t.Fatalf("failed check: exit %d\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}
	// --json prints the reply.
	o = runPlanner(t, "guide", "--nats-url", url, "--session", "cli-1", "--json", "--output-json", `{"stdout":"parser_test.go:9:func TestParse"}`)
	if err := schemas.Validate(schemas.GuideReply, []byte(o.stdout)); o.code != cli.ExitOK || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s", o.code, err, o.stdout)
	}
	var r planbus.GuideReply
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || r.Transition != planbus.GuideAdvanced || r.Plan.Step != 3 || r.Check.Tool != "cli" {
		t.Errorf("--json reply %+v, %v", r, err)
	}
	// No plan: nothing on stdout.
	o = runPlanner(t, "guide", "--nats-url", url, "--session", "cli-2", "What's", "the", "weather", "like?")
	if o.code != cli.ExitOK || o.stdout != "" || strings.TrimSpace(o.stderr) != "none" {
		t.Errorf("small talk: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"guide", "--session", "s", "hi"}, "--nats-url"},
		{[]string{"guide", "--nats-url", url, "hi"}, `--session "": want 1 to 128 letters`},
		{[]string{"guide", "--nats-url", url, "--session", "a.b", "hi"}, `--session "a.b"`},
		{[]string{"guide", "--nats-url", url, "--session", "s", "--domain", "a b", "hi"}, "--domain"},
		{[]string{"guide", "--nats-url", url, "--session", "s", "--exit-code", "0"}, "--exit-code goes with --output"},
		{[]string{"guide", "--nats-url", url, "--session", "s", "--output", "x", "--output-json", "1"}, "give one"},
		{[]string{"guide", "--nats-url", url, "--session", "s", "--output-json", "{nope"}, "--output-json: not one JSON value"},
		{[]string{"guide", "--nats-url", url, "--session", "s", "--output", "x", "--exit-code", "zero"}, `--exit-code "zero": want an integer`},
	} {
		o := runPlanner(t, tt.args...)
		if o.code != cli.ExitUsage || !strings.Contains(o.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, o.code, o.stderr, cli.ExitUsage, tt.want)
		}
	}
}

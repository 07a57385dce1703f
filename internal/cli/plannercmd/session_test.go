package plannercmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/cli"
)

// planner skills shows a skill disabled in a session after it failed for
// good there, and planner reset heals it.
func TestSkillsAndReset(t *testing.T) {
	s := startServe(t, "--http", "")
	file := filepath.Join(t.TempDir(), "down.json")
	if err := os.WriteFile(file, []byte(`{"sessionId": "s-down", "tools": [{"toolId": "f", "skill": "fail",
		"input": {"category": "network", "code": "DOWN", "message": "the link is down"}, "retryPolicy": {"maxAttempts": 1}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := runPlanner(t, "run", "--nats-url", s.url, "--quiet", file); o.code != cli.ExitFailed {
		t.Fatalf("the failing plan: exit %d, want 1; stderr:\n%s", o.code, o.stderr)
	}
	o := runPlanner(t, "skills", "--nats-url", s.url, "--session", "s-down")
	if o.code != cli.ExitOK {
		t.Fatalf("skills: exit %d; stderr:\n%s", o.code, o.stderr)
	}
	line := ""
	for _, l := range strings.Split(o.stdout, "\n") {
		if strings.HasPrefix(l, "fail ") {
			line = l
		}
	}
	if !strings.Contains(line, "permanentFailure") || !strings.Contains(line, "the link is down") ||
		!strings.Contains(o.stdout, "planner reset --nats-url URL s-down") {
		t.Errorf("skills of s-down:\n%s\nwant fail in permanentFailure with its error, and how to reset", o.stdout)
	}
	if o := runPlanner(t, "reset", "--nats-url", s.url, "s-down"); o.code != cli.ExitOK || !strings.Contains(o.stdout, "session s-down: healed [fail]") {
		t.Errorf("reset: exit %d, stdout %q; stderr:\n%s", o.code, o.stdout, o.stderr)
	}
	if o := runPlanner(t, "skills", "--nats-url", s.url, "--session", "s-down", "--json"); o.code != cli.ExitOK || !strings.Contains(o.stdout, `"state":"healthy"`) || strings.Contains(o.stdout, "permanentFailure") {
		t.Errorf("skills after the reset: exit %d, stdout:\n%s", o.code, o.stdout)
	}
	if o := runPlanner(t, "reset", "--nats-url", s.url, "not a session"); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "want one session id") {
		t.Errorf("reset of a bad id: exit %d, stderr:\n%s", o.code, o.stderr)
	}
}

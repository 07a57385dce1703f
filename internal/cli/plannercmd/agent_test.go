package plannercmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// planner agent start, planner status SESSION (the goal report), planner
// agent status --json, and planner agent stop, on a running system.
func TestAgentVerbs(t *testing.T) {
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sk := skills.Builtins(skills.BuiltinConfig{})
	for _, spec := range []string{"gather@1m", "light", "pitch", "run"} {
		s, err := skills.Simulated(spec)
		if err != nil {
			t.Fatal(err)
		}
		sk = append(sk, s)
	}
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1,
		Worker:  worker.Config{Skills: append([]skill.Skill(nil), sk...), DrainTimeout: time.Second},
		Planner: planner.Config{DomainsDir: filepath.Join(bustest.RepoRoot(t), "examples", "goap")}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	url := cfg.URL
	c := newClient(t, bustest.Dial(t, cfg))

	o := runPlanner(t, "agent", "start", "--nats-url", url, "--session", "camp", "--id", "camper", "--domain", "camp")
	if o.code != cli.ExitOK || strings.TrimSpace(o.stdout) != "camper" {
		t.Fatalf("start: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	for { // until the wood is being gathered (for a minute)
		st, err := c.AgentStatus(ctx, "camp")
		if err == nil && st.PlanID != "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the agent never stepped")
		case <-time.After(20 * time.Millisecond):
		}
	}
	o = runPlanner(t, "status", "--nats-url", url, "camp")
	for _, want := range []string{
		"agent camper (session camp, domain camp): running, goal warm-up, step 1 of 2 (gather-wood → light-fire, plan camper-a1)",
		"warm-up: 60.0 ← CURRENT", "sleep-dry: 40.0\n", "take-shelter: 0 [ZERO] [INVALID]",
		"GOAL          PLANS  SUCCEEDED  FAILED  REPLANS  PREEMPTIONS", "warm-up       1      0",
	} {
		if o.code != cli.ExitOK || !strings.Contains(o.stdout, want) {
			t.Errorf("status: exit %d, stdout lacks %q:\n%s%s", o.code, want, o.stdout, o.stderr)
		}
	}
	o = runPlanner(t, "agent", "status", "--json", "--nats-url", url, "camp")
	if err := schemas.Validate(schemas.AgentStatus, []byte(o.stdout)); o.code != cli.ExitOK || err != nil {
		t.Errorf("status --json: exit %d, %v:\n%s", o.code, err, o.stdout)
	}
	o = runPlanner(t, "agent", "start", "--nats-url", url, "--session", "camp", "--domain", "camp")
	if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "already has a running agent, camper") {
		t.Errorf("second start: exit %d, stderr %q", o.code, o.stderr)
	}
	// An agent is stopped, not cancelled: cancel says so.
	o = runPlanner(t, "cancel", "--nats-url", url, "camp")
	if o.code != cli.ExitFailed || !strings.Contains(o.stderr, "camp is the session of agent camper: stop it with 'planner agent stop --nats-url "+url+" camp'") {
		t.Errorf("cancel camp: exit %d, stderr %q", o.code, o.stderr)
	}
	o = runPlanner(t, "agent", "stop", "--nats-url", url, "--reason", "bedtime", "camp")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "is stopped; its running plan camper-a1 is being cancelled") {
		t.Errorf("stop: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	// watch follows an agent by its session id and ends with its outcome.
	o = runPlanner(t, "watch", "--nats-url", url, "camp")
	if o.code != cli.ExitFailed || !strings.Contains(o.stdout, `"status":"cancelled"`) {
		t.Errorf("watch camp: exit %d, stdout %q, stderr %q; want the agent's cancelled outcome", o.code, o.stdout, o.stderr)
	}
	o = runPlanner(t, "agent", "stop", "--nats-url", url, "camp")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "had already ended (stopped)") {
		t.Errorf("stop again: exit %d, stdout %q", o.code, o.stdout)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agent", "status", "--nats-url", url, "nobody"}, cli.ExitFailed, "has no agent"},
		{[]string{"status", "--nats-url", url, "nobody"}, cli.ExitFailed, "no session of that id has an agent"},
		{[]string{"agent", "stop", "--nats-url", url}, cli.ExitUsage, "want one session id"},
		{[]string{"agent", "start", "--nats-url", url}, cli.ExitUsage, "want --domain NAME or one FILE"},
		{[]string{"agent", "start", "--nats-url", url, "--domain", "nowhere"}, cli.ExitUsage, "/goap/domain"},
		{[]string{"agent", "sing"}, cli.ExitUsage, `unknown command "sing"`},
	} {
		if o := runPlanner(t, tc.args...); o.code != tc.code || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, o.code, o.stderr, tc.code, tc.want)
		}
	}
}

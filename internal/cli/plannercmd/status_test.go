package plannercmd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// planner status shows a request and its plan, whether the plan's state
// is stored whole or in chunks (here of one tool, so three tools make
// three chunks).
func TestStatusShowsARequestAndItsPlan(t *testing.T) {
	for _, chunkTools := range []int{0, 1} {
		t.Run(fmt.Sprintf("chunkTools=%d", chunkTools), func(t *testing.T) { statusShowsARequestAndItsPlan(t, chunkTools) })
	}
}

func statusShowsARequestAndItsPlan(t *testing.T, chunkTools int) {
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1, Dispatcher: dispatcher.Config{StateChunkTools: chunkTools},
		Worker: worker.Config{Skills: []skill.Skill{skills.Echo(), skills.Fail()}}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	out, err := newClient(t, bustest.Dial(t, cfg)).Run(ctx, []byte(`{"requestId":"st1","kind":"plan","plan":{"tools":[
		{"toolId":"a","skill":"echo"},{"toolId":"b","skill":"fail","dependencies":["a"],"input":{"category":"permanent"}},
		{"toolId":"c","skill":"echo","dependencies":["b"]}]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Success {
		t.Fatal("the request succeeded; the test wants a failed plan to show")
	}
	o := runPlanner(t, "status", "--nats-url", cfg.URL, "st1")
	if o.code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", o.code, o.stderr)
	}
	for _, want := range []string{"request st1 (plan, session default): fallback", "attempt 1: failed (plan st1-1)",
		"plan st1-1 (request st1): failed", "a     echo   succeeded", "b     fail   failed", "c     echo   skipped", "dependency_failed",
		"1 succeeded, 1 failed, 1 skipped"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, o.stdout)
		}
	}
	o = runPlanner(t, "status", "--nats-url", cfg.URL, "--json", "st1-1")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, `"tools":[["s",1,`) || strings.Contains(o.stdout, "chunk") ||
		strings.Count(o.stdout, `"tools"`) != 1 {
		t.Errorf("--json: exit %d, want the state whole, its three tools under one \"tools\"\n%s", o.code, o.stdout)
	}
	head, err := kvGet(ctx, bustest.Dial(t, cfg), bus.BucketPlans, bus.StateKey("st1-1"))
	if err != nil {
		t.Fatal(err)
	}
	if chunked := strings.Contains(string(head), `"chunks":[`); chunked != (chunkTools > 0) {
		t.Errorf("stored state chunked %v, want %v: %s", chunked, chunkTools > 0, head)
	}
	if o := runPlanner(t, "status", "--nats-url", cfg.URL, "nothing"); o.code != cli.ExitFailed || !strings.Contains(o.stderr, `no plan or request "nothing"`) {
		t.Errorf("unknown id: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := runPlanner(t, "status", "st1"); o.code != cli.ExitUsage {
		t.Errorf("without --nats-url: exit %d", o.code)
	}
}

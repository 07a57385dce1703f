package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// A bare plan run through the client leaves the tools' timeouts and retry
// policies it does not set to the skill's manifest.
func TestRunPlanTakesTheSkillsDefaults(t *testing.T) {
	paced := skill.Skill{
		Manifest: planbus.SkillManifest{Name: "paced", TimeoutMs: 10000, RetryPolicy: &planbus.RetryPolicy{MaxAttempts: 4, BackoffMs: 5}},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			out, _ := json.Marshal(map[string]any{"timeoutMs": call.Timeout.Milliseconds(), "maxAttempts": call.MaxAttempts})
			return skill.Result{Output: out}, nil
		}),
	}
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 1,
		Worker: worker.Config{Skills: []skill.Skill{paced}, DrainTimeout: time.Second}}, bustest.Log())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	c, err := client.New(bustest.Dial(t, cfg).NC)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.RunPlan(ctx, []byte(`{"tools":[{"toolId":"bare","skill":"paced"},
		{"toolId":"own","skill":"paced","timeoutMs":700,"retryPolicy":{"maxAttempts":2}}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Success || out.Execution == nil {
		t.Fatalf("outcome %s: %+v", out.Status, out.Error)
	}
	want := map[string]string{"bare": `{"maxAttempts":4,"timeoutMs":10000}`, "own": `{"maxAttempts":2,"timeoutMs":700}`}
	for _, tool := range out.Execution.Tools {
		if got := string(tool.Output); got != want[tool.ToolID] {
			t.Errorf("%s's call carried %s, want %s", tool.ToolID, got, want[tool.ToolID])
		}
	}
}

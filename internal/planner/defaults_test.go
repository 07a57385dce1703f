package planner_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/skill"
)

// paced is a skill whose manifest sets the timeout and retry policy of
// tools that leave theirs out; each call answers with what it carried.
func paced() skill.Skill {
	return skill.Skill{
		Manifest: planbus.SkillManifest{Name: "paced", TimeoutMs: 10000, RetryPolicy: &planbus.RetryPolicy{MaxAttempts: 4, BackoffMs: 5}},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			out, _ := json.Marshal(map[string]any{"timeoutMs": call.Timeout.Milliseconds(), "maxAttempts": call.MaxAttempts})
			return skill.Result{Output: out}, nil
		}),
	}
}

// A plan that comes through the planner keeps "not set" for what its
// document left out, so the dispatcher gives those tools the skill
// manifest's timeout and retry policy; what the plan set stays.
func TestManifestDefaultsApplyToPlansThroughThePlanner(t *testing.T) {
	h := start(t, planner.Config{}, []skill.Skill{paced()})
	out, _ := h.request(`{"kind":"plan","plan":{"tools":[
		{"toolId":"bare","skill":"paced"},
		{"toolId":"timed","skill":"paced","timeoutMs":700},
		{"toolId":"retried","skill":"paced","retryPolicy":{"maxAttempts":1}},
		{"toolId":"defaults","skill":"paced","timeoutMs":30000,"retryPolicy":{"maxAttempts":3,"backoffMs":100}}]}}`)
	if !out.Success || out.Execution == nil {
		t.Fatalf("outcome %s: %+v", out.Status, out.Error)
	}
	want := map[string]string{
		"bare":     `{"maxAttempts":4,"timeoutMs":10000}`,
		"timed":    `{"maxAttempts":4,"timeoutMs":700}`,
		"retried":  `{"maxAttempts":1,"timeoutMs":10000}`,
		"defaults": `{"maxAttempts":3,"timeoutMs":30000}`, // given in the plan, though equal to the defaults
	}
	for _, tool := range out.Execution.Tools {
		if got := string(tool.Output); got != want[tool.ToolID] {
			t.Errorf("%s's call carried %s, want %s", tool.ToolID, got, want[tool.ToolID])
		}
	}
}

// A fallback that leaves its timeout and retry policy out takes its own
// skill's manifest defaults, as a tool does.
func TestManifestDefaultsApplyToFallbacks(t *testing.T) {
	broken := skill.Skill{
		Manifest: planbus.SkillManifest{Name: "broken"},
		Handler: skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
			return skill.Result{}, skill.Permanent("BROKEN", "always")
		}),
	}
	h := start(t, planner.Config{}, []skill.Skill{paced(), broken})
	out, _ := h.request(`{"kind":"plan","plan":{"tools":[
		{"toolId":"bare","skill":"broken","retryPolicy":{"maxAttempts":1},"fallback":{"skill":"paced"}},
		{"toolId":"timed","skill":"broken","retryPolicy":{"maxAttempts":1},"fallback":{"skill":"paced","timeoutMs":700,"retryPolicy":{"maxAttempts":2}}}]}}`)
	if !out.Success || out.Execution == nil {
		t.Fatalf("outcome %s: %+v", out.Status, out.Error)
	}
	want := map[string]string{
		"bare":  `{"maxAttempts":5,"timeoutMs":10000}`, // one of broken's, four of the manifest's
		"timed": `{"maxAttempts":3,"timeoutMs":700}`,
	}
	for _, tool := range out.Execution.Tools {
		if got := string(tool.Output); got != want[tool.ToolID] {
			t.Errorf("%s's fallback call carried %s, want %s", tool.ToolID, got, want[tool.ToolID])
		}
	}
}

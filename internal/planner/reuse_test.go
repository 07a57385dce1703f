package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/skill"
)

// counter is a skill that counts its executions by request and tool, and
// answers with its tool id and input.
type counter struct {
	mu   sync.Mutex
	runs map[string]int // requestId/toolId -> executions
}

func newCounter() *counter { return &counter{runs: map[string]int{}} }

func (c *counter) skill(name string) skill.Skill {
	return skill.Skill{
		Manifest: planbus.SkillManifest{Name: name},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			c.mu.Lock()
			c.runs[call.RequestID+"/"+call.ToolID]++
			c.mu.Unlock()
			out, _ := json.Marshal(map[string]any{"tool": call.ToolID, "input": json.RawMessage(call.Input)})
			return skill.Result{Output: out}, nil
		}),
	}
}

// of returns a request's executions by tool id.
func (c *counter) of(requestID string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.runs {
		if id, ok := strings.CutPrefix(k, requestID+"/"); ok {
			out[id] = n
		}
	}
	return out
}

// chainPlanner answers external plan requests with a chain fetch ->
// transform -> publish, publishing with skill flaky (which always fails)
// until flaky is disabled, then with skill steady. The tools of later
// attempts have other ids: identity is what a tool does, not its name.
// reuseFalse marks transform "reuse": false.
func chainPlanner(h *harness, subject string, reuseFalse bool) {
	respond(h.t, h, subject, func(q generator.ExternalRequest) any {
		publish := "flaky"
		if slices.Contains(q.DisabledSkills, "flaky") {
			publish = "steady"
		}
		n := q.Attempt
		transform := map[string]any{"toolId": fmt.Sprintf("transform%d", n), "skill": "count", "dependencies": []string{fmt.Sprintf("fetch%d", n)},
			"input": map[string]any{"data": map[string]string{"$ref": fmt.Sprintf("fetch%d#/input", n)}}}
		if reuseFalse {
			transform["reuse"] = false
		}
		return map[string]any{"tools": []map[string]any{
			{"toolId": fmt.Sprintf("fetch%d", n), "skill": "count", "input": map[string]any{"url": "https://example.org/data"}},
			transform,
			{"toolId": fmt.Sprintf("publish%d", n), "skill": publish, "dependencies": []string{fmt.Sprintf("transform%d", n)},
				"input": map[string]any{"doc": map[string]string{"$ref": fmt.Sprintf("transform%d", n)}}},
		}}
	})
}

// A replan after a late failure runs only what failed: the chain's last
// tool fails for good on attempt 1, its skill is disabled and replaced,
// and attempt 2 takes fetch's and transform's results instead of running
// them again (each ran once), with events saying so. A request that says
// "reuse": false runs everything again; a tool that says it runs again,
// and so does everything after it.
func TestReplanKeepsFinishedWork(t *testing.T) {
	cnt := newCounter()
	h := start(t, planner.Config{}, append(simulated(t, "flaky=permanent"), cnt.skill("count"), cnt.skill("steady")))
	chainPlanner(h, "test.chain", false)
	chainPlanner(h, "test.chain.noreuse", true)

	out, ev := h.request(`{"requestId":"keep","sessionId":"s-keep","kind":"external","planner":"test.chain"}`)
	if !out.Success || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
	}
	want := map[string]int{"fetch1": 1, "transform1": 1, "publish2": 1}
	if got := cnt.of("keep"); !maps.Equal(got, want) {
		t.Errorf("executions %v, want %v: fetch and transform run once, publish on its new skill", got, want)
	}
	reused := map[string]bool{}
	for _, o := range out.Execution.Tools {
		reused[o.ToolID] = o.Reused
	}
	if !maps.Equal(reused, map[string]bool{"fetch2": true, "transform2": true, "publish2": false}) {
		t.Errorf("attempt 2's tools reused %v", reused)
	}
	var doc struct {
		Input struct {
			Doc struct {
				Tool string `json:"tool"`
			} `json:"doc"`
		} `json:"input"`
	}
	_ = json.Unmarshal(out.Execution.Tools[2].Output, &doc)
	if doc.Input.Doc.Tool != "transform1" {
		t.Errorf("publish2 got %s, want the output transform1 gave in attempt 1", out.Execution.Tools[2].Output)
	}
	var reusedEvents []string
	for _, e := range ev.of(planbus.EventToolReused) {
		reusedEvents = append(reusedEvents, e.ToolID)
	}
	if !slices.Equal(reusedEvents, []string{"fetch2", "transform2"}) {
		t.Errorf("tool.reused events for %v", reusedEvents)
	}
	gen := ev.of(planbus.EventRequestGenerated)
	if len(gen) != 2 || !strings.Contains(gen[1].Message, "2 of them reusing earlier results") {
		t.Errorf("request.generated events %+v", gen)
	}

	out, _ = h.request(`{"requestId":"again","sessionId":"s-again","kind":"external","planner":"test.chain","reuse":false}`)
	want = map[string]int{"fetch1": 1, "transform1": 1, "fetch2": 1, "transform2": 1, "publish2": 1}
	if got := cnt.of("again"); !out.Success || !maps.Equal(got, want) {
		t.Errorf("with reuse false: %s, executions %v, want %v", out.Status, got, want)
	}

	out, _ = h.request(`{"requestId":"tool","sessionId":"s-tool","kind":"external","planner":"test.chain.noreuse"}`)
	want = map[string]int{"fetch1": 1, "transform1": 1, "transform2": 1, "publish2": 1}
	if got := cnt.of("tool"); !out.Success || !maps.Equal(got, want) {
		t.Errorf("with transform's reuse false: %s, executions %v, want %v", out.Status, got, want)
	}
}

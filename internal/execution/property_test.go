package execution

import (
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
)

// TestPropertyRandomRuns drives random plans with random outcomes in random
// order and checks the invariants of a run: the concurrency cap holds, a tool
// is only released once its dependencies are satisfied, every attempt is
// released once, and every run ends with each tool in a terminal state.
func TestPropertyRandomRuns(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 15).Draw(t, "n")
		type tool struct {
			ToolID       string           `json:"toolId"`
			Skill        string           `json:"skill"`
			Dependencies []string         `json:"dependencies"`
			Required     bool             `json:"required"`
			Async        bool             `json:"async"`
			RetryPolicy  plan.RetryPolicy `json:"retryPolicy"`
			Fallback     *struct {
				Skill       string           `json:"skill"`
				RetryPolicy plan.RetryPolicy `json:"retryPolicy"`
			} `json:"fallback,omitempty"`
		}
		tools := make([]tool, n)
		for i := range tools {
			tools[i] = tool{ToolID: fmt.Sprintf("t%d", i), Skill: "s", Dependencies: []string{},
				Required: rapid.Bool().Draw(t, "required"), Async: rapid.IntRange(0, 5).Draw(t, "async") > 0,
				RetryPolicy: plan.RetryPolicy{MaxAttempts: rapid.IntRange(1, 3).Draw(t, "attempts"), BackoffMs: 10}}
			if rapid.IntRange(0, 3).Draw(t, "fallback") == 0 {
				tools[i].Fallback = &struct {
					Skill       string           `json:"skill"`
					RetryPolicy plan.RetryPolicy `json:"retryPolicy"`
				}{Skill: "fb", RetryPolicy: plan.RetryPolicy{MaxAttempts: rapid.IntRange(1, 2).Draw(t, "fbAttempts"), BackoffMs: 10}}
			}
			for j := range i {
				if rapid.IntRange(0, 3).Draw(t, "edge") == 0 {
					tools[i].Dependencies = append(tools[i].Dependencies, tools[j].ToolID)
				}
			}
		}
		mc := rapid.IntRange(1, 4).Draw(t, "maxConcurrency")
		doc, _ := json.Marshal(map[string]any{"planId": "p", "requestId": "r", "maxConcurrency": mc,
			"parallel": rapid.IntRange(0, 4).Draw(t, "parallel") > 0, "tools": tools})
		p, err := plan.Decode(doc)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		e, fx := Start(p, now, 8, nil)
		type inflight struct{ idx, attempt int }
		var running []inflight
		var timers []Timer
		released := map[string]bool{}
		handle := func(fx Effects) {
			for _, r := range fx.Releases {
				key := fmt.Sprintf("%d/%d", r.Index, r.Attempt)
				if released[key] {
					t.Fatalf("attempt %s released twice", key)
				}
				released[key] = true
				for _, d := range p.Graph().Deps(r.Index) {
					if !e.satisfies(d) {
						t.Fatalf("%s released before dependency %s was satisfied", p.Tools[r.Index].ToolID, p.Tools[d].ToolID)
					}
				}
				running = append(running, inflight{r.Index, r.Attempt})
			}
			for _, tm := range fx.Timers {
				if tm.Kind == TimerRetry {
					timers = append(timers, tm)
				}
			}
			if e.inFlight > e.st.MaxConcurrency {
				t.Fatalf("%d in flight, cap %d", e.inFlight, e.st.MaxConcurrency)
			}
		}
		handle(fx)
		for steps := 0; !e.Done(); steps++ {
			if steps > 1000 {
				t.Fatal("run does not end")
			}
			if len(running) == 0 && len(timers) == 0 {
				t.Fatalf("stuck: nothing running, no timers, plan %s", e.st.Status)
			}
			if len(timers) > 0 && (len(running) == 0 || rapid.Bool().Draw(t, "fireTimer")) {
				k := rapid.IntRange(0, len(timers)-1).Draw(t, "timer")
				tm := timers[k]
				timers = append(timers[:k], timers[k+1:]...)
				now = tm.FireAt
				handle(e.OnTimer(tm, now))
				continue
			}
			k := rapid.IntRange(0, len(running)-1).Draw(t, "finish")
			r := running[k]
			running = append(running[:k], running[k+1:]...)
			res := &planbus.ToolResult{ToolID: p.Tools[r.idx].ToolID, Attempt: r.attempt, State: planbus.ToolSucceeded}
			if rapid.IntRange(0, 3).Draw(t, "fails") == 0 {
				res.State = planbus.ToolFailed
				res.Error = &planbus.ErrorInfo{Code: "X", Category: planbus.CategoryNetwork, Message: "x"}
			}
			handle(e.OnResult(res, now))
		}
		for _, ts := range e.st.Tools {
			if !terminal(ts.State) {
				t.Fatalf("plan ended with %s %s", ts.ID, ts.State)
			}
		}
	})
}

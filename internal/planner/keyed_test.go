package planner_test

import (
	"encoding/json"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/templates"
)

// Executed mode with a library in the keyed format: a request of kind
// template runs the matched plan, each step on its tool as a skill (here
// a stand-in that echoes its input, the step's action and hint), checked
// by the gates its checks become. warn and block steps are retried twice
// in a plan, then fail it: there is no agent to wait for.
func TestTemplateKeyedLibraryRunsAsPlans(t *testing.T) {
	lib, err := templates.ReadFile("../templates/testdata/keyed/library.json")
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, planner.Config{Templates: lib}, simulated(t, "code_execution_tool"))

	out, _ := h.request(`{"kind":"template","input":"Please debug the login module","template":{"domain":"bugfix"}}`)
	if !out.Success || out.Attempts != 1 || len(out.Execution.Tools) != 5 {
		t.Fatalf("bugfix: %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
	}
	var echoed struct {
		Input struct{ Action, Hint string }
	}
	first := out.Execution.Tools[0]
	if err := json.Unmarshal(first.Output, &echoed); err != nil || first.ToolID != "step1" || first.Skill != "code_execution_tool" ||
		echoed.Input.Hint != "Run the command or script that triggers the bug" || echoed.Input.Action == "" {
		t.Errorf("step 1: %+v (%s)", first, first.Output)
	}

	// Step 1 of the feature branch wants "On branch" in its output, which
	// the stand-in never prints: three attempts (on_fail warn), then the
	// plan fails on its gate.
	out, ev := h.request(`{"kind":"template","input":"create branch login as a new branch","template":{"domain":"git_ops"}}`)
	if out.Success || len(out.History) == 0 {
		t.Fatalf("feature branch: %s: %+v", out.Status, out.History)
	}
	a := out.History[0]
	if a.State != planbus.PlanFailed || a.Error == nil || a.Error.Code != planbus.CodeVerifyFailed {
		t.Errorf("attempt 1: %+v, want failed by its gate", a)
	}
	if n, want := len(ev.of(planbus.EventToolRetrying)), 2*len(out.History); n != want {
		t.Errorf("%d retries in %d attempts, want %d", n, len(out.History), want)
	}
}

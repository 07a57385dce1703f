package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/goap"
	"github.com/planbus/planbus/internal/request"
)

// brief writes decisions as "kind goal reason", in order.
func brief(ds []agentDecision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = strings.TrimSpace(d.Kind + " " + d.Goal + " " + d.Reason)
	}
	return out
}

// A turn records its decisions, in order, for the debug log: the goal
// selected (with every goal's utility when debug is on), the plan made,
// the step released, the tracker's verdict on a result, a replan.
func TestAgentRecordsItsDecisions(t *testing.T) {
	a, doc := coreAgent(t, "chores", goap.State{})
	a.debug = true
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if diff := cmp.Diff([]string{"select clean-dishes best", "plan clean-dishes", "step clean-dishes"}, brief(a.fx.decisions)); diff != "" {
		t.Fatalf("first turn (-want +got):\n%s", diff)
	}
	sel := a.fx.decisions[0]
	wantGoals := []goap.GoalStatus{{Goal: "clean-dishes", Utility: 70, Valid: true, Eligible: true}, {Goal: "clean-floor", Utility: 40, Valid: true, Eligible: true}}
	if sel.Utility != 70 || sel.Detail != "best is clean-dishes (70)" || !cmp.Equal(sel.Goals, wantGoals) {
		t.Errorf("selection %+v, want utility 70 and the goals %+v", sel, wantGoals)
	}
	if d := a.fx.decisions[1].Detail; d != "boil-water → wash-dishes (cost 2, 2 states expanded)" {
		t.Errorf("plan: %q", d)
	}
	if d := a.fx.decisions[2].Detail; d != "step 1 of 2: boil-water (plan ag-a1)" {
		t.Errorf("step: %q", d)
	}

	// boil-water succeeds but the world lost its water: the rest of the
	// plan does not hold, so the goal is planned again. Without debug the
	// selection keeps no report.
	a = turnOf(t, doc, a.d, goap.State{})
	if err := a.onResult(&planbus.ExecutionResult{PlanID: doc.Step.PlanID, State: planbus.PlanSucceeded, Success: true}); err != nil {
		t.Fatal(err)
	}
	a.store()
	got := brief(a.fx.decisions)
	if len(got) < 4 || got[0] != "verdict clean-dishes replan" || got[1] != "select clean-dishes current" ||
		!strings.HasPrefix(got[2], "plan clean-dishes replan: ") || got[3] != "step clean-dishes" {
		t.Errorf("replan turn: %q", got)
	}
	for _, d := range a.fx.decisions {
		if d.Goals != nil {
			t.Errorf("decision %+v keeps a report without debug", d)
		}
	}
}

// logDecisions writes each decision as a debug event, only when the
// planner's log is at debug level.
func TestAgentDecisionsLogAtDebug(t *testing.T) {
	doc := &agentDoc{Request: &request.Request{RequestID: "ag", SessionID: "s"}}
	decisions := []agentDecision{
		{Kind: decisionSelect, Goal: "clean-dishes", Utility: 70, Reason: "best", Detail: "best is clean-dishes (70)",
			Goals: []goap.GoalStatus{{Goal: "clean-dishes", Utility: 70, Valid: true, Eligible: true}, {Goal: "clean-floor", Utility: 40, Valid: true, Satisfied: true}}},
		{Kind: decisionVerdict, Goal: "clean-dishes", Reason: "replan", Detail: "wash-dishes: water is false"},
	}
	for _, tc := range []struct {
		level zerolog.Level
		want  []map[string]any
	}{
		{zerolog.InfoLevel, nil},
		{zerolog.DebugLevel, []map[string]any{
			{"level": "debug", "message": "agent decision", "agent_id": "ag", "session_id": "s", "decision": "select", "goal": "clean-dishes",
				"utility": 70.0, "reason": "best", "detail": "best is clean-dishes (70)", "goals": "clean-dishes 70, clean-floor 40 (satisfied)"},
			{"level": "debug", "message": "agent decision", "agent_id": "ag", "session_id": "s", "decision": "verdict", "goal": "clean-dishes",
				"reason": "replan", "detail": "wash-dishes: water is false"},
		}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			s := &Service{log: zerolog.New(&buf).Level(tc.level)}
			s.logDecisions(doc, decisions)
			var got []map[string]any
			dec := json.NewDecoder(&buf)
			for dec.More() {
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}

package planbus_test

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// schemaAt reads the part of a schema file at a path of property names.
func schemaAt(t *testing.T, file string, path ...string) map[string]any {
	t.Helper()
	raw, err := fs.ReadFile(schemas.FS(), file)
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	if err := json.Unmarshal(raw, &node); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, p := range path {
		next, ok := node[p].(map[string]any)
		if !ok {
			t.Fatalf("%s: no object at %s", file, strings.Join(path, "/"))
		}
		node = next
	}
	return node
}

// The schemas tell a sender that names no session which one it gets: the
// same as DefaultSession, the one the planner and dispatchers fill in.
func TestDefaultSessionIsTheOneTheSchemasName(t *testing.T) {
	want := `default "` + planbus.DefaultSession + `"`
	for _, file := range []string{schemas.PlanRequest, schemas.Plan} {
		desc, _ := schemaAt(t, file, "properties", "sessionId")["description"].(string)
		if !strings.Contains(desc, want) {
			t.Errorf("%s: sessionId's description %q does not say %s", file, desc, want)
		}
	}
}

// The typed enums' constants are the schemas' enums, no more, no less.
func TestEnumsAreTheSchemas(t *testing.T) {
	enum := func(node map[string]any) []string {
		t.Helper()
		var out []string
		for _, v := range node["enum"].([]any) {
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return out
	}
	strs := func(vs ...any) []string {
		var out []string
		for _, v := range vs {
			out = append(out, reflect.ValueOf(v).String())
		}
		slices.Sort(out)
		return out
	}
	var guideEvents []any
	for _, tr := range []string{planbus.GuideActivated, planbus.GuideAdvanced, planbus.GuideCompleted, planbus.GuideWarned,
		planbus.GuideBlocked, planbus.GuideExpired, planbus.GuideAborted} {
		guideEvents = append(guideEvents, planbus.EventGuidePrefix+planbus.EventType(tr))
	}
	for _, c := range []struct {
		name      string
		schema    []string
		constants []string
	}{
		{"Category", enum(schemaAt(t, "common.schema.json", "$defs", "errorCategory")), strs(planbus.CategoryTimeout, planbus.CategoryNetwork,
			planbus.CategoryTransient, planbus.CategoryInvalidInput, planbus.CategoryPermanent, planbus.CategoryInternal,
			planbus.CategoryCancelled, planbus.CategoryDependency)},
		{"ToolState", enum(schemaAt(t, "common.schema.json", "$defs", "toolState")), strs(planbus.ToolPending, planbus.ToolRunning,
			planbus.ToolRetrying, planbus.ToolWaitingApproval, planbus.ToolSucceeded, planbus.ToolFailed, planbus.ToolTimeout,
			planbus.ToolSkipped, planbus.ToolCancelled)},
		{"PlanState", enum(schemaAt(t, "common.schema.json", "$defs", "planState")), strs(planbus.PlanRunning, planbus.PlanSucceeded,
			planbus.PlanFailed, planbus.PlanTimeout, planbus.PlanRejected, planbus.PlanCancelled)},
		{"Reason", enum(schemaAt(t, schemas.ExecutionResult, "properties", "tools", "items", "properties", "reason")),
			strs(planbus.ReasonDependencyFailed, planbus.ReasonPlanFailed, planbus.ReasonPlanTimeout, planbus.ReasonCancelled)},
		{"Outcome status", enum(schemaAt(t, schemas.Outcome, "properties", "status")), strs(planbus.StatusSucceeded,
			planbus.StatusFailed, planbus.StatusFallback, planbus.StatusCancelled)},
		{"RequestStatus", enum(schemaAt(t, schemas.ListRequest, "properties", "status")), strs(planbus.RequestQueued,
			planbus.RequestGenerating, planbus.RequestExecuting, planbus.RequestCancelling, planbus.StatusSucceeded,
			planbus.StatusFailed, planbus.StatusFallback, planbus.StatusCancelled)},
		{"EventType", enum(schemaAt(t, schemas.Event, "properties", "type")), strs(append([]any{
			planbus.EventPlanStarted, planbus.EventPlanRejected, planbus.EventPlanSucceeded, planbus.EventPlanFailed,
			planbus.EventPlanTimeout, planbus.EventPlanCancelled, planbus.EventToolReleased, planbus.EventToolStarted,
			planbus.EventToolSucceeded, planbus.EventToolFailed, planbus.EventToolRetrying, planbus.EventToolTimeout,
			planbus.EventToolSkipped, planbus.EventToolCancelled, planbus.EventToolWaiting, planbus.EventToolApproved,
			planbus.EventToolRejected, planbus.EventToolReused, planbus.EventSkillHealth,
			planbus.EventRequestAccepted, planbus.EventRequestDuplicate, planbus.EventRequestGenerating,
			planbus.EventRequestGenerated, planbus.EventRequestReplanning, planbus.EventRequestSucceeded,
			planbus.EventRequestFailed, planbus.EventRequestFallback, planbus.EventRequestCancelled,
			planbus.EventAgentStarted, planbus.EventAgentGoalSelected, planbus.EventAgentGoalSucceeded,
			planbus.EventAgentGoalFailed, planbus.EventAgentPreempted, planbus.EventAgentReplanned, planbus.EventAgentIdle,
			planbus.EventAgentStopped, planbus.EventAgentGaveUp}, guideEvents...)...)},
	} {
		if diff := cmp.Diff(c.schema, c.constants); diff != "" {
			t.Errorf("%s: the schema's enum and the constants differ (-schema +constants):\n%s", c.name, diff)
		}
	}
}

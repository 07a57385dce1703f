package planbus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// A Request built in Go marshals to the document the planner takes, its
// kind following from the planner it fills.
func TestRequestMarshalsToAPlanRequest(t *testing.T) {
	minScore := 0
	for _, c := range []struct {
		req  planbus.Request
		want string
	}{
		{planbus.Request{RequestID: "r1", Plan: &planbus.Plan{Tools: []planbus.Tool{{ToolID: "a", Skill: "echo"}}}},
			`{"requestId":"r1","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`},
		{planbus.Request{SessionID: "s", HTN: &planbus.HTNRequest{Domain: "taxi", Goal: "travel-to(park)", Facts: []string{"at(downtown)"}},
			NoReuse: true, MaxAttempts: 2},
			`{"sessionId":"s","kind":"htn","maxAttempts":2,"htn":{"domain":"taxi","goal":"travel-to(park)","facts":["at(downtown)"]},"reuse":false}`},
		{planbus.Request{GOAP: &planbus.GOAPRequest{Domain: "soldier", Goal: "killEnemy", Budget: &planbus.Budget{Nodes: 1000}}},
			`{"kind":"goap","goap":{"domain":"soldier","goal":"killEnemy","budget":{"nodes":1000}}}`},
		{planbus.Request{Input: "fix the bug in parser.go", Template: &planbus.TemplateRequest{MinScore: &minScore}},
			`{"kind":"template","input":"fix the bug in parser.go","template":{"minScore":0}}`},
		{planbus.Request{Planner: "planners.llm", Input: map[string]any{"goal": "g"}, PlanDefaults: &planbus.PlanDefaults{TimeoutMs: 9000}},
			`{"kind":"external","input":{"goal":"g"},"planner":"planners.llm","planDefaults":{"timeoutMs":9000}}`},
	} {
		got, err := json.Marshal(c.req)
		if err != nil {
			t.Errorf("%s: %v", c.want, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("request JSON\n got %s\nwant %s", got, c.want)
		}
		if err := c.req.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", got, err)
		}
	}
}

// A request that names no planner, or two, is refused before any JSON;
// what the schemas refuse is named with its place.
func TestRequestValidateNamesWhatIsWrong(t *testing.T) {
	if _, err := json.Marshal(planbus.Request{}); err == nil || !strings.Contains(err.Error(), "one of Plan, Planner, HTN, GOAP and Template") {
		t.Errorf("no planner: %v", err)
	}
	two := planbus.Request{Planner: "p", HTN: &planbus.HTNRequest{Domain: "d", Goal: "g"}}
	if err := two.Validate(); err == nil || !strings.Contains(err.Error(), "set Kind") {
		t.Errorf("two planners: %v", err)
	}
	two.Kind = planbus.KindHTN
	if err := two.Validate(); err != nil {
		t.Errorf("two planners, Kind set: %v", err)
	}
	for _, c := range []struct {
		req  planbus.Request
		want string
	}{
		{planbus.Request{HTN: &planbus.HTNRequest{Goal: "g"}}, "/htn"},                                 // neither domain nor program
		{planbus.Request{Planner: "no spaces allowed"}, "/planner"},                                    // not a subject
		{planbus.Request{Plan: &planbus.Plan{Tools: []planbus.Tool{{ToolID: "a"}}}}, "/tools/0/skill"}, // the plan's own schema
	} {
		if err := c.req.Validate(); !errors.Is(err, schemas.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate = %v, want an invalid document naming %s", err, c.want)
		}
	}
}

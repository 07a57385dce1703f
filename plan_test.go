package planbus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// A Plan built in Go marshals to exactly the document the schema takes:
// zero fields left out (the schema's defaults), the three booleans whose
// default is true written only when set against it, references as $ref.
func TestPlanMarshalsToPlanJSON(t *testing.T) {
	type text struct {
		Text string `json:"text"`
	}
	p := planbus.Plan{PlanID: "p1", Sequential: true, TimeoutMs: 5000, Tools: []planbus.Tool{
		{ToolID: "a", Skill: "count", Input: text{Text: "one two"}},
		{ToolID: "b", Skill: "echo", Dependencies: []string{"a"}, Optional: true, Exclusive: true, NoReuse: true,
			Input:       map[string]any{"n": planbus.Ref("a", "/words"), "all": planbus.Ref("a", "")},
			RetryPolicy: &planbus.RetryPolicy{MaxAttempts: 2, BackoffMs: 50},
			Verify: &planbus.Gate{Type: planbus.GateAll, Gates: []planbus.Gate{
				{Type: planbus.GateEquals, Path: "/n", Value: 0},
				{Type: planbus.GateContains, Value: "x", CaseSensitive: true}}},
			Approval: &planbus.Approval{Prompt: "go on?"},
			Fallback: &planbus.Fallback{Skill: "echo", TimeoutMs: 100}},
	}}
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"planId":"p1","timeoutMs":5000,"tools":[` +
		`{"toolId":"a","skill":"count","input":{"text":"one two"}},` +
		`{"toolId":"b","skill":"echo","input":{"all":{"$ref":"a"},"n":{"$ref":"a#/words"}},"dependencies":["a"],` +
		`"retryPolicy":{"maxAttempts":2,"backoffMs":50},` +
		`"verify":{"type":"all","gates":[{"type":"equals","path":"/n","value":0},{"type":"contains","value":"x","caseSensitive":true}]},` +
		`"approval":{"prompt":"go on?"},"fallback":{"skill":"echo","timeoutMs":100},"required":false,"async":false,"reuse":false}],` +
		`"parallel":false}`
	if string(got) != want {
		t.Errorf("plan JSON\n got %s\nwant %s", got, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if err := schemas.Validate(schemas.Plan, got); err != nil {
		t.Errorf("the plan schema refuses it: %v", err)
	}
	// The zero Plan has a list of no tools (the schema requires the
	// list; a plan of none succeeds at once).
	if got, _ := json.Marshal(planbus.Plan{}); string(got) != `{"tools":[]}` {
		t.Errorf("zero plan: %s", got)
	}
	if err := (planbus.Plan{}).Validate(); err != nil {
		t.Errorf("zero plan: %v", err)
	}
}

// What the schema refuses, Validate names, with the place.
func TestPlanValidateNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name string
		plan planbus.Plan
		want string
	}{
		{"a tool id with a space", planbus.Plan{Tools: []planbus.Tool{{ToolID: "a b", Skill: "echo"}}}, "/tools/0/toolId"},
		{"no skill", planbus.Plan{Tools: []planbus.Tool{{ToolID: "a"}}}, "/tools/0/skill"},
		{"input not an object", planbus.Plan{Tools: []planbus.Tool{{ToolID: "a", Skill: "echo", Input: []int{1}}}}, "/tools/0/input"},
		{"a gate without its value", planbus.Plan{Tools: []planbus.Tool{{ToolID: "a", Skill: "echo",
			Verify: &planbus.Gate{Type: planbus.GateContains}}}}, "/tools/0/verify"},
		{"no attempt at all", planbus.Plan{Tools: []planbus.Tool{{ToolID: "a", Skill: "echo",
			RetryPolicy: &planbus.RetryPolicy{}}}}, "/tools/0/retryPolicy/maxAttempts"},
	} {
		err := c.plan.Validate()
		if !errors.Is(err, schemas.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an invalid document naming %s", c.name, err, c.want)
		}
	}
}

// A reference that cannot be written is an error of the marshalling, not
// a document with a broken $ref.
func TestRefNeedsAToolAndAPointer(t *testing.T) {
	for _, r := range []planbus.Reference{planbus.Ref("", "/x"), planbus.Ref("a", "words")} {
		p := planbus.Plan{Tools: []planbus.Tool{{ToolID: "b", Skill: "echo", Input: map[string]any{"x": r}}}}
		if _, err := json.Marshal(p); err == nil || !strings.Contains(err.Error(), "planbus.Ref") {
			t.Errorf("%+v: marshal error %v, want one naming planbus.Ref", r, err)
		}
		if err := p.Validate(); err == nil {
			t.Errorf("%+v: Validate passed", r)
		}
	}
}

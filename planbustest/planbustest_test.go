package planbustest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/planbustest"
	"github.com/planbus/planbus/skill"
)

type text struct {
	Text string `json:"text"`
}

type count struct {
	Words int `json:"words"`
}

// countSkill counts the words of its input's text.
var countSkill = skill.Skill{
	Manifest: skill.Manifest{Name: "count", Description: "Counts the words of a text."},
	Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
		var in text
		if err := skill.DecodeInput(call, &in); err != nil {
			return skill.Result{}, err
		}
		out, _ := json.Marshal(count{Words: len(strings.Fields(in.Text))})
		return skill.Result{Output: out}, nil
	}),
}

// A plan built in Go runs on a node with the test's skill and a built-in
// one; its outputs come back typed, the reference resolved.
func TestATypedPlanRunsOnANode(t *testing.T) {
	node := planbustest.Start(t, planbustest.WithSkills(countSkill))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := node.Client().SubmitPlan(ctx, planbus.Plan{Tools: []planbus.Tool{
		{ToolID: "a", Skill: "count", Input: text{Text: "one two three"}},
		{ToolID: "b", Skill: "echo", Dependencies: []string{"a"},
			Input: map[string]any{"n": planbus.Ref("a", "/words")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Success {
		t.Fatalf("outcome %s: %+v", out.Status, out.Error)
	}
	var got count
	if err := out.Output("a", &got); err != nil || got.Words != 3 {
		t.Fatalf("a = %+v, %v", got, err)
	}
	var echoed struct {
		N int `json:"n"`
	}
	if err := out.Output("b", &echoed); err != nil || echoed.N != 3 {
		t.Fatalf("b = %+v, %v", echoed, err)
	}
	if err := out.Output("c", &echoed); err == nil || !strings.Contains(err.Error(), "no tool c") {
		t.Errorf("the output of a tool the plan lacks: %v", err)
	}
	st, err := run.Status(ctx)
	if err != nil || st.Request == nil {
		t.Fatalf("status: %+v, %v", st, err)
	}
}

// A plan the schema refuses is not sent: the error names the place.
func TestAnInvalidPlanIsNotSent(t *testing.T) {
	node := planbustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := node.Client().SubmitPlan(ctx, planbus.Plan{PlanID: "bad", Tools: []planbus.Tool{{ToolID: "a b", Skill: "echo"}}})
	if err == nil || !strings.Contains(err.Error(), "/tools/0/toolId") {
		t.Fatalf("SubmitPlan = %v, want an error naming /tools/0/toolId", err)
	}
	if _, err := node.Client().Status(ctx, "bad"); err == nil {
		t.Errorf("a status of the refused plan's id: the plan was sent")
	}
}

// A failed tool's output is an error naming its state and code.
func TestTheOutputOfAFailedToolIsAnError(t *testing.T) {
	node := planbustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := node.Client().SubmitPlan(ctx, planbus.Plan{Tools: []planbus.Tool{
		{ToolID: "f", Skill: "fail", Input: map[string]any{"category": "permanent"}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if out.Success || out.Output("f", &v) == nil {
		t.Fatalf("outcome %s, output error %v: want a failure", out.Status, out.Output("f", &v))
	}
	if err := out.Output("f", &v); !strings.Contains(err.Error(), "tool f") || !strings.Contains(err.Error(), "failed") {
		t.Errorf("error %q, want it to name tool f and its state", err)
	}
}

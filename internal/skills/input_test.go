package skills_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/skills"
)

func TestInputSchemaRefusesBadInput(t *testing.T) {
	mw, err := skills.InputSchema(skills.Sleep().Manifest)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	h := mw(skills.HandlerFunc(func(context.Context, *plan.ToolCall) (skills.Result, error) {
		ran = true
		return skills.Result{}, nil
	}))
	_, err = h.Handle(context.Background(), &plan.ToolCall{Skill: "sleep", Input: json.RawMessage(`{"ms": -1}`)})
	var se *skills.Error
	if !errors.As(err, &se) || se.Category != plan.CategoryInvalidInput || !strings.Contains(se.Message, "at /ms") {
		t.Fatalf("err = %v, want invalid input naming /ms", err)
	}
	if ran {
		t.Error("the handler ran on invalid input")
	}
	if _, err := h.Handle(context.Background(), &plan.ToolCall{Skill: "sleep", Input: json.RawMessage(`{"ms": 5}`)}); err != nil || !ran {
		t.Errorf("valid input: err %v, ran %v", err, ran)
	}
}

func TestInputSchemaThatDoesNotCompile(t *testing.T) {
	_, err := skills.InputSchema(skills.Manifest{Name: "x", InputSchema: json.RawMessage(`{"type": 5}`)})
	if err == nil || !strings.Contains(err.Error(), "x: input schema") {
		t.Fatalf("err = %v", err)
	}
}

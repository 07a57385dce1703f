package skill_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

var sleepManifest = skill.Manifest{Name: "sleep",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`)}

func TestInputSchemaRefusesBadInput(t *testing.T) {
	mw, err := skill.InputSchema(sleepManifest)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input string
		place string // where the error says the input is wrong; empty: valid
	}{
		{"valid", `{"ms": 5}`, ""},
		{"empty object", `{}`, ""},
		{"below the minimum", `{"ms": -1}`, "at /ms"},
		{"wrong type", `{"ms": "5"}`, "at /ms"},
		{"unknown member", `{"ms": 5, "s": 1}`, "at /: additional properties 's'"},
		{"not an object", `[5]`, "at /: got array, want object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			h := mw(skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
				ran = true
				return skill.Result{}, nil
			}))
			_, err := h.Handle(context.Background(), &skill.Call{Skill: "sleep", Input: json.RawMessage(tt.input)})
			if tt.place == "" {
				if err != nil || !ran {
					t.Errorf("got error %v, ran %v; want the handler to run", err, ran)
				}
				return
			}
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, "skill sleep: input", tt.place)
			if ran {
				t.Error("the handler ran on invalid input")
			}
		})
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/planbustest"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/skill/skilltest"
)

// TestWordcount calls the skill as a worker would, without one:
// skilltest runs it through the worker's middleware (the input checked
// against the manifest's schema, panics recovered, the timeout applied).
func TestWordcount(t *testing.T) {
	tests := []struct {
		name string
		text string
		want wordcountOutput
	}{
		{"two lines", "planbus turns requests into plans\nand runs them", wordcountOutput{Words: 8, Lines: 2, Characters: 47}},
		{"empty", "", wordcountOutput{}},
		{"spaces only", "  \t ", wordcountOutput{Lines: 1, Characters: 4}},
		{"unicode", "größe ändern\n", wordcountOutput{Words: 2, Lines: 1, Characters: 13}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := skilltest.Call(t, wordcount(), wordcountInput{Text: tt.text})
			if err != nil {
				t.Fatal(err)
			}
			if got := skilltest.Output[wordcountOutput](t, res); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWordcountRefusesBadInput(t *testing.T) {
	for _, input := range []string{`{}`, `{"text": 5}`, `{"text": "a", "lang": "en"}`, `"text"`} {
		_, err := skilltest.Call(t, wordcount(), json.RawMessage(input))
		if info, _ := skill.ErrorInfo(err); info == nil || info.Code != planbus.CodeInvalidInput {
			t.Errorf("input %s: got %v, want INVALID_INPUT", input, err)
		}
	}
}

// The worker of this example on a planbus node of its own: the plan of
// plan.json echoes a text and counts its words.
func TestWordcountOnANode(t *testing.T) {
	node := planbustest.Start(t, planbustest.WithSkills(wordcount()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doc, err := os.ReadFile("plan.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := node.Client().RunPlan(ctx, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got wordcountOutput
	if err := out.Output("count", &got); err != nil {
		t.Fatalf("outcome %s: %v", out.Status, err)
	}
	if want := (wordcountOutput{Words: 12, Lines: 2, Characters: 68}); got != want {
		t.Errorf("counted %+v, want %+v", got, want)
	}
}

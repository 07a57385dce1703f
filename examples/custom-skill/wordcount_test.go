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
)

// handler wraps wordcount as a worker does: the input is checked against
// the manifest's schema before the handler runs.
func handler(t *testing.T) skill.Handler {
	t.Helper()
	s := wordcount()
	check, err := skill.InputSchema(s.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return skill.Chain(s.Handler, skill.Recover, check, skill.Timeout)
}

func TestWordcount(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  wordcountOutput
	}{
		{"two lines", `{"text": "planbus turns requests into plans\nand runs them"}`, wordcountOutput{Words: 8, Lines: 2, Characters: 47}},
		{"empty", `{"text": ""}`, wordcountOutput{}},
		{"spaces only", `{"text": "  \t "}`, wordcountOutput{Lines: 1, Characters: 4}},
		{"unicode", `{"text": "größe ändern\n"}`, wordcountOutput{Words: 2, Lines: 1, Characters: 13}},
	}
	h := handler(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.Handle(context.Background(), &skill.Call{Skill: "wordcount", Attempt: 1, TimeoutMs: 1000, Input: json.RawMessage(tt.input)})
			if err != nil {
				t.Fatal(err)
			}
			var got wordcountOutput
			if err := json.Unmarshal(res.Output, &got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWordcountRefusesBadInput(t *testing.T) {
	h := handler(t)
	for _, input := range []string{`{}`, `{"text": 5}`, `{"text": "a", "lang": "en"}`, `"text"`} {
		_, err := h.Handle(context.Background(), &skill.Call{Skill: "wordcount", Attempt: 1, TimeoutMs: 1000, Input: json.RawMessage(input)})
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

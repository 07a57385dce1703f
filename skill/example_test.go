package skill_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// A skill of one's own: a manifest with an input schema, and a handler.
// A worker wraps it in the same middleware as here.
func Example() {
	wordcount := skill.Skill{
		Manifest: skill.Manifest{
			Name: "wordcount", Description: "Counts the words of a text.", Version: "1",
			InputSchema: json.RawMessage(`{"type":"object","required":["text"],
				"properties":{"text":{"type":"string"}},"additionalProperties":false}`),
		},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := skill.DecodeInput(call, &in); err != nil {
				return skill.Result{}, err
			}
			out, err := json.Marshal(map[string]int{"words": len(strings.Fields(in.Text))})
			return skill.Result{Output: out}, err
		}),
	}
	h, err := skill.Wrap(wordcount, nil) // as a worker runs it; nil: no logging
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, input := range []string{`{"text": "to be or not to be"}`, `{"txt": "typo"}`} {
		call := &skill.Call{PlanID: "p1", ToolID: "count", Skill: "wordcount", Attempt: 1, Timeout: time.Second,
			Input: json.RawMessage(input)}
		res, err := h.Handle(context.Background(), call)
		if err != nil {
			info, _ := skill.ErrorInfo(err)
			fmt.Println(info.Code, "retry:", planbus.Retryable(info.Category))
			continue
		}
		fmt.Println(string(res.Output))
	}
	// Output:
	// {"words":6}
	// INVALID_INPUT retry: false
}

// A worker reports a handler's failure with ErrorInfo; the category
// decides whether the call is retried.
func ExampleErrorInfo() {
	lookup := skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
		return skill.Result{}, skill.Permanent("NO_USER", "user %d does not exist", 42)
	})
	_, err := lookup.Handle(context.Background(), &skill.Call{Skill: "lookup"})
	info, _ := skill.ErrorInfo(err)
	fmt.Printf("%s %s: %s (retry: %v)\n", info.Category, info.Code, info.Message, planbus.Retryable(info.Category))
	// Output: permanent NO_USER: user 42 does not exist (retry: false)
}

// Handlers log through the logger in their context, which says which call
// the line is about.
func ExampleLogger() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a time would change the output at each run
			}
			return a
		}}))
	h := skill.Logger(log)(skill.HandlerFunc(func(ctx context.Context, _ *skill.Call) (skill.Result, error) {
		skill.Log(ctx).Info("working")
		return skill.Result{}, nil
	}))
	_, _ = h.Handle(context.Background(), &skill.Call{PlanID: "p1", ToolID: "count", Skill: "wordcount", Attempt: 1})
	// Output: level=INFO msg=working plan_id=p1 tool_id=count skill=wordcount attempt=1
}

// Recover keeps a panicking handler from taking its worker down.
func ExampleRecover() {
	h := skill.Recover(skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
		panic("the handler has a bug")
	}))
	_, err := h.Handle(context.Background(), &skill.Call{Skill: "buggy"})
	info, _ := skill.ErrorInfo(err)
	fmt.Println(info.Category, info.Code)
	// Output: internal TOOL_PANIC
}

package skill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/skill"
)

// The handler's logger carries the call's identity and the base logger's
// own fields, whatever the middleware between them.
func TestLoggerPutsTheCallsLoggerInContext(t *testing.T) {
	var buf bytes.Buffer
	base := zerolog.New(&buf).With().Str("worker", "w-1").Logger()
	h := skill.Chain(skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		zerolog.Ctx(ctx).Info().Int("words", 3).Msg("counted")
		return skill.Result{}, nil
	}), skill.Recover, skill.Logger(base), skill.Timeout)

	call := newCall("wordcount", `{}`)
	call.Attempt, call.TimeoutMs = 2, 60_000
	if _, err := h.Handle(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "info", "message": "counted", "worker": "w-1", "words": 3.0,
		"plan_id": "p1", "tool_id": "t1", "skill": "wordcount", "attempt": 2.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log line (-want +got):\n%s", diff)
	}
}

// Calls at once each get their own logger.
func TestLoggerIsPerCall(t *testing.T) {
	var buf bytes.Buffer
	h := skill.Logger(zerolog.New(&buf))(skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		zerolog.Ctx(ctx).Info().Msg("")
		return skill.Result{}, nil
	}))
	for _, tool := range []string{"a", "b"} {
		call := newCall("echo", `{}`)
		call.ToolID = tool
		if _, err := h.Handle(context.Background(), call); err != nil {
			t.Fatal(err)
		}
	}
	var tools []string
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var line struct {
			ToolID string `json:"tool_id"`
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, line.ToolID)
	}
	if diff := cmp.Diff([]string{"a", "b"}, tools); diff != "" {
		t.Errorf("tool ids logged (-want +got):\n%s", diff)
	}
}

package skill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/skill"
)

// jsonLogger logs JSON lines to w from debug level up, without their time.
func jsonLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}

// The handler's logger carries the call's identity and the base logger's
// own fields, whatever the middleware between them.
func TestLoggerPutsTheCallsLoggerInContext(t *testing.T) {
	var buf bytes.Buffer
	base := jsonLogger(&buf).With("worker", "w-1")
	h := skill.Chain(skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		skill.Log(ctx).Info("counted", "words", 3)
		return skill.Result{}, nil
	}), skill.Recover, skill.Logger(base), skill.Timeout)

	call := newCall("wordcount", `{}`)
	call.Attempt, call.Timeout = 2, time.Minute
	if _, err := h.Handle(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "INFO", "msg": "counted", "worker": "w-1", "words": 3.0,
		"plan_id": "p1", "tool_id": "t1", "skill": "wordcount", "attempt": 2.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log line (-want +got):\n%s", diff)
	}
}

// Calls at once each get their own logger.
func TestLoggerIsPerCall(t *testing.T) {
	var buf bytes.Buffer
	h := skill.Logger(jsonLogger(&buf))(skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		skill.Log(ctx).Info("")
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

// A handler run without Logger, or under Logger(nil), gets a logger all
// the same, one that logs nothing, and never one of an outer call.
func TestLogWithoutALoggerDiscards(t *testing.T) {
	var buf bytes.Buffer
	outer := skill.Logger(jsonLogger(&buf))
	tests := []struct {
		name string
		h    func(skill.Handler) skill.Handler
	}{
		{"no Logger", func(h skill.Handler) skill.Handler { return h }},
		{"Logger(nil)", skill.Logger(nil)},
		{"Logger(nil) inside another", func(h skill.Handler) skill.Handler { return outer(skill.Logger(nil)(h)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h(skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
				log := skill.Log(ctx)
				if log == nil {
					t.Fatal("got a nil logger")
				}
				if log.Enabled(ctx, slog.LevelError) {
					t.Error("the logger is enabled at error level, want one that logs nothing")
				}
				log.Error("lost")
				return skill.Result{}, nil
			}))
			if _, err := h.Handle(context.Background(), newCall("echo", `{}`)); err != nil {
				t.Fatal(err)
			}
			if buf.Len() != 0 {
				t.Errorf("logged %q, want nothing", buf.String())
			}
		})
	}
}

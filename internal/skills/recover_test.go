package skills_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/skills"
)

func TestRecover(t *testing.T) {
	tests := []struct {
		name    string
		handler skills.HandlerFunc
		want    []string // parts of the TOOL_PANIC message
	}{
		{"string", func(context.Context, *plan.ToolCall) (skills.Result, error) { panic("boom") },
			[]string{"skill demo panicked: boom", "recover_test.go"}},
		{"error value", func(context.Context, *plan.ToolCall) (skills.Result, error) { panic(io.ErrUnexpectedEOF) },
			[]string{"skill demo panicked: unexpected EOF"}},
		{"nil map write", func(context.Context, *plan.ToolCall) (skills.Result, error) {
			var m map[string]int
			//lint:ignore SA5000 the point is a runtime panic
			m["x"]++
			return skills.Result{}, nil
		}, []string{"assignment to entry in nil map"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := skills.Recover(tt.handler).Handle(t.Context(), newCall("demo", `{}`))
			wantError(t, err, plan.CategoryInternal, plan.CodeToolPanic)
			wantMessage(t, err, tt.want...)
			if res.Output != nil {
				t.Errorf("got output %s, want none", res.Output)
			}
		})
	}
}

func TestRecoverPassesThrough(t *testing.T) {
	failure := errors.New("no such user")
	tests := []struct {
		name    string
		res     skills.Result
		err     error
		wantOut string
	}{
		{"result", skills.Result{Output: []byte(`{"ok":true}`)}, nil, `{"ok":true}`},
		{"error", skills.Result{}, failure, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := skills.Recover(skills.HandlerFunc(func(context.Context, *plan.ToolCall) (skills.Result, error) {
				return tt.res, tt.err
			}))
			res, err := h.Handle(t.Context(), newCall("demo", `{}`))
			if err != tt.err {
				t.Errorf("got error %v, want %v", err, tt.err)
			}
			if string(res.Output) != tt.wantOut {
				t.Errorf("got output %s, want %s", res.Output, tt.wantOut)
			}
		})
	}
}

package skill_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// A panic becomes a TOOL_PANIC error naming the panic; its stack goes to
// the call's logger, not into the message, which every client sees.
func TestRecover(t *testing.T) {
	tests := []struct {
		name    string
		handler skill.HandlerFunc
		want    []string // parts of the TOOL_PANIC message
	}{
		{"string", func(context.Context, *skill.Call) (skill.Result, error) { panic("boom") },
			[]string{"skill demo panicked: boom", "its stack is in the worker's log"}},
		{"error value", func(context.Context, *skill.Call) (skill.Result, error) { panic(io.ErrUnexpectedEOF) },
			[]string{"skill demo panicked: unexpected EOF"}},
		{"nil map write", func(context.Context, *skill.Call) (skill.Result, error) {
			var m map[string]int
			//lint:ignore SA5000 the point is a runtime panic
			m["x"]++
			return skill.Result{}, nil
		}, []string{"assignment to entry in nil map"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged strings.Builder
			h := skill.Logger(jsonLogger(&logged))(skill.Recover(tt.handler))
			res, err := h.Handle(t.Context(), newCall("demo", `{}`))
			wantError(t, err, planbus.CategoryInternal, planbus.CodeToolPanic)
			wantMessage(t, err, tt.want...)
			if res.Output != nil {
				t.Errorf("got output %s, want none", res.Output)
			}
			if strings.Contains(err.Error(), "recover_test.go") || strings.Contains(err.Error(), "goroutine") {
				t.Errorf("the message holds the stack: %q", err.Error())
			}
			if !strings.Contains(logged.String(), "recover_test.go") || !strings.Contains(logged.String(), `"level":"ERROR"`) {
				t.Errorf("the stack was not logged at error level: %s", logged.String())
			}
		})
	}
}

func TestRecoverPassesThrough(t *testing.T) {
	failure := errors.New("no such user")
	tests := []struct {
		name    string
		res     skill.Result
		err     error
		wantOut string
	}{
		{"result", skill.Result{Output: []byte(`{"ok":true}`)}, nil, `{"ok":true}`},
		{"error", skill.Result{}, failure, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := skill.Recover(skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
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

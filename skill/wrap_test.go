package skill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// The program's middleware runs inside the logger, the panic recovery and
// the deadline, and outside the schema checks: it has the call's logger
// and deadline, sees the INVALID_INPUT and OUTPUT_INVALID errors as they
// are reported, and a panic in it fails the call, not the program.
func TestWrapOrder(t *testing.T) {
	s := skill.Skill{
		Manifest: skill.Manifest{Name: "demo",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"panic":{"type":"boolean"}}}`),
			OutputSchema: json.RawMessage(`{"type":"integer","maximum":9}`)},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			return skill.Result{Output: call.Input[len(`{"n":`) : len(call.Input)-1]}, nil
		}),
	}
	type seen struct {
		logged, deadline bool
		code             planbus.Code
	}
	var got seen
	probe := func(next skill.Handler) skill.Handler {
		return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			if strings.Contains(string(call.Input), "panic") {
				panic("the middleware has a bug")
			}
			skill.Log(ctx).Info("in the middleware")
			_, got.deadline = ctx.Deadline()
			res, err := next.Handle(ctx, call)
			if info, _ := skill.ErrorInfo(err); info != nil {
				got.code = info.Code
			}
			return res, err
		})
	}
	var logs bytes.Buffer
	h, err := skill.Wrap(s, jsonLogger(&logs), probe)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		input string
		want  seen
		code  planbus.Code // the error reported, "" for none
	}{
		{`{"n":5}`, seen{true, true, ""}, ""},
		{`{"n":"five"}`, seen{true, true, planbus.CodeInvalidInput}, planbus.CodeInvalidInput},
		{`{"n":12}`, seen{true, true, planbus.CodeOutputInvalid}, planbus.CodeOutputInvalid},
		{`{"panic":true}`, seen{}, planbus.CodeToolPanic},
	}
	for _, tt := range tests {
		got, logs = seen{}, bytes.Buffer{}
		call := newCall("demo", tt.input)
		call.Timeout = time.Minute
		_, err := h.Handle(t.Context(), call)
		info, _ := skill.ErrorInfo(err)
		var code planbus.Code
		if info != nil {
			code = info.Code
		}
		if code != tt.code {
			t.Errorf("input %s: got error %v, want %q", tt.input, err, tt.code)
		}
		got.logged = strings.Contains(logs.String(), `"msg":"in the middleware","plan_id":"p1"`)
		if got != tt.want {
			t.Errorf("input %s: the middleware saw %+v, want %+v (log: %s)", tt.input, got, tt.want, logs.String())
		}
	}
}

// A manifest whose schema does not compile is refused, naming the skill.
func TestWrapRefusesABadSchema(t *testing.T) {
	for _, m := range []skill.Manifest{
		{Name: "bad-in", InputSchema: json.RawMessage(`{"type": 5}`)},
		{Name: "bad-out", OutputSchema: json.RawMessage(`{"type": 5}`)},
	} {
		_, err := skill.Wrap(skill.Skill{Manifest: m, Handler: skill.HandlerFunc(nil)}, nil)
		if err == nil || !strings.Contains(err.Error(), m.Name) {
			t.Errorf("manifest %s: got error %v, want one naming it", m.Name, err)
		}
	}
}

func TestResultCheck(t *testing.T) {
	tests := []struct {
		name string
		res  skill.Result
		code planbus.Code // "" for no error
	}{
		{"empty", skill.Result{}, ""},
		{"output and patch", skill.Result{Output: json.RawMessage(`[1]`), StatePatch: json.RawMessage(` {"a": null}`)}, ""},
		{"output not JSON", skill.Result{Output: json.RawMessage(`{`)}, "OUTPUT_NOT_JSON"},
		{"patch an array", skill.Result{StatePatch: json.RawMessage(`[]`)}, "INVALID_STATE_PATCH"},
		{"patch not JSON", skill.Result{StatePatch: json.RawMessage(`{"a"`)}, "INVALID_STATE_PATCH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.res.Check()
			if tt.code == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			wantError(t, err, planbus.CategoryInternal, tt.code)
		})
	}
}

func TestCallIdempotencyKey(t *testing.T) {
	call := newCall("demo", `{}`)
	call.Attempt = 2
	if got, want := call.IdempotencyKey(), "p1/t1/2"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

package skill_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

func TestOutputSchemaRefusesBadOutput(t *testing.T) {
	m := skill.Manifest{Name: "count", OutputSchema: json.RawMessage(`{"type":"object","required":["words"],
		"properties":{"words":{"type":"integer","minimum":0}},"additionalProperties":false}`)}
	mw, err := skill.OutputSchema(m)
	if err != nil {
		t.Fatal(err)
	}
	handlerErr := skill.Transient("BUSY", "try later")
	tests := []struct {
		name   string
		out    string
		err    error
		place  string // where the error says the output is wrong; empty: passes
		output string // the output passed on
	}{
		{name: "valid", out: `{"words": 3}`, output: `{"words": 3}`},
		{name: "wrong type", out: `{"words": "3"}`, place: "at /words"},
		{name: "below the minimum", out: `{"words": -1}`, place: "at /words"},
		{name: "missing", out: `{}`, place: "at /: missing property 'words'"},
		{name: "nil is null", out: ``, place: "at /: got null, want object"},
		{name: "not JSON", out: `{"words":`, output: `{"words":`},
		{name: "handler error", out: `{"words": "x"}`, err: handlerErr, output: `{"words": "x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mw(skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
				var out json.RawMessage
				if tt.out != "" {
					out = json.RawMessage(tt.out)
				}
				return skill.Result{Output: out, StatePatch: json.RawMessage(`{"k":1}`)}, tt.err
			}))
			res, err := h.Handle(context.Background(), newCall("count", `{}`))
			if tt.place == "" {
				if err != tt.err || string(res.Output) != tt.output || string(res.StatePatch) != `{"k":1}` {
					t.Errorf("got %s %s, %v; want the handler's result passed on", res.Output, res.StatePatch, err)
				}
				return
			}
			wantError(t, err, planbus.CategoryPermanent, planbus.CodeOutputInvalid)
			wantMessage(t, err, "skill count: output", tt.place)
			if res.Output != nil || res.StatePatch != nil {
				t.Errorf("result %s %s with the error, want none", res.Output, res.StatePatch)
			}
		})
	}
}

// schemaMiddleware is each of the manifest's schema checks, with a
// manifest that has only the schema it checks.
var schemaMiddleware = []struct {
	which string
	make  func(name string, schema json.RawMessage) (skill.Middleware, error)
}{
	{"input", func(name string, schema json.RawMessage) (skill.Middleware, error) {
		return skill.InputSchema(skill.Manifest{Name: name, InputSchema: schema})
	}},
	{"output", func(name string, schema json.RawMessage) (skill.Middleware, error) {
		return skill.OutputSchema(skill.Manifest{Name: name, OutputSchema: schema})
	}},
}

// A manifest without the schema gets no check: the input comes back as the
// output, whatever it is.
func TestSchemaMiddlewareWithoutASchemaChecksNothing(t *testing.T) {
	for _, m := range schemaMiddleware {
		mw, err := m.make("free", nil)
		if err != nil {
			t.Fatal(err)
		}
		h := mw(skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			return skill.Result{Output: call.Input}, nil
		}))
		res, err := h.Handle(context.Background(), newCall("free", `[1,"x"]`))
		if err != nil || string(res.Output) != `[1,"x"]` {
			t.Errorf("%s: got %s, %v; want the input back", m.which, res.Output, err)
		}
	}
}

// A schema that does not compile is the middleware's error, naming the
// skill and which schema.
func TestSchemaMiddlewareThatDoesNotCompile(t *testing.T) {
	for _, m := range schemaMiddleware {
		_, err := m.make("x", json.RawMessage(`{"type": 5}`))
		if want := "skill: x: " + m.which + " schema"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want one naming %q", err, want)
		}
	}
}

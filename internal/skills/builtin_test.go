package skills_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/skill"
)

// guard bounds how long a test waits for something that should happen
// promptly. It only turns a hang into a failure; no test measures time.
const guard = 30 * time.Second

// newCall returns attempt 1 of a call of skillName with the given input.
func newCall(skillName, input string) *skill.Call {
	return &skill.Call{PlanID: "p1", RequestID: "r1", ToolID: "t1", Skill: skillName,
		Attempt: 1, MaxAttempts: 3, Input: json.RawMessage(input)}
}

// wantError fails the test unless err is a *skill.Error of the category
// and code, and returns it.
func wantError(t *testing.T, err error, category planbus.Category, code planbus.Code) *skill.Error {
	t.Helper()
	var se *skill.Error
	if !errors.As(err, &se) {
		t.Fatalf("got error %v (%T), want a *skill.Error %s/%s", err, err, category, code)
	}
	if se.Category != category || se.Code != code {
		t.Fatalf("got %s/%s (%s), want %s/%s", se.Category, se.Code, se.Message, category, code)
	}
	return se
}

// wantMessage fails the test unless err's text contains every part.
func wantMessage(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("got message %q, want it to contain %q", err.Error(), p)
		}
	}
}

type outcome struct {
	res skill.Result
	err error
}

// handleAsync runs h on its own goroutine and delivers its outcome.
func handleAsync(ctx context.Context, h skill.Handler, call *skill.Call) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		res, err := h.Handle(ctx, call)
		done <- outcome{res, err}
	}()
	return done
}

// await returns what ch delivers, failing the test if that takes past guard.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("still waiting for %s after %v", what, guard)
		panic("unreachable")
	}
}

func TestEcho(t *testing.T) {
	for _, input := range []string{`{}`, `{"a":[1,2,{"b":null}],"s":"x"}`} {
		res, err := skills.Echo().Handler.Handle(t.Context(), newCall("echo", input))
		if err != nil {
			t.Fatalf("input %s: got error %v", input, err)
		}
		if string(res.Output) != input {
			t.Errorf("got output %s, want %s", res.Output, input)
		}
	}
}

func TestSleep(t *testing.T) {
	sleep := skills.Sleep().Handler

	t.Run("waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			res, err := sleep.Handle(t.Context(), newCall("sleep", `{"ms":1500}`))
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if got, want := string(res.Output), `{"sleptMs":1500}`; got != want {
				t.Errorf("got output %s, want %s", got, want)
			}
			// The bubble's clock moves only when every goroutine waits, so
			// this is exact, not a wall-clock measurement.
			if got, want := time.Since(start), 1500*time.Millisecond; got != want {
				t.Errorf("slept %v, want %v", got, want)
			}
		})
	})

	t.Run("cancel ends it early", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			done := handleAsync(ctx, sleep, newCall("sleep", `{"ms":3600000}`))
			synctest.Wait() // the handler is waiting on its timer
			cancel()
			o := <-done
			if !errors.Is(o.err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", o.err)
			}
		})
	})

	for _, input := range []string{`{"ms":-1}`, `{"ms":"5"}`, `{"ms":5,"extra":1}`} {
		t.Run("invalid "+input, func(t *testing.T) {
			_, err := sleep.Handle(t.Context(), newCall("sleep", input))
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
		})
	}
}

func TestFail(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		attempt int
		want    *skill.Error // nil: succeeds, echoing the input
	}{
		{"always by default", `{}`, 1, &skill.Error{Code: "INJECTED_FAILURE", Category: planbus.CategoryTransient, Message: "failed on purpose"}},
		{"always on later attempts", `{}`, 7, &skill.Error{Code: "INJECTED_FAILURE", Category: planbus.CategoryTransient, Message: "failed on purpose"}},
		{"chosen error", `{"category":"permanent","code":"NO_USER","message":"user 42 does not exist"}`, 1,
			&skill.Error{Code: "NO_USER", Category: planbus.CategoryPermanent, Message: "user 42 does not exist"}},
		{"first of two failing attempts", `{"attempts":2}`, 1, &skill.Error{Code: "INJECTED_FAILURE", Category: planbus.CategoryTransient, Message: "failed on purpose"}},
		{"last of two failing attempts", `{"attempts":2,"category":"network"}`, 2, &skill.Error{Code: "INJECTED_FAILURE", Category: planbus.CategoryNetwork, Message: "failed on purpose"}},
		{"attempt after the failing ones", `{"attempts":2}`, 3, nil},
		{"zero failing attempts", `{"attempts":0}`, 1, nil},
		{"unknown category", `{"category":"flaky"}`, 1, &skill.Error{Code: planbus.CodeInvalidInput, Category: planbus.CategoryInvalidInput, Message: `fail: unknown category "flaky"`}},
		{"unknown field", `{"categroy":"permanent"}`, 1, &skill.Error{Code: planbus.CodeInvalidInput, Category: planbus.CategoryInvalidInput, Message: "skill fail: input: unknown member /categroy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := newCall("fail", tt.input)
			call.Attempt = tt.attempt
			res, err := skills.Fail().Handler.Handle(t.Context(), call)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got error %v, want success", err)
				}
				if string(res.Output) != tt.input {
					t.Errorf("got output %s, want the input %s", res.Output, tt.input)
				}
				return
			}
			var got *skill.Error
			if !errors.As(err, &got) {
				t.Fatalf("got %v (%T), want *skill.Error", err, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("waits ms first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			_, err := skills.Fail().Handler.Handle(t.Context(), newCall("fail", `{"ms":250}`))
			wantError(t, err, planbus.CategoryTransient, "INJECTED_FAILURE")
			if got, want := time.Since(start), 250*time.Millisecond; got != want {
				t.Errorf("waited %v, want %v", got, want)
			}
		})
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := skills.Fail().Handler.Handle(ctx, newCall("fail", `{"ms":3600000}`))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}

func TestBuiltins(t *testing.T) {
	var got []string
	for _, s := range skills.Builtins(skills.BuiltinConfig{}) {
		got = append(got, s.Manifest.Name)
		if s.Handler == nil {
			t.Errorf("skill %s has no handler", s.Manifest.Name)
		}
	}
	if diff := cmp.Diff([]string{"echo", "sleep", "fail", "shell", "http", "remember"}, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

// TestManifests checks each built-in manifest against the skill-manifest
// schema, and its input schema against inputs the skill accepts and
// refuses, so the schemas advertised to planners match the code.
func TestManifests(t *testing.T) {
	samples := map[string]struct{ valid, invalid []string }{
		"echo":  {valid: []string{`{"anything":[1]}`}},
		"sleep": {valid: []string{`{}`, `{"ms":5}`}, invalid: []string{`{"ms":-1}`, `{"ms":1.5}`, `{"s":1}`}},
		"fail":  {valid: []string{`{"category":"permanent","attempts":2,"ms":1}`}, invalid: []string{`{"attempts":-1}`, `{"x":1}`}},
		"shell": {
			valid:   []string{`{"argv":["ls","-l"]}`, `{"argv":["cat"],"dir":"sub","env":{"K":"V"},"stdin":"x"}`},
			invalid: []string{`{}`, `{"argv":[]}`, `{"argv":"ls -l"}`, `{"argv":["ls"],"env":{"K":1}}`, `{"argv":["ls"],"shell":true}`},
		},
		"http": {
			valid:   []string{`{"url":"https://example.com/"}`, `{"method":"POST","url":"http://h/x","headers":{"A":"b"},"body":{"k":1},"timeoutMs":100}`},
			invalid: []string{`{}`, `{"url":"ftp://example.com/"}`, `{"url":"http://h","headers":{"A":1}}`, `{"url":"http://h","timeoutMs":-1}`, `{"url":"http://h","x":1}`},
		},
	}
	for _, s := range skills.Builtins(skills.BuiltinConfig{}) {
		t.Run(s.Manifest.Name, func(t *testing.T) {
			b, err := json.Marshal(s.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.Validate(schemas.SkillManifest, b); err != nil {
				t.Errorf("manifest %s: %v", b, err)
			}
			if s.Manifest.Version == "" || s.Manifest.Description == "" {
				t.Errorf("manifest %s lacks a version or description", b)
			}
			smp := samples[s.Manifest.Name]
			if s.Manifest.InputSchema == nil {
				if smp.invalid != nil {
					t.Errorf("no input schema, want one refusing %v", smp.invalid)
				}
				return
			}
			sch := compileSchema(t, s.Manifest.InputSchema)
			for _, in := range smp.valid {
				if err := sch.Validate(mustJSON(t, in)); err != nil {
					t.Errorf("input %s: got %v, want valid", in, err)
				}
			}
			for _, in := range smp.invalid {
				if err := sch.Validate(mustJSON(t, in)); err == nil {
					t.Errorf("input %s: got valid, want invalid", in)
				}
			}
		})
	}
}

func compileSchema(t *testing.T, schema json.RawMessage) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://input.json", mustJSON(t, string(schema))); err != nil {
		t.Fatalf("input schema: %v", err)
	}
	sch, err := c.Compile("mem://input.json")
	if err != nil {
		t.Fatalf("input schema: %v", err)
	}
	return sch
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s)))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

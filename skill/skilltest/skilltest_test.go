package skilltest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/skill/skilltest"
)

// probe is a skill that reports the call it was given and its context's
// deadline.
func probe(m skill.Manifest) (skill.Skill, <-chan seen) {
	ch := make(chan seen, 1)
	return skill.Skill{Manifest: m, Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		s := seen{call: *call}
		if d, ok := ctx.Deadline(); ok {
			s.deadline = time.Until(d)
		}
		ch <- s
		return skill.Result{Output: json.RawMessage(`"ok"`)}, nil
	})}, ch
}

type seen struct {
	call     skill.Call
	deadline time.Duration // 0: none
}

// The call's fields come from the manifest and the options, as a plan's
// would.
func TestCallBuildsTheCall(t *testing.T) {
	retry := &planbus.RetryPolicy{MaxAttempts: 5, BackoffMs: 10}
	tests := []struct {
		name     string
		manifest skill.Manifest
		input    any
		opts     []skilltest.Option
		want     skill.Call
	}{
		{"defaults", skill.Manifest{Name: "probe"}, nil, nil,
			skill.Call{Attempt: 1, MaxAttempts: 3, Input: json.RawMessage(`{}`), Timeout: 30 * time.Second}},
		{"the manifest's defaults", skill.Manifest{Name: "probe", TimeoutMs: 2500, RetryPolicy: retry}, map[string]int{"n": 1}, nil,
			skill.Call{Attempt: 1, MaxAttempts: 5, Input: json.RawMessage(`{"n":1}`), Timeout: 2500 * time.Millisecond}},
		{"options", skill.Manifest{Name: "probe", TimeoutMs: 2500, RetryPolicy: retry}, json.RawMessage(`{"n": 2}`),
			[]skilltest.Option{skilltest.WithAttempt(2, 4), skilltest.WithTimeout(time.Minute)},
			skill.Call{Attempt: 2, MaxAttempts: 4, Input: json.RawMessage(`{"n":2}`), Timeout: time.Minute}},
		{"no timeout", skill.Manifest{Name: "probe"}, nil, []skilltest.Option{skilltest.WithTimeout(0)},
			skill.Call{Attempt: 1, MaxAttempts: 3, Input: json.RawMessage(`{}`)}},
		{"attempt beyond the policy", skill.Manifest{Name: "probe"}, nil, []skilltest.Option{skilltest.WithAttempt(4, 1)},
			skill.Call{Attempt: 4, MaxAttempts: 4, Input: json.RawMessage(`{}`), Timeout: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, calls := probe(tt.manifest)
			res, err := skilltest.Call(t, s, tt.input, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := skilltest.Output[string](t, res); got != "ok" {
				t.Errorf("output %q, want ok", got)
			}
			got := <-calls
			want := tt.want
			want.PlanID, want.RequestID, want.ToolID, want.Skill = skilltest.PlanID, skilltest.RequestID, skilltest.ToolID, "probe"
			want.ReleasedAt = got.call.ReleasedAt
			if diff := cmp.Diff(want, got.call); diff != "" {
				t.Errorf("call (-want +got):\n%s", diff)
			}
			if got.call.ReleasedAt.IsZero() {
				t.Error("ReleasedAt is zero, want the time of the call")
			}
			if got.deadline < 0 || got.deadline > want.Timeout || (got.deadline == 0) != (want.Timeout == 0) {
				t.Errorf("ctx's deadline %v away, want within the timeout of %v", got.deadline, want.Timeout)
			}
		})
	}
}

// Call runs the skill as a worker does: schemas checked, panics
// recovered, the deadline applied, the result checked.
func TestCallRunsTheWorkersChain(t *testing.T) {
	m := skill.Manifest{Name: "demo",
		InputSchema:  json.RawMessage(`{"type":"object","required":["do"],"properties":{"do":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"string"}`)}
	s := skill.Skill{Manifest: m, Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		var in struct {
			Do string `json:"do"`
		}
		if err := skill.DecodeInput(call, &in); err != nil {
			return skill.Result{}, err
		}
		switch in.Do {
		case "panic":
			panic("a bug")
		case "hang":
			<-ctx.Done()
			return skill.Result{}, ctx.Err()
		case "number":
			return skill.Result{Output: json.RawMessage(`5`)}, nil
		case "not json":
			return skill.Result{Output: json.RawMessage(`{`)}, nil
		case "bad patch":
			return skill.Result{Output: json.RawMessage(`"x"`), StatePatch: json.RawMessage(`[1]`)}, nil
		case "fail":
			return skill.Result{}, skill.Permanent("NO_USER", "user %d does not exist", 42)
		}
		return skill.Result{Output: json.RawMessage(`"done"`)}, nil
	})}
	tests := []struct {
		input    any
		category planbus.Category
		code     planbus.Code
	}{
		{map[string]string{"do": "nothing"}, "", ""},
		{map[string]int{"do": 1}, planbus.CategoryInvalidInput, planbus.CodeInvalidInput},
		{map[string]string{}, planbus.CategoryInvalidInput, planbus.CodeInvalidInput},
		{map[string]string{"do": "panic"}, planbus.CategoryInternal, planbus.CodeToolPanic},
		{map[string]string{"do": "hang"}, planbus.CategoryTimeout, planbus.CodeToolTimeout},
		{map[string]string{"do": "number"}, planbus.CategoryPermanent, planbus.CodeOutputInvalid},
		{map[string]string{"do": "not json"}, planbus.CategoryInternal, "OUTPUT_NOT_JSON"},
		{map[string]string{"do": "bad patch"}, planbus.CategoryInternal, "INVALID_STATE_PATCH"},
		{map[string]string{"do": "fail"}, planbus.CategoryPermanent, "NO_USER"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.input), func(t *testing.T) {
			t.Parallel()
			res, err := skilltest.Call(t, s, tt.input, skilltest.WithTimeout(50*time.Millisecond))
			info, _ := skill.ErrorInfo(err)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				if got := skilltest.Output[string](t, res); got != "done" {
					t.Errorf("output %q, want done", got)
				}
				return
			}
			if info == nil || info.Category != tt.category || info.Code != tt.code {
				t.Fatalf("got %+v, want %s/%s", info, tt.category, tt.code)
			}
			if res.Output != nil || res.StatePatch != nil {
				t.Errorf("got result %+v with the error, want none", res)
			}
		})
	}
}

// The program's middleware runs where a worker runs it, the handler logs
// to the logger given, and a cancelled context cancels the call.
func TestCallOptions(t *testing.T) {
	s := skill.Skill{Manifest: skill.Manifest{Name: "demo"}, Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		skill.Log(ctx).Info("handled")
		select {
		case <-ctx.Done():
			return skill.Result{}, ctx.Err()
		default:
			return skill.Result{}, nil
		}
	})}

	var order []string
	mw := func(name string) skill.Middleware {
		return func(next skill.Handler) skill.Handler {
			return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
				_, hasDeadline := ctx.Deadline()
				order = append(order, fmt.Sprintf("%s deadline=%v", name, hasDeadline))
				return next.Handle(ctx, call)
			})
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := skilltest.Call(t, s, nil, skilltest.WithMiddleware(mw("a")), skilltest.WithMiddleware(mw("b")), skilltest.WithLogger(log)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a deadline=true", "b deadline=true"}, order); diff != "" {
		t.Errorf("middleware (-want +got):\n%s", diff)
	}
	if want := "msg=handled plan_id=skilltest-plan tool_id=skilltest-tool skill=demo attempt=1"; !strings.Contains(logs.String(), want) {
		t.Errorf("log %q, want it to contain %q", logs.String(), want)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := skilltest.Call(t, s, nil, skilltest.WithContext(ctx), skilltest.WithLogger(nil))
	if info, _ := skill.ErrorInfo(err); info == nil || info.Code != planbus.CodeCancelled {
		t.Errorf("got %v, want CANCELLED", err)
	}
}

// fatalT records the test's end where a test would stop.
type fatalT struct {
	*testing.T
	msg string
}

var errFatal = errors.New("fatal")

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(errFatal)
}

// stops returns the message fn stopped the test with, "" when it did not.
func stops(t *testing.T, fn func(t testing.TB)) (msg string) {
	f := &fatalT{T: t}
	defer func() {
		if r := recover(); r != nil && r != errFatal {
			panic(r)
		}
		msg = f.msg
	}()
	fn(f)
	return ""
}

// What a test got wrong stops it, saying what.
func TestCallStopsTheTestOnItsMistakes(t *testing.T) {
	echo := skill.Skill{Manifest: skill.Manifest{Name: "echo"}, Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
		return skill.Result{Output: call.Input}, nil
	})}
	tests := []struct {
		name string
		fn   func(t testing.TB)
		want string
	}{
		{"input not JSON", func(t testing.TB) { skilltest.Call(t, echo, make(chan int)) }, "skilltest: skill echo: input: json: unsupported type"},
		{"no handler", func(t testing.TB) { skilltest.Call(t, skill.Skill{Manifest: skill.Manifest{Name: "none"}}, nil) }, `skill "none" has no handler`},
		{"bad schema", func(t testing.TB) {
			skilltest.Call(t, skill.Skill{Manifest: skill.Manifest{Name: "bad", InputSchema: json.RawMessage(`{"type": 5}`)}, Handler: echo.Handler}, nil)
		}, "bad: input schema"},
		{"output of another type", func(t testing.TB) {
			skilltest.Output[int](t, skill.Result{Output: json.RawMessage(`"five"`)})
		}, `skilltest: output "five": decoding into int`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stops(t, tt.fn); !strings.Contains(got, tt.want) {
				t.Errorf("stopped with %q, want it to contain %q", got, tt.want)
			}
		})
	}
	if got := stops(t, func(t testing.TB) { skilltest.Output[*int](t, skill.Result{}) }); got != "" {
		t.Errorf("an empty output stopped the test: %s; want it decoded as null", got)
	}
}

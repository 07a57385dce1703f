package skill_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

func TestChainOrder(t *testing.T) {
	var trace []string
	record := func(name string) skill.Middleware {
		return func(next skill.Handler) skill.Handler {
			return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
				trace = append(trace, name+" in")
				res, err := next.Handle(ctx, call)
				trace = append(trace, name+" out")
				return res, err
			})
		}
	}
	h := skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
		trace = append(trace, "handler")
		return skill.Result{}, errors.New("done")
	})
	if _, err := skill.Chain(h, record("a"), record("b"), record("c")).Handle(t.Context(), newCall("demo", `{}`)); err == nil {
		t.Fatal("got no error, want the handler's")
	}
	want := []string{"a in", "b in", "c in", "handler", "c out", "b out", "a out"}
	if diff := cmp.Diff(want, trace); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	trace = nil
	if _, err := skill.Chain(h).Handle(t.Context(), newCall("demo", `{}`)); err == nil {
		t.Fatal("got no error, want the handler's")
	}
	if diff := cmp.Diff([]string{"handler"}, trace); diff != "" {
		t.Errorf("no middleware (-want +got):\n%s", diff)
	}
}

// DecodeInput matches member names exactly, as the input schema does: a
// schema that caps "amount" must not be passed by an "AMOUNT" the decoder
// would read into the same field. Duplicates, trailing data and unknown
// members are refused too, each error naming where.
func TestDecodeInputMatchesNamesExactly(t *testing.T) {
	type payment struct {
		Amount int    `json:"amount"`
		Note   string `json:"note,omitempty"`
	}
	tests := []struct {
		input, want string
	}{
		{`{"amount":50}`, ""},
		{`{"amount":50,"AMOUNT":5000}`, "unknown member /AMOUNT"},
		{`{"Amount":5000}`, "unknown member /Amount"},
		{`{"amount":50,"amount":5000}`, `duplicate object member name "amount"`},
		{`{"amount":50} {"amount":5000}`, "after top-level value"},
		{`{"amount":"50"}`, "at /amount: got a string, want an integer (int)"},
		{`[50]`, "at /: got an array, want an object"},
	}
	for _, tt := range tests {
		var p payment
		err := skill.DecodeInput(&skill.Call{Skill: "pay", Input: []byte(tt.input)}, &p)
		if tt.want == "" {
			if err != nil || p.Amount != 50 {
				t.Errorf("%s: %v, amount %d; want 50", tt.input, err, p.Amount)
			}
			continue
		}
		var se *skill.Error
		if !errors.As(err, &se) || se.Category != "invalid_input" || !strings.Contains(se.Message, tt.want) || !strings.Contains(se.Message, "skill pay: input: ") {
			t.Errorf("%s: %v (amount %d); want an invalid_input error saying %q", tt.input, err, p.Amount, tt.want)
		}
	}
}

// ErrorInfo takes what handlers return by mistake too: nil is no error, a
// nil *Error a failure rather than a panic, and a *planbus.ErrorInfo (the
// type of a result's error) keeps its code and category.
func TestErrorInfoOfUnusualErrors(t *testing.T) {
	if info, out := skill.ErrorInfo(nil); info != nil || out != nil {
		t.Errorf("ErrorInfo(nil) = %+v, %s; want nil", info, out)
	}
	var typedNil *skill.Error
	if info, _ := skill.ErrorInfo(typedNil); info == nil || info.Code != "TOOL_FAILED" || info.Category != "internal" {
		t.Errorf("ErrorInfo of a nil *Error = %+v, want TOOL_FAILED (internal)", info)
	}
	pe := &planbus.ErrorInfo{Code: "NO_SUCH_USER", Category: "permanent", Message: "no user 7"}
	if info, _ := skill.ErrorInfo(fmt.Errorf("lookup: %w", pe)); info == nil || info.Code != "NO_SUCH_USER" || info.Category != "permanent" || info.Message != "no user 7" {
		t.Errorf("ErrorInfo of a wrapped *planbus.ErrorInfo = %+v, want its code and category", info)
	}
}

// An error given to a constructor with %w is wrapped, as fmt.Errorf wraps
// it: errors.Is and errors.As find it, and the message reads as
// fmt.Errorf's (not "%!w(...)"). Without %w nothing is wrapped.
func TestErrorsWrapWhatTheyAreGivenWithW(t *testing.T) {
	cause := fs.ErrNotExist
	for _, e := range []*skill.Error{
		skill.Transient("DB", "query: %w", cause),
		skill.Permanent("GONE", "record %d: %w", 7, cause),
		skill.Network("DIAL", "%w and %w", cause, context.DeadlineExceeded),
		skill.InvalidInput("file: %w", cause),
		skill.Failf("SLOW", planbus.CategoryTimeout, "wait: %w", cause),
	} {
		if !errors.Is(e, cause) {
			t.Errorf("%v: errors.Is(err, fs.ErrNotExist) = false", e)
		}
		if strings.Contains(e.Message, "%!") || !strings.Contains(e.Message, cause.Error()) {
			t.Errorf("message %q, want the cause's text formatted in", e.Message)
		}
	}
	var e *skill.Error
	if !errors.As(fmt.Errorf("handler: %w", skill.Network("DIAL", "%w", cause)), &e) || e.Code != "DIAL" {
		t.Errorf("errors.As did not find the *skill.Error under a wrap")
	}
	if plain := skill.Transient("X", "no cause %v", cause); plain.Unwrap() != nil {
		t.Errorf("%%v wrapped %v", plain.Unwrap())
	}
}

package skills

import (
	"context"
	"encoding/json"
	"time"

	"github.com/planbus/planbus/internal/plan"
)

// Echo's output is its input.
func Echo() Skill {
	return Skill{
		Manifest: Manifest{Name: "echo", Description: "Returns its input as its output.", Version: "1"},
		Handler: HandlerFunc(func(_ context.Context, call *plan.ToolCall) (Result, error) {
			return Result{Output: call.Input}, nil
		}),
	}
}

// Sleep waits {"ms": N} milliseconds, or until ctx ends, and returns
// {"sleptMs": N}.
func Sleep() Skill {
	return Skill{
		Manifest: Manifest{
			Name: "sleep", Description: "Waits the given milliseconds.", Version: "1",
			Parameters:  []string{"ms"},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`),
		},
		Handler: HandlerFunc(func(ctx context.Context, call *plan.ToolCall) (Result, error) {
			var in struct {
				Ms int64 `json:"ms"`
			}
			if err := DecodeInput(call, &in); err != nil {
				return Result{}, err
			}
			if in.Ms < 0 {
				return Result{}, InvalidInput("sleep: ms is %d, want >= 0", in.Ms)
			}
			t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
			out, _ := json.Marshal(map[string]int64{"sleptMs": in.Ms})
			return Result{Output: out}, nil
		}),
	}
}

// Fail fails with a chosen category, code and message. With "attempts": N
// it fails only the first N attempts of a call and then succeeds, echoing
// its input; without it, it always fails. "ms" makes it sleep first.
func Fail() Skill {
	return Skill{
		Manifest: Manifest{
			Name: "fail", Description: "Fails on purpose: the first N attempts, or always.", Version: "1",
			InputSchema: json.RawMessage(`{"type":"object","properties":{
				"category":{"type":"string"},"code":{"type":"string"},"message":{"type":"string"},
				"attempts":{"type":"integer","minimum":0},"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`),
		},
		Handler: HandlerFunc(func(ctx context.Context, call *plan.ToolCall) (Result, error) {
			var in struct {
				Category string `json:"category"`
				Code     string `json:"code"`
				Message  string `json:"message"`
				Attempts *int   `json:"attempts"`
				Ms       int64  `json:"ms"`
			}
			if err := DecodeInput(call, &in); err != nil {
				return Result{}, err
			}
			if in.Ms > 0 {
				t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return Result{}, ctx.Err()
				}
			}
			if in.Attempts != nil && call.Attempt > *in.Attempts {
				return Result{Output: call.Input}, nil
			}
			if in.Category == "" {
				in.Category = plan.CategoryTransient
			}
			if !validCategory(in.Category) {
				return Result{}, InvalidInput("fail: unknown category %q", in.Category)
			}
			if in.Code == "" {
				in.Code = "INJECTED_FAILURE"
			}
			if in.Message == "" {
				in.Message = "failed on purpose"
			}
			return Result{}, &Error{Code: in.Code, Category: in.Category, Message: in.Message}
		}),
	}
}

func validCategory(c string) bool {
	switch c {
	case plan.CategoryTimeout, plan.CategoryNetwork, plan.CategoryTransient, plan.CategoryInvalidInput,
		plan.CategoryPermanent, plan.CategoryInternal:
		return true
	}
	return false
}

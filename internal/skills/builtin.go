package skills

import (
	"context"
	"encoding/json"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// Echo's output is its input.
func Echo() skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{Name: "echo", Description: "Returns its input as its output.", Version: "1"},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			return skill.Result{Output: call.Input}, nil
		}),
	}
}

// Sleep waits {"ms": N} milliseconds, or until ctx ends, and returns
// {"sleptMs": N}.
func Sleep() skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{
			Name: "sleep", Description: "Waits the given milliseconds.", Version: "1",
			Parameters:  []string{"ms"},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`),
		},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			var in struct {
				Ms int64 `json:"ms"`
			}
			if err := skill.DecodeInput(call, &in); err != nil {
				return skill.Result{}, err
			}
			if in.Ms < 0 {
				return skill.Result{}, skill.InvalidInput("sleep: ms is %d, want >= 0", in.Ms)
			}
			t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return skill.Result{}, ctx.Err()
			}
			out, _ := json.Marshal(map[string]int64{"sleptMs": in.Ms})
			return skill.Result{Output: out}, nil
		}),
	}
}

// Fail fails with a chosen category, code and message. With "attempts": N
// it fails only the first N attempts of a call and then succeeds, echoing
// its input; without it, it always fails. "ms" makes it sleep first.
func Fail() skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{
			Name: "fail", Description: "Fails on purpose: the first N attempts, or always.", Version: "1",
			InputSchema: json.RawMessage(`{"type":"object","properties":{
				"category":{"type":"string"},"code":{"type":"string"},"message":{"type":"string"},
				"attempts":{"type":"integer","minimum":0},"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`),
		},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			var in struct {
				Category planbus.Category `json:"category"`
				Code     planbus.Code     `json:"code"`
				Message  string           `json:"message"`
				Attempts *int             `json:"attempts"`
				Ms       int64            `json:"ms"`
			}
			if err := skill.DecodeInput(call, &in); err != nil {
				return skill.Result{}, err
			}
			if in.Ms > 0 {
				t := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return skill.Result{}, ctx.Err()
				}
			}
			if in.Attempts != nil && call.Attempt > *in.Attempts {
				return skill.Result{Output: call.Input}, nil
			}
			if in.Category == "" {
				in.Category = planbus.CategoryTransient
			}
			if !validCategory(in.Category) {
				return skill.Result{}, skill.InvalidInput("fail: unknown category %q", in.Category)
			}
			if in.Code == "" {
				in.Code = planbus.CodeInjectedFailure
			}
			if in.Message == "" {
				in.Message = "failed on purpose"
			}
			return skill.Result{}, skill.Failf(in.Code, in.Category, "%s", in.Message)
		}),
	}
}

func validCategory(c planbus.Category) bool {
	switch c {
	case planbus.CategoryTimeout, planbus.CategoryNetwork, planbus.CategoryTransient, planbus.CategoryInvalidInput,
		planbus.CategoryPermanent, planbus.CategoryInternal:
		return true
	}
	return false
}

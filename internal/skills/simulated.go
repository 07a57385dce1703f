package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// simulatedSpec is compiled on first use, not at init: its {1,64} makes
// a program of 80 KB and 1,700 allocations that every command would pay.
var simulatedSpec = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z0-9_-]{1,64})(?:\(([A-Za-z0-9_,\s-]*)\))?(?:@([0-9a-zµ.]+))?(?:=([a-z_]+))?$`)
})

// maxSimulatedDelay bounds the time a simulated skill takes.
const maxSimulatedDelay = time.Hour

// Simulated builds a stand-in skill from a spec, for demos and tests of
// planners: "name(param1,param2)" succeeds, echoing its input, and
// "name(params)=network" always fails with an error of that category.
// The parameters name the positional arguments of HTN operators.
// "name@3s" takes that long to answer (a cancel or the call's timeout
// ends it sooner), and a succeeding skill whose input holds a
// "statePatch" object returns that object as its statePatch, which is
// merged into the session state as remember's input is: a GOAP action
// can say what its stand-in does to the world.
func Simulated(spec string) (skill.Skill, error) {
	m := simulatedSpec().FindStringSubmatch(strings.TrimSpace(spec))
	if m == nil {
		return skill.Skill{}, fmt.Errorf("skills: simulated skill %q: want name, name(p1,p2), name@3s or name(p1,p2)=category", spec)
	}
	name, category := m[1], planbus.Category(m[4])
	var delay time.Duration
	if m[3] != "" {
		d, err := time.ParseDuration(m[3])
		if err != nil || d <= 0 || d > maxSimulatedDelay {
			return skill.Skill{}, fmt.Errorf("skills: simulated skill %q: delay %q: want a duration above 0 and at most %s, e.g. 3s", spec, m[3], maxSimulatedDelay)
		}
		delay = d
	}
	var params []string
	for _, p := range strings.Split(m[2], ",") {
		if p = strings.TrimSpace(p); p != "" {
			params = append(params, p)
		}
	}
	if category != "" && !validCategory(category) {
		return skill.Skill{}, fmt.Errorf("skills: simulated skill %q: unknown error category %q", spec, category)
	}
	desc := "Simulated: succeeds, echoing its input; an input's statePatch object patches the session state."
	if category != "" {
		desc = "Simulated: always fails with a " + string(category) + " error."
	}
	return skill.Skill{
		Manifest: skill.Manifest{Name: name, Description: desc, Version: "sim", Parameters: params},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return skill.Result{}, ctx.Err()
				}
			}
			if category != "" {
				return skill.Result{}, &skill.Error{Code: planbus.CodeSimulatedFailure, Category: category,
					Message: fmt.Sprintf("%s is down (simulated)", name)}
			}
			out, _ := json.Marshal(map[string]any{"skill": name, "input": json.RawMessage(call.Input), "simulated": true})
			var in struct {
				StatePatch json.RawMessage `json:"statePatch"`
			}
			res := skill.Result{Output: out}
			if json.Unmarshal(call.Input, &in) == nil && len(in.StatePatch) > 0 && in.StatePatch[0] == '{' {
				res.StatePatch = in.StatePatch
			}
			return res, nil
		}),
	}, nil
}

// Remember stores its input in the session state: its input object is the
// deep-merge patch (package session), and its output is that input.
func Remember() skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{Name: "remember", Version: "1",
			Description: "Deep-merges its input into the session state (null deletes a key) and returns it."},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			return skill.Result{Output: call.Input, StatePatch: call.Input}, nil
		}),
	}
}

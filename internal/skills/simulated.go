package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/planbus/planbus/skill"
)

var simulatedSpec = regexp.MustCompile(`^([A-Za-z0-9_-]{1,64})(?:\(([A-Za-z0-9_,\s-]*)\))?(?:=([a-z_]+))?$`)

// Simulated builds a stand-in skill from a spec, for demos and tests of
// planners: "name(param1,param2)" succeeds, echoing its input, and
// "name(params)=network" always fails with an error of that category.
// The parameters name the positional arguments of HTN operators.
func Simulated(spec string) (skill.Skill, error) {
	m := simulatedSpec.FindStringSubmatch(strings.TrimSpace(spec))
	if m == nil {
		return skill.Skill{}, fmt.Errorf("skills: simulated skill %q: want name, name(p1,p2) or name(p1,p2)=category", spec)
	}
	name, category := m[1], m[3]
	var params []string
	for _, p := range strings.Split(m[2], ",") {
		if p = strings.TrimSpace(p); p != "" {
			params = append(params, p)
		}
	}
	if category != "" && !validCategory(category) {
		return skill.Skill{}, fmt.Errorf("skills: simulated skill %q: unknown error category %q", spec, category)
	}
	desc := "Simulated: succeeds, echoing its input."
	if category != "" {
		desc = "Simulated: always fails with a " + category + " error."
	}
	return skill.Skill{
		Manifest: skill.Manifest{Name: name, Description: desc, Version: "sim", Parameters: params},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			if category != "" {
				return skill.Result{}, &skill.Error{Code: "SIMULATED_FAILURE", Category: category,
					Message: fmt.Sprintf("%s is down (simulated)", name)}
			}
			out, _ := json.Marshal(map[string]any{"skill": name, "input": json.RawMessage(call.Input), "simulated": true})
			return skill.Result{Output: out}, nil
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

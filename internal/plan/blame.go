package plan

import (
	"slices"

	"github.com/planbus/planbus"
)

// BlamedSkills are the skills of an execution's failed tools, but for
// tools whose skill ran and whose output a verification gate refused: the
// step went wrong, not the skill, and another plan may well use it.
func BlamedSkills(res *planbus.ExecutionResult) []string {
	var out []string
	for _, t := range res.Tools {
		if t.State != planbus.ToolFailed && t.State != planbus.ToolTimeout {
			continue
		}
		if t.Error != nil && t.Error.Code == planbus.CodeVerifyFailed {
			continue
		}
		if !slices.Contains(out, t.Skill) {
			out = append(out, t.Skill)
		}
	}
	return out
}

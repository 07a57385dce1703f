package skills

import (
	"context"

	"github.com/planbus/planbus/internal/plan"
)

// ShellConfig configures the shell skill.
type ShellConfig struct {
	// Allow lists the programs the skill may run; empty disables it.
	Allow []string
	// Dir is the directory commands run in, and the root of relative dirs.
	Dir string
	// OutputCap caps captured stdout and stderr, each, in bytes.
	OutputCap int
}

// Shell runs a program (placeholder until the real implementation lands).
func Shell(cfg ShellConfig) Skill {
	return Skill{
		Manifest: Manifest{Name: "shell"},
		Handler: HandlerFunc(func(context.Context, *plan.ToolCall) (Result, error) {
			return Result{}, Failf(plan.CategoryPermanent, "NOT_IMPLEMENTED", "shell is not implemented yet")
		}),
	}
}

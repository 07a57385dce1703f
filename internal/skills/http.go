package skills

import (
	"context"

	"github.com/planbus/planbus/internal/plan"
)

// HTTPConfig configures the http skill.
type HTTPConfig struct {
	// AllowHosts lists the hosts requests may go to; empty allows any.
	AllowHosts []string
	// BodyCap caps the response body kept, in bytes.
	BodyCap int
}

// HTTP makes an HTTP request (placeholder until the real implementation lands).
func HTTP(cfg HTTPConfig) Skill {
	return Skill{
		Manifest: Manifest{Name: "http"},
		Handler: HandlerFunc(func(context.Context, *plan.ToolCall) (Result, error) {
			return Result{}, Failf(plan.CategoryPermanent, "NOT_IMPLEMENTED", "http is not implemented yet")
		}),
	}
}

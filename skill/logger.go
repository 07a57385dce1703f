package skill

import (
	"context"

	"github.com/rs/zerolog"
)

// Logger returns middleware that gives each call's handler a logger in its
// context, derived from base with the call's plan_id, tool_id, skill and
// attempt, so whatever the handler logs says which call it was about:
//
//	zerolog.Ctx(ctx).Info().Int("words", n).Msg("counted")
//
// A handler run without it gets zerolog's default context logger, which is
// disabled unless the program sets one.
func Logger(base zerolog.Logger) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, call *Call) (Result, error) {
			log := base.With().Str("plan_id", call.PlanID).Str("tool_id", call.ToolID).
				Str("skill", call.Skill).Int("attempt", call.Attempt).Logger()
			return next.Handle(log.WithContext(ctx), call)
		})
	}
}

package skill

import (
	"context"
	"log/slog"
)

// logKey is the context key of a call's logger.
type logKey struct{}

// discard is the logger of a context without one.
var discard = slog.New(slog.DiscardHandler)

// Logger returns middleware that gives each call's handler a logger in its
// context (Log), derived from base with the call's plan_id, tool_id, skill
// and attempt, so whatever the handler logs says which call it was about:
//
//	skill.Log(ctx).Info("counted", "words", n)
//
// A nil base logs nothing.
func Logger(base *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, call *Call) (Result, error) {
			log := discard
			if base != nil {
				log = slog.New(base.Handler().WithAttrs([]slog.Attr{
					slog.String("plan_id", call.PlanID), slog.String("tool_id", call.ToolID),
					slog.String("skill", call.Skill), slog.Int("attempt", call.Attempt)}))
			}
			return next.Handle(context.WithValue(ctx, logKey{}, log), call)
		})
	}
}

// Log returns the logger of the call ctx belongs to, which Logger put
// there; a worker runs every handler under Logger. It is never nil: in a
// context without one it is a logger that discards everything.
func Log(ctx context.Context) *slog.Logger {
	if log, ok := ctx.Value(logKey{}).(*slog.Logger); ok {
		return log
	}
	return discard
}

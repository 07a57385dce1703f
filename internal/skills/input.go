package skills

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/schemas"
)

// InputSchema returns middleware that checks each call's input against the
// manifest's input schema before the handler runs; a call that breaks it
// fails with INVALID_INPUT (never retried) naming the place. A manifest
// without a schema gets no check. The error is for a schema that does not
// compile.
func InputSchema(m Manifest) (Middleware, error) {
	if len(m.InputSchema) == 0 {
		return func(h Handler) Handler { return h }, nil
	}
	v, err := schemas.Compile("skill-"+m.Name+"-input", m.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("skills: %s: input schema: %w", m.Name, err)
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, call *plan.ToolCall) (Result, error) {
			if err := v.Validate(call.Input); err != nil {
				return Result{}, InvalidInput("skill %s: input %v", m.Name, err)
			}
			return next.Handle(ctx, call)
		})
	}, nil
}

package skill

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/schemas"
)

// InputSchema returns middleware that checks each call's input against the
// manifest's input schema (JSON Schema 2020-12) before the handler runs; a
// call that breaks it fails with INVALID_INPUT (never retried) naming the
// place, and the handler does not run. A manifest without a schema gets no
// check. The error is for a schema that does not compile.
func InputSchema(m Manifest) (Middleware, error) {
	if len(m.InputSchema) == 0 {
		return func(h Handler) Handler { return h }, nil
	}
	v, err := schemas.Compile("skill-"+m.Name+"-input", m.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("skill: %s: input schema: %w", m.Name, err)
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, call *Call) (Result, error) {
			if err := v.Validate(call.Input); err != nil {
				return Result{}, InvalidInput("skill %s: input %v", m.Name, err)
			}
			return next.Handle(ctx, call)
		})
	}, nil
}

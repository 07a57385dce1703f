package skill

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus/schemas"
)

// InputSchema returns middleware that checks each call's input against the
// manifest's input schema (JSON Schema 2020-12) before the handler runs; a
// call that breaks it fails with INVALID_INPUT (never retried) naming the
// place, and the handler does not run. A manifest without a schema gets no
// check. The error is for a schema that does not compile.
func InputSchema(m Manifest) (Middleware, error) {
	v, err := compileSchema(m.Name, "input", m.InputSchema)
	switch {
	case err != nil:
		return nil, err
	case v == nil:
		return none, nil
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

// none is middleware that leaves a handler as it is.
func none(h Handler) Handler { return h }

// compileSchema compiles a manifest's input or output schema (which says
// which); a manifest without one has a nil validator and no error.
func compileSchema(skill, which string, schema json.RawMessage) (*schemas.Validator, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	v, err := schemas.Compile("skill-"+skill+"-"+which, schema)
	if err != nil {
		return nil, fmt.Errorf("skill: %s: %s schema: %w", skill, which, err)
	}
	return v, nil
}

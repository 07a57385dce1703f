package skill

import (
	"context"
	"encoding/json"

	"github.com/planbus/planbus"
)

// OutputSchema returns middleware that checks the output of each call the
// handler completes against the manifest's output schema (JSON Schema
// 2020-12). An output that breaks it fails the attempt with OUTPUT_INVALID,
// category permanent (never retried: the handler has run, and would most
// likely return the same again), the message naming the place by its JSON
// pointer and what is wrong there, as InputSchema's does. A nil output is
// checked as null. An error from the handler, and output that is not JSON
// (the worker fails that with OUTPUT_NOT_JSON), pass through unchecked. A
// manifest without an output schema gets no check. The error is for a
// schema that does not compile.
func OutputSchema(m Manifest) (Middleware, error) {
	v, err := compileSchema(m.Name, "output", m.OutputSchema)
	switch {
	case err != nil:
		return nil, err
	case v == nil:
		return none, nil
	}
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, call *Call) (Result, error) {
			res, err := next.Handle(ctx, call)
			if err != nil {
				return res, err
			}
			out := res.Output
			if len(out) == 0 {
				out = json.RawMessage("null")
			} else if !json.Valid(out) {
				return res, nil
			}
			if err := v.Validate(out); err != nil {
				return Result{}, Failf(planbus.CodeOutputInvalid, planbus.CategoryPermanent, "skill %s: output %v", m.Name, err)
			}
			return res, nil
		})
	}, nil
}

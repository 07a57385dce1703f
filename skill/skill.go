package skill

import (
	"context"
	"encoding/json"

	"github.com/planbus/planbus"
)

// Call is one attempt of one tool call, as a handler receives it. Its
// IdempotencyKey (planId/toolId/attempt) is the same for every delivery of
// the attempt; its Token and CancelDigest are the worker's and are blank.
type Call = planbus.ToolCall

// Manifest describes a skill: its name, input schema, parameters and the
// defaults of the tools that call it.
type Manifest = planbus.SkillManifest

// Result is what a handler produces.
type Result struct {
	// Output is the tool's output, any JSON value; nil means null.
	Output json.RawMessage
	// StatePatch is an optional deep-merge patch for the session state: a
	// JSON object whose members replace the state's, objects merging and
	// null deleting a key.
	StatePatch json.RawMessage
}

// Handler runs one attempt of a tool call.
//
// Handle must honour ctx: the worker cancels it at the call's deadline,
// when the plan ends or is cancelled, and when the worker shuts down.
// ctx carries a logger (Log) with the call's plan_id, tool_id,
// skill and attempt. A handler reports failure with an error; an *Error
// says how the failure counts (its category decides whether the call is
// retried), any other error counts as category internal. Delivery is at
// least once, so a handler with side effects should make them idempotent
// with the call's IdempotencyKey. Handle may be called from many
// goroutines at once.
type Handler interface {
	Handle(ctx context.Context, call *Call) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, call *Call) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, call *Call) (Result, error) {
	return f(ctx, call)
}

// Middleware wraps a Handler, like net/http middleware.
type Middleware func(Handler) Handler

// Chain applies middleware so the first one is outermost: it sees the
// call first and the result last.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Skill is a handler with its manifest: what a worker serves.
type Skill struct {
	Manifest Manifest
	Handler  Handler
}

package skill

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/planbus/planbus"
)

// Call is one attempt of one tool call, as a handler receives it: which
// request, plan and tool it belongs to, which attempt it is, its input and
// how long it may take. A worker builds it from the call's message
// (planbus.ToolCall) and keeps that message's tokens to itself.
//
// A handler must not modify the Call or its Input: middleware further out
// reads them after the handler returns.
type Call struct {
	// PlanID, RequestID and ToolID say which plan (of which request) and
	// which of its tools the call is of.
	PlanID    string
	RequestID string
	ToolID    string
	// Skill is the skill's name.
	Skill string
	// Attempt is this attempt's number, from 1; MaxAttempts is how many
	// the tool's retry policy allows, so Attempt == MaxAttempts is the
	// last one.
	Attempt     int
	MaxAttempts int
	// Input is the tool's input, its references resolved: a JSON object.
	Input json.RawMessage
	// Timeout bounds the attempt; zero means no bound. Under a worker
	// (Timeout, the middleware) the handler's ctx ends when it is up, so
	// ctx.Deadline says when that is.
	Timeout time.Duration
	// ReleasedAt is when the dispatcher released the call to the workers;
	// zero when unknown. The time since is how long the call queued.
	ReleasedAt time.Time
}

// IdempotencyKey is PlanID/ToolID/Attempt: the same for every delivery of
// an attempt, and different for every attempt, so a handler with side
// effects can make them idempotent by it (a key of a payment API, say).
// It is also the message id the worker publishes the attempt's result
// with.
func (c *Call) IdempotencyKey() string {
	return planbus.IdempotencyKey(c.PlanID, c.ToolID, c.Attempt)
}

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

// Check reports what a worker refuses in a result a handler returned
// without error: Output that is not JSON (OUTPUT_NOT_JSON) and a
// StatePatch that is not a JSON object (INVALID_STATE_PATCH), both *Error
// of category internal. A worker also fails, with OUTPUT_TOO_LARGE, an
// output or state patch larger than its Config.OutputCap.
func (r Result) Check() error {
	if len(r.Output) > 0 && !json.Valid(r.Output) {
		return &Error{Code: planbus.CodeOutputNotJSON, Category: planbus.CategoryInternal, Message: "the skill returned output that is not JSON"}
	}
	if len(r.StatePatch) > 0 && !isObject(r.StatePatch) {
		return &Error{Code: planbus.CodeInvalidStatePatch, Category: planbus.CategoryInternal, Message: "the skill returned a state patch that is not a JSON object"}
	}
	return nil
}

// isObject tells whether data is one JSON object.
func isObject(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(data)
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

package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/planbus/planbus/internal/plan"
)

// Result is what a handler produces.
type Result struct {
	// Output is the tool's output, any JSON value; nil means null.
	Output json.RawMessage
	// StatePatch is an optional deep-merge patch for the session state.
	StatePatch json.RawMessage
}

// Handler runs one attempt of a tool call.
type Handler interface {
	Handle(ctx context.Context, call *plan.ToolCall) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, call *plan.ToolCall) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, call *plan.ToolCall) (Result, error) {
	return f(ctx, call)
}

// Middleware wraps a Handler.
type Middleware func(Handler) Handler

// Skill is a named handler with its manifest.
type Skill struct {
	Manifest Manifest
	Handler  Handler
}

// Manifest describes a skill (schemas/skill-manifest.schema.json).
type Manifest struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Version     string            `json:"version,omitempty"`
	InputSchema json.RawMessage   `json:"inputSchema,omitempty"`
	Parameters  []string          `json:"parameters,omitempty"`
	TimeoutMs   int64             `json:"timeoutMs,omitempty"`
	RetryPolicy *plan.RetryPolicy `json:"retryPolicy,omitempty"`
	Concurrency int               `json:"concurrency,omitempty"`
	// Operators are the HTN operators this skill performs; empty means the
	// operator with the skill's own name.
	Operators []string `json:"operators,omitempty"`
}

// Error is a failure a handler reports with a code and a category, so the
// dispatcher knows whether to retry and how the skill's health changes.
// Output, if set, is reported along with the error (e.g. a command's exit
// code and stderr).
type Error struct {
	Code     string
	Category string
	Message  string
	Output   json.RawMessage
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s): %s", e.Code, e.Category, e.Message) }

// Failf returns an *Error of the given category and code.
func Failf(category, code, format string, args ...any) *Error {
	return &Error{Code: code, Category: category, Message: fmt.Sprintf(format, args...)}
}

// InvalidInput returns a never-retried error about the call's input.
func InvalidInput(format string, args ...any) *Error {
	return Failf(plan.CategoryInvalidInput, plan.CodeInvalidInput, format, args...)
}

// ErrorInfo turns any handler error into the error object of a result. An
// error that is not an *Error counts as category internal, code TOOL_FAILED.
func ErrorInfo(err error) (*plan.ErrorInfo, json.RawMessage) {
	var se *Error
	if errors.As(err, &se) {
		return &plan.ErrorInfo{Code: se.Code, Category: se.Category, Message: se.Message}, se.Output
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &plan.ErrorInfo{Code: plan.CodeToolTimeout, Category: plan.CategoryTimeout, Message: err.Error()}, nil
	}
	if errors.Is(err, context.Canceled) {
		return &plan.ErrorInfo{Code: plan.CodeCancelled, Category: plan.CategoryCancelled, Message: err.Error()}, nil
	}
	return &plan.ErrorInfo{Code: plan.CodeToolFailed, Category: plan.CategoryInternal, Message: err.Error()}, nil
}

// DecodeInput unmarshals a call's input into v, strictly: unknown fields
// are an invalid-input error naming them.
func DecodeInput(call *plan.ToolCall, v any) error {
	dec := json.NewDecoder(bytes.NewReader(call.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return InvalidInput("skill %s: input: %v", call.Skill, err)
	}
	return nil
}

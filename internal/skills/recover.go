package skills

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/planbus/planbus/internal/plan"
)

// Recover turns a panic in the handler into an internal error with code
// TOOL_PANIC, so one bad call cannot take the worker down.
func Recover(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, call *plan.ToolCall) (res Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = panicError(call, r)
			}
		}()
		return next.Handle(ctx, call)
	})
}

// panicError must be called from the deferred function that recovered r, so
// that the stack it records still holds the frames that panicked.
func panicError(call *plan.ToolCall, r any) *Error {
	return &Error{Code: plan.CodeToolPanic, Category: plan.CategoryInternal,
		Message: fmt.Sprintf("skill %s panicked: %v\n%s", call.Skill, r, debug.Stack())}
}

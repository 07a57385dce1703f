package skill

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/planbus/planbus"
)

// Recover turns a panic in the handler into an error of category internal,
// code TOOL_PANIC, whose message holds the panic and its stack, so one bad
// call cannot take the worker down.
func Recover(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, call *Call) (res Result, err error) {
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
func panicError(call *Call, r any) *Error {
	return &Error{Code: planbus.CodeToolPanic, Category: planbus.CategoryInternal,
		Message: fmt.Sprintf("skill %s panicked: %v\n%s", call.Skill, r, debug.Stack())}
}

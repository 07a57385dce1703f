package skill

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/planbus/planbus"
)

// Recover turns a panic in the handler into an error of category internal,
// code TOOL_PANIC, whose message holds the panic's value, so one bad call
// cannot take the worker down. The stack is logged at error level on the
// call's logger (Log(ctx); Logger puts it there), not put in the
// message: results, events and outcomes go to every client, and a stack
// names the worker's files and code.
func Recover(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, call *Call) (res Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = panicError(ctx, call, r)
			}
		}()
		return next.Handle(ctx, call)
	})
}

// panicError must be called from the deferred function that recovered r, so
// that the stack it logs still holds the frames that panicked.
func panicError(ctx context.Context, call *Call, r any) *Error {
	Log(ctx).Error("skill panicked", slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
	return &Error{Code: string(planbus.CodeToolPanic), Category: string(planbus.CategoryInternal),
		Message: fmt.Sprintf("skill %s panicked: %v (its stack is in the worker's log)", call.Skill, r)}
}

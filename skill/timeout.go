package skill

import (
	"context"

	"github.com/planbus/planbus"
)

// Timeout bounds each call to its Timeout (no bound when it is 0). When
// the deadline passes it returns a TOOL_TIMEOUT error of category timeout
// at once, even if the handler ignores ctx; such a handler's goroutine is
// left to finish on its own and its result is dropped. When ctx is
// cancelled first it returns a CANCELLED error of category cancelled. The
// handler runs on a goroutine of its own, where a Recover further out
// cannot see its panics, so Timeout turns them into TOOL_PANIC errors
// itself.
func Timeout(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, call *Call) (Result, error) {
		d := call.Timeout
		if d <= 0 {
			return next.Handle(ctx, call)
		}
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		type outcome struct {
			res Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- outcome{err: panicError(ctx, call, r)}
				}
			}()
			res, err := next.Handle(ctx, call)
			done <- outcome{res, err}
		}()
		select {
		case o := <-done:
			if o.err != nil && ctx.Err() == context.DeadlineExceeded {
				return Result{}, timeoutError(call)
			}
			return o.res, o.err
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return Result{}, timeoutError(call)
			}
			return Result{}, Failf(planbus.CodeCancelled, planbus.CategoryCancelled, "call cancelled: %v", context.Cause(ctx))
		}
	})
}

func timeoutError(call *Call) *Error {
	return Failf(planbus.CodeToolTimeout, planbus.CategoryTimeout, "Tool exceeded %dms timeout", call.Timeout.Milliseconds())
}

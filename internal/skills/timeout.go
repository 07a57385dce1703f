package skills

import (
	"context"
	"time"

	"github.com/planbus/planbus/internal/plan"
)

// Timeout bounds each call to its TimeoutMs. When the deadline passes it
// returns a TOOL_TIMEOUT error of category timeout at once, even if the
// handler ignores ctx; such a handler's goroutine is left to finish on its
// own and its result is dropped. The handler runs on a goroutine of its own,
// where a Recover further out cannot see its panics, so Timeout turns them
// into TOOL_PANIC errors itself.
func Timeout(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, call *plan.ToolCall) (Result, error) {
		d := time.Duration(call.TimeoutMs) * time.Millisecond
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
					done <- outcome{err: panicError(call, r)}
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
			return Result{}, Failf(plan.CategoryCancelled, plan.CodeCancelled, "call cancelled: %v", context.Cause(ctx))
		}
	})
}

func timeoutError(call *plan.ToolCall) *Error {
	return Failf(plan.CategoryTimeout, plan.CodeToolTimeout, "Tool exceeded %dms timeout", call.TimeoutMs)
}

// Chain applies middleware so the first one is outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

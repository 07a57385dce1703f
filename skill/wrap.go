package skill

import (
	"log/slog"
)

// Wrap returns s's handler wrapped in the middleware a worker runs every
// skill under, the first outermost:
//
//  1. Logger(log): the call's logger in ctx (Log); a nil log discards.
//  2. Recover: a panic becomes a TOOL_PANIC error, its stack logged.
//  3. Timeout: the call's Timeout enforced, so it bounds what follows.
//  4. mw, the program's own middleware (worker.WithMiddleware), in order.
//  5. InputSchema(s.Manifest): input that breaks the manifest's input
//     schema fails with INVALID_INPUT before the handler runs.
//  6. OutputSchema(s.Manifest): output that breaks its output schema
//     fails with OUTPUT_INVALID, which mw sees as it is reported.
//
// Package worker serves each skill with the handler Wrap returns, and
// package skilltest calls one with it, so a test sees a call as a worker
// runs it. What a worker checks of the result after the chain is
// Result.Check. The error is for a manifest whose schemas do not compile.
func Wrap(s Skill, log *slog.Logger, mw ...Middleware) (Handler, error) {
	checkIn, err := InputSchema(s.Manifest)
	if err != nil {
		return nil, err
	}
	checkOut, err := OutputSchema(s.Manifest)
	if err != nil {
		return nil, err
	}
	all := make([]Middleware, 0, len(mw)+5)
	all = append(all, Logger(log), Recover, Timeout)
	all = append(all, mw...)
	all = append(all, checkIn, checkOut)
	return Chain(s.Handler, all...), nil
}

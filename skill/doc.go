// Package skill is the API of planbus tools: a skill is a Handler with a
// Manifest, served by a worker (package worker) to every plan that calls it.
//
// A Handler looks like a net/http handler. It receives one attempt of one
// tool call and returns the tool's output or an error:
//
//	count := skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
//		var in struct{ Text string `json:"text"` }
//		if err := skill.DecodeInput(call, &in); err != nil {
//			return skill.Result{}, err // INVALID_INPUT: never retried
//		}
//		n := len(strings.Fields(in.Text))
//		skill.Log(ctx).Debug("counted", "words", n)
//		return skill.Result{Output: json.RawMessage(strconv.Itoa(n))}, nil
//	})
//
// # Typed skills
//
// Func makes a skill of a function of typed input and output. The
// manifest's input and output schemas are derived from the types, the
// input is decoded and the output encoded for it:
//
//	type input struct {
//		Text  string `json:"text" jsonschema:"the text to count the words of"`
//		Limit int    `json:"limit,omitempty"` // optional: a plan may leave it out
//	}
//	count := skill.Func("wordcount", "Counts the words of a text.",
//		func(ctx context.Context, in input) (int, error) {
//			return len(strings.Fields(in.Text)), nil
//		})
//
// A field is required unless tagged omitempty or omitzero (see Func).
//
// # Calls
//
// A Call carries the request, plan and tool it belongs to, the attempt
// number, the input and the attempt's timeout; the worker keeps the
// tokens of the call's message (planbus.ToolCall) to itself. Delivery is
// at least once: a call whose worker died is delivered again, with the
// same IdempotencyKey (planId/toolId/attempt), so a handler with side
// effects can make them idempotent.
//
// The handler's context ends at the call's deadline, when the plan ends or
// is cancelled, and when the worker shuts down (once its drain time is up);
// handlers must return soon after. context.Cause tells which: the
// deadline's context.DeadlineExceeded, worker.ErrPlanEnded or
// worker.ErrShuttingDown. A worker's Run does not wait for a handler that
// ignores its context past the drain time. The context carries a logger for
// the call: Log(ctx), a *slog.Logger.
//
// # Errors
//
// An *Error gives a failure a code and a category (planbus.Category...):
// InvalidInput and Permanent errors are never retried; Transient and Network
// errors are retried as the tool's retry policy says, and timeout and
// network errors move the skill's health to temporaryFailure sooner;
// invalid_input errors (the caller's input at fault) leave the skill's
// health as it is. Any other error counts as category internal, code
// TOOL_FAILED. ErrorInfo is how a worker turns an error into a result's
// error: an *Error with no code, a category that is not planbus's or
// output that is not JSON is made valid rather than lost.
//
// A Result's StatePatch must be a JSON object (merged into the session
// state); anything else fails the call with INVALID_STATE_PATCH.
//
// # Middleware
//
// Middleware wraps handlers; each is in a file of its own. Wrap builds the
// chain a worker runs every skill in: Logger (the call's logger in ctx),
// Recover (a panic becomes a TOOL_PANIC error, its stack logged), Timeout
// (the call's deadline enforced), the program's own middleware
// (worker.WithMiddleware), InputSchema (input checked against the
// manifest's input schema) and OutputSchema (output checked against its
// output schema: OUTPUT_INVALID, never retried), in that order: the
// deadline bounds the program's middleware too. Package skilltest calls a
// skill through the same chain in a test, without a worker or NATS.
//
// Everything here is safe for concurrent use.
package skill

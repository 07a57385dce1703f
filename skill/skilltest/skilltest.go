package skilltest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/skill"
)

// The ids of the calls Call makes: a plan, request and tool of their own.
const (
	PlanID    = "skilltest-plan"
	RequestID = "skilltest-request"
	ToolID    = "skilltest-tool"
)

// Option is an optional setting of Call.
type Option func(*options)

type options struct {
	ctx                  context.Context
	attempt, maxAttempts int
	timeout              time.Duration
	timeoutSet           bool
	log                  *slog.Logger
	logSet               bool
	mw                   []skill.Middleware
}

// WithAttempt makes the call attempt number attempt of maxAttempts, as a
// retry is. Default: attempt 1 of as many as the manifest's retry policy
// allows (3 without one, as in a plan).
func WithAttempt(attempt, maxAttempts int) Option {
	return func(o *options) { o.attempt, o.maxAttempts = attempt, maxAttempts }
}

// WithTimeout sets the call's timeout; 0 means none. Default: the
// manifest's TimeoutMs, or 30 s without one, as in a plan.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout, o.timeoutSet = d, true }
}

// WithLogger gives the handler a logger derived from log (skill.Log), as
// worker.WithLogger does; nil discards. Default: the test's output
// (t.Output), from debug level up, shown when the test fails or runs with
// -v.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log, o.logSet = log, true }
}

// WithMiddleware runs the call through mw as a worker given
// worker.WithMiddleware(mw...) does: inside the logger, recovery and
// timeout, outside the schema checks.
func WithMiddleware(mw ...skill.Middleware) Option {
	return func(o *options) { o.mw = append(o.mw, mw...) }
}

// WithContext sets the context the call runs in, for a test that cancels
// it (as a worker does when the call's plan ends). Default: t.Context().
func WithContext(ctx context.Context) Option {
	return func(o *options) { o.ctx = ctx }
}

// Call calls s once with input, encoded as encoding/json encodes it (a
// json.RawMessage is taken as it is; nil is {}, the input of a plan's tool
// that gives none), and returns what a worker would report: the result,
// or the error of a failed attempt. The call is attempt 1 of tool ToolID in
// plan PlanID, with the manifest's timeout, unless options say otherwise.
//
// The handler runs as skill.Wrap wraps it for a worker. A handler that
// ignores its context past the timeout is left running, as a worker
// leaves it, and Call returns its TOOL_TIMEOUT error. Call stops the test
// with t.Fatalf when input cannot be encoded or s cannot be served (no
// handler, a schema that does not compile).
func Call(t testing.TB, s skill.Skill, input any, opts ...Option) (skill.Result, error) {
	t.Helper()
	o := options{attempt: 1, maxAttempts: plan.DefaultMaxAttempts, timeout: plan.DefaultToolTimeoutMs * time.Millisecond}
	m := s.Manifest
	if m.RetryPolicy != nil {
		o.maxAttempts = m.RetryPolicy.MaxAttempts
	}
	if m.TimeoutMs > 0 {
		o.timeout = time.Duration(m.TimeoutMs) * time.Millisecond
	}
	for _, opt := range opts {
		opt(&o)
	}
	if s.Handler == nil {
		t.Fatalf("skilltest: skill %q has no handler", m.Name)
	}
	in := []byte("{}")
	if input != nil {
		var err error
		if in, err = json.Marshal(input); err != nil {
			t.Fatalf("skilltest: skill %s: input: %v", m.Name, err)
		}
	}
	log := o.log
	if !o.logSet {
		log = slog.New(slog.NewTextHandler(testOutput(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := skill.Wrap(s, log, o.mw...)
	if err != nil {
		t.Fatalf("skilltest: %v", err)
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = t.Context()
	}
	call := &skill.Call{PlanID: PlanID, RequestID: RequestID, ToolID: ToolID, Skill: m.Name,
		Attempt: o.attempt, MaxAttempts: max(o.maxAttempts, o.attempt), Input: in, Timeout: o.timeout, ReleasedAt: time.Now()}
	res, err := h.Handle(ctx, call)
	if err != nil {
		return skill.Result{}, err
	}
	if err := res.Check(); err != nil {
		return skill.Result{}, err
	}
	return res, nil
}

// Output decodes res's output into a T, as encoding/json decodes it (an
// empty output is null), and stops the test with t.Fatalf when it does not
// decode.
func Output[T any](t testing.TB, res skill.Result) T {
	t.Helper()
	var v T
	out := res.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("skilltest: output %s: decoding into %T: %v", out, v, err)
	}
	return v
}

// testOutput is t's output until the test's cleanup: a handler Timeout
// left running may log after the test has ended, which t's output does not
// take.
func testOutput(t testing.TB) io.Writer {
	w := &endingWriter{w: t.Output()}
	t.Cleanup(w.end)
	return w
}

type endingWriter struct {
	mu    sync.Mutex
	w     io.Writer
	ended bool
}

func (e *endingWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return len(p), nil
	}
	return e.w.Write(p)
}

func (e *endingWriter) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = true
}

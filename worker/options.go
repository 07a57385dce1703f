package worker

import (
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/skill"
)

// Option is an optional setting of New; one that cannot apply makes New
// return an error matching ErrInvalidConfig. It has the shape of
// client.Option.
type Option func(*options) error

type options struct {
	log        *slog.Logger
	middleware []skill.Middleware
	tracer     trace.TracerProvider
}

// WithTracerProvider makes the worker record a planbus.tool.run span for
// every call it runs, a child of the call's trace context (its
// traceparent header) when it has one; a handler's ctx carries the span,
// so the skill's own spans join the trace. Default: the global
// TracerProvider (otel.GetTracerProvider), a no-op unless the program
// installed one. Without a recording provider, a call's trace context
// still reaches the handler's ctx and the result.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error { o.tracer = tp; return nil }
}

// WithLogger makes the worker log to log, and hands each handler a logger
// derived from it (skill.Logger; a handler gets it with skill.Log).
// Default, and with a nil log: no logging.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) error { o.log = log; return nil }
}

// WithMiddleware wraps every skill's handler in mw, the first outermost,
// inside the worker's logger, panic recovery and timeout (the call's
// deadline bounds mw too: a rate limit that waits past it times the call
// out) and outside the input check, as skill.Wrap places it. Use it for
// metrics, tracing or rate limits.
// A nil middleware is an error.
func WithMiddleware(mw ...skill.Middleware) Option {
	return func(o *options) error {
		for i, m := range mw {
			if m == nil {
				return fmt.Errorf("%w: WithMiddleware: middleware %d of %d is nil", ErrInvalidConfig, i+1, len(mw))
			}
		}
		o.middleware = append(o.middleware, mw...)
		return nil
	}
}

// RoleInbox is the connection option a worker needs on a planbus server
// with authorization on (planner serve --auth, the compose stack): the
// worker role receives replies, JetStream's included, only under its own
// inbox prefix, _INBOX_worker. Pass it to nats.Connect along with the
// worker role's credentials:
//
//	nc, err := nats.Connect(url, nkeyOpt, worker.RoleInbox())
func RoleInbox() nats.Option {
	return nats.CustomInboxPrefix(bus.RoleWorker.InboxPrefix())
}

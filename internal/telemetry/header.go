package telemetry

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C trace context, as NATS headers carry them.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// propagator is the one format planbus speaks on the wire: W3C trace
// context. It is not the global propagator, so what a process installs
// globally cannot change the protocol.
var propagator propagation.TraceContext

// HeaderCarrier adapts a NATS header to propagation.TextMapCarrier. NATS
// headers are case-sensitive: the W3C names are written and read in lower
// case, as the specification spells them.
type HeaderCarrier nats.Header

// Get returns the first value of key, or "".
func (h HeaderCarrier) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key.
func (h HeaderCarrier) Set(key, value string) { h[key] = []string{value} }

// Keys lists the header's keys.
func (h HeaderCarrier) Keys() []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}

// Inject writes the trace context of ctx's span into h and returns h; a
// nil h is made only when there is a span to propagate, so a call without
// one allocates nothing and returns h as it was.
func Inject(ctx context.Context, h nats.Header) nats.Header {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h
	}
	if h == nil {
		h = make(nats.Header, 2)
	}
	propagator.Inject(ctx, HeaderCarrier(h))
	return h
}

// Extract returns ctx with the remote span context h carries, if any. A
// header without a valid traceparent leaves ctx as it was.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h[HeaderTraceParent]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, HeaderCarrier(h))
}

// Map returns the trace context of ctx's span as a map of its W3C headers,
// for state that stores it (a request's loop, a plan's state), or nil when
// ctx has no span.
func Map(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(ctx, m)
	return m
}

// FromMap returns ctx with the remote span context m holds (see Map).
func FromMap(ctx context.Context, m map[string]string) context.Context {
	if m[HeaderTraceParent] == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(m))
}

// HeaderFromMap returns a NATS header carrying the trace context m holds,
// or nil when m holds none.
func HeaderFromMap(m map[string]string) nats.Header {
	tp := m[HeaderTraceParent]
	if tp == "" {
		return nil
	}
	h := nats.Header{HeaderTraceParent: {tp}}
	if ts := m[HeaderTraceState]; ts != "" {
		h[HeaderTraceState] = []string{ts}
	}
	return h
}

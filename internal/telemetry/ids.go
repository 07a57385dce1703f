package telemetry

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// A dispatcher records a plan's span when the plan ends and a tool
// attempt's span when the attempt ends, possibly in another dispatcher
// than the one that started them (state lives in KV, not in a process).
// Their ids are fixed in advance: the plan span's when the plan starts
// (stored with its state), a tool attempt's derived from it (ChildID), so
// the worker that runs the attempt can name its parent before that span
// exists. A span takes a preset id when its TracerProvider uses
// IDs; with another generator it gets a random one, and the
// worker's span keeps the right trace id but points at a parent that is
// never recorded.

type presetKey struct{}

type preset struct {
	trace trace.TraceID
	span  trace.SpanID
}

// WithIDs returns ctx in which a span started with a TracerProvider that
// uses IDs gets span id sid, and trace id tid if it is a root
// (with a parent it keeps its parent's trace id).
func WithIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, presetKey{}, preset{trace: tid, span: sid})
}

// IDs generates span and trace ids for an OpenTelemetry SDK
// TracerProvider (sdktrace.WithIDGenerator(telemetry.IDs{})): random ids,
// but those WithIDs presets.
type IDs struct{}

// NewIDs returns the preset ids of ctx, or random ones.
func (IDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if p, ok := ctx.Value(presetKey{}).(preset); ok && p.trace.IsValid() && p.span.IsValid() {
		return p.trace, p.span
	}
	return NewTraceID(), NewSpanID()
}

// NewSpanID returns the preset span id of ctx, or a random one.
func (IDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if p, ok := ctx.Value(presetKey{}).(preset); ok && p.span.IsValid() {
		return p.span
	}
	return NewSpanID()
}

// NewTraceID returns a random, valid trace id.
func NewTraceID() trace.TraceID {
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t
}

// NewSpanID returns a random, valid span id.
func NewSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// ChildID derives a span id from a parent span id and names, the same in
// every process: a tool attempt's span id from its plan's span id, tool id
// and attempt.
func ChildID(parent trace.SpanID, names ...string) trace.SpanID {
	h := fnv.New64a()
	_, _ = h.Write(parent[:])
	for _, n := range names {
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(n))
	}
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], h.Sum64())
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

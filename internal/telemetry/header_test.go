package telemetry_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus/internal/telemetry"
)

func spanContext(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState("vendor=value")
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
}

func TestHeaderCarriesW3CTraceContext(t *testing.T) {
	ctx := trace.ContextWithSpanContext(context.Background(), spanContext(t))
	h := telemetry.Inject(ctx, nil)
	if got, want := h.Get("traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if got, want := h.Get("tracestate"), "vendor=value"; got != want {
		t.Errorf("tracestate %q, want %q", got, want)
	}
	back := trace.SpanContextFromContext(telemetry.Extract(context.Background(), h))
	if !back.Equal(spanContext(t).WithRemote(true)) {
		t.Errorf("extracted %+v, want %+v", back, spanContext(t))
	}
	m := telemetry.Map(ctx)
	if got := telemetry.HeaderFromMap(m).Get("traceparent"); got != h.Get("traceparent") {
		t.Errorf("header from map: traceparent %q, want %q", got, h.Get("traceparent"))
	}
	if got := trace.SpanContextFromContext(telemetry.FromMap(context.Background(), m)); !got.Equal(back) {
		t.Errorf("from map %+v, want %+v", got, back)
	}
}

// An untraced message costs nothing: no header is made, none is read.
func TestNoSpanNoHeader(t *testing.T) {
	ctx := context.Background()
	if h := telemetry.Inject(ctx, nil); h != nil {
		t.Errorf("Inject without a span made %v, want nil", h)
	}
	kept := nats.Header{"Nats-Msg-Id": {"x"}}
	if got := telemetry.Extract(ctx, kept); got != ctx {
		t.Error("Extract of a header without traceparent changed the context")
	}
	for name, f := range map[string]func(){
		"Inject":        func() { _ = telemetry.Inject(ctx, nil) },
		"Extract":       func() { _ = telemetry.Extract(ctx, kept) },
		"HeaderFromMap": func() { _ = telemetry.HeaderFromMap(nil) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s without trace context: %v allocations, want 0", name, n)
		}
	}
	for _, bad := range []string{"", "00-zz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		h := nats.Header{"traceparent": {bad}}
		if sc := trace.SpanContextFromContext(telemetry.Extract(ctx, h)); sc.IsValid() {
			t.Errorf("traceparent %q extracted as valid %+v", bad, sc)
		}
	}
}

func TestChildIDIsTheSameEverywhere(t *testing.T) {
	parent := spanContext(t).SpanID()
	a, b := telemetry.ChildID(parent, "A", "1"), telemetry.ChildID(parent, "A", "1")
	if a != b || !a.IsValid() {
		t.Errorf("ChildID gave %s then %s, want one valid id", a, b)
	}
	for _, other := range [][]string{{"A", "2"}, {"A1", ""}, {"B", "1"}} {
		if c := telemetry.ChildID(parent, other...); c == a {
			t.Errorf("ChildID%v = ChildID[A 1] = %s", other, c)
		}
	}
}

func TestPresetIDs(t *testing.T) {
	sc := spanContext(t)
	ctx := telemetry.WithIDs(context.Background(), sc.TraceID(), sc.SpanID())
	tid, sid := telemetry.IDs{}.NewIDs(ctx)
	if tid != sc.TraceID() || sid != sc.SpanID() {
		t.Errorf("NewIDs = %s %s, want the preset %s %s", tid, sid, sc.TraceID(), sc.SpanID())
	}
	if got := (telemetry.IDs{}).NewSpanID(ctx, tid); got != sc.SpanID() {
		t.Errorf("NewSpanID = %s, want the preset %s", got, sc.SpanID())
	}
	tid, sid = telemetry.IDs{}.NewIDs(context.Background())
	if !tid.IsValid() || !sid.IsValid() || sid == sc.SpanID() {
		t.Errorf("NewIDs without a preset = %s %s, want random valid ids", tid, sid)
	}
}

func BenchmarkInjectWithoutSpan(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = telemetry.Inject(ctx, nil)
	}
}

func BenchmarkInjectWithSpan(b *testing.B) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	b.ReportAllocs()
	for b.Loop() {
		_ = telemetry.Inject(ctx, nil)
	}
}

package dispatcher

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/telemetry"
)

func engineOf(tb testing.TB, doc string) (*execution.Engine, execution.Effects) {
	tb.Helper()
	p, err := plan.Decode([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	return execution.Start(p, time.Now(), 4, func(string, string) int64 { return 1 })
}

const fanout = `{"planId": "p1", "tools": [{"toolId": "A", "skill": "echo"}, {"toolId": "B", "skill": "echo"}]}`

// The tracing added to the dispatcher's hot path costs an untraced plan
// nothing: no header, no allocation, even when the dispatcher records.
func TestUntracedPlanCostsNothing(t *testing.T) {
	eng, fx := engineOf(t, fanout)
	d := &Dispatcher{tracer: telemetry.Tracer(nil), traced: true}
	st := eng.State()
	for name, f := range map[string]func(){
		"callHeader": func() {
			if h := callHeader(st, "A", 1); h != nil {
				t.Errorf("header %v for an untraced plan", h)
			}
		},
		"inFlight":   func() { _ = d.inFlight(eng) },
		"traceEnded": func() { d.traceEnded(eng, nil, &fx, true, time.Now()) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s of an untraced plan: %v allocations, want 0", name, n)
		}
	}
}

// A traced plan's call names the attempt's span, derived from the plan's
// span in its state, the same in every dispatcher.
func TestCallHeaderNamesTheAttemptSpan(t *testing.T) {
	eng, _ := engineOf(t, fanout)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	eng.State().Trace = telemetry.Map(trace.ContextWithSpanContext(context.Background(), sc))
	h := callHeader(eng.State(), "A", 2)
	want := "00-" + tid.String() + "-" + telemetry.ChildID(sid, "A", "2").String() + "-01"
	if got := h.Get(telemetry.HeaderTraceParent); got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
}

func BenchmarkCallHeaderUntraced(b *testing.B) {
	eng, _ := engineOf(b, fanout)
	st := eng.State()
	b.ReportAllocs()
	for b.Loop() {
		_ = callHeader(st, "A", 1)
	}
}

func BenchmarkCallHeaderTraced(b *testing.B) {
	eng, _ := engineOf(b, fanout)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: telemetry.NewTraceID(), SpanID: telemetry.NewSpanID(), TraceFlags: trace.FlagsSampled})
	eng.State().Trace = telemetry.Map(trace.ContextWithSpanContext(context.Background(), sc))
	st := eng.State()
	b.ReportAllocs()
	for b.Loop() {
		_ = callHeader(st, "A", 1)
	}
}

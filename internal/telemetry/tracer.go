package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names planbus's tracers.
const InstrumentationName = "github.com/planbus/planbus"

// Tracer returns planbus's tracer of tp, or of the global TracerProvider
// when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(InstrumentationName)
}

// Records reports whether tracer makes spans at all: false for a no-op
// tracer (tracing off), so components can skip the work of spans nobody
// records. It starts a root span to find out and drops it unended, which
// records nothing.
func Records(tracer trace.Tracer) bool {
	_, sp := tracer.Start(context.Background(), "planbus.probe")
	return sp.SpanContext().IsValid()
}

package export

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/planbus/planbus/internal/telemetry"
)

// Enabled reports whether the environment turns tracing on, and how to
// export, following the OpenTelemetry specification's variables:
//
//   - OTEL_SDK_DISABLED=true turns it off whatever else is set;
//   - OTEL_TRACES_EXPORTER=none turns it off; =otlp turns it on;
//   - otherwise it is on when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and off when neither is.
//
// Any other exporter name, or OTEL_EXPORTER_OTLP(_TRACES)_PROTOCOL other
// than http/protobuf, is an error naming the variable: planbus exports
// OTLP over HTTP only.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	on := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
	case "none":
		return false, nil
	case "otlp":
		on = true
	default:
		return false, fmt.Errorf("export: OTEL_TRACES_EXPORTER=%q: planbus exports traces with otlp (or none)", exp)
	}
	if !on {
		return false, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch p := strings.TrimSpace(getenv(v)); p {
		case "", "http/protobuf":
		default:
			return false, fmt.Errorf("export: %s=%q: planbus exports OTLP over http/protobuf only", v, p)
		}
		if getenv(v) != "" {
			break // the traces variable, when set, wins over the general one
		}
	}
	return true, nil
}

// Setup installs the global TracerProvider of a process when the
// environment (getenv, os.Getenv in a command) turns tracing on (see
// Enabled): an OTLP/HTTP exporter
// configured by the OTEL_EXPORTER_OTLP_* variables behind a batch
// processor (OTEL_BSP_*), the sampler of OTEL_TRACES_SAMPLER (default
// parentbased_always_on), a resource whose service.name is service unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise, and
// telemetry.IDs. It also makes W3C trace context the global propagator, for
// user code that asks for it.
//
// The returned shutdown flushes the spans still buffered, for up to five
// seconds; call it once, on the way out. With tracing off, Setup installs
// nothing and shutdown does nothing. An error names the variable at fault.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func() error, err error) {
	noop := func() error { return nil }
	on, err := Enabled(getenv)
	if err != nil || !on {
		return noop, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("export: OTLP exporter: %w", err)
	}
	tp, err := NewProvider(ctx, service, sdktrace.WithBatcher(exp))
	if err != nil {
		_ = exp.Shutdown(ctx)
		return noop, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			return fmt.Errorf("export: flush spans: %w", err)
		}
		return nil
	}, nil
}

// NewProvider returns a TracerProvider with telemetry.IDs and a resource
// naming service (unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES
// name another), plus opts: an exporter, a sampler. Tests give each
// component one over an in-memory exporter.
func NewProvider(ctx context.Context, service string, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithProcessPID(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("export: resource (OTEL_RESOURCE_ATTRIBUTES?): %w", err)
	}
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithResource(res), sdktrace.WithIDGenerator(telemetry.IDs{})}, opts...)...), nil
}

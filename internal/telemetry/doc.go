// Package telemetry carries OpenTelemetry traces across planbus's
// processes: the W3C trace context (traceparent, tracestate) in NATS
// message headers, the span ids the dispatcher derives so that any
// dispatcher can record a plan's and a tool attempt's spans, span names
// and attributes. Package export sets up the exporter every command uses,
// from the standard OTEL_* environment variables (off by default).
//
// Nothing here starts a span on its own: components take a
// trace.TracerProvider (the global one by default, a no-op until
// export.Setup installs one) and use these helpers to move context on and off the bus.
// With no span in a context, Inject adds no header, and a message without
// a traceparent header extracts to the context it was given, so an
// untraced system pays for a nil check.
package telemetry

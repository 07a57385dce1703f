// Package export sets up a process's OpenTelemetry TracerProvider from
// the standard OTEL_* environment variables: an OTLP/HTTP exporter when
// they turn tracing on, nothing when they do not. It is apart from
// package telemetry so that the public worker and client packages, which
// only propagate trace context, do not pull the SDK and the exporter into
// their users' programs.
package export

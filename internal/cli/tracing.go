package cli

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/telemetry/export"
)

// StartTracing sets up the process's traces from the OTEL_* environment
// (export.Setup: off unless OTEL_TRACES_EXPORTER=otlp or an OTLP
// endpoint is set), under service as service.name unless OTEL_SERVICE_NAME
// says otherwise. Each command's main calls it once, before the command,
// and calls stop after it, which flushes the spans still buffered. A bad
// setting is reported on io.Stderr and ok is false: the command should
// exit with ExitUsage.
func StartTracing(ctx context.Context, io IO, service string) (stop func(), ok bool) {
	shutdown, err := export.Setup(ctx, service, io.Env)
	if err != nil {
		fmt.Fprintf(io.Stderr, "%s: %v\n", service, err)
		return func() {}, false
	}
	return func() {
		if err := shutdown(); err != nil {
			fmt.Fprintf(io.Stderr, "%s: %v\n", service, err)
		}
	}, true
}

// Command dispatcher runs plans published to NATS JetStream as DAGs of tool
// calls. See `dispatcher -h`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/dispatchercmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills the process at once.
	go func() { <-ctx.Done(); stop() }()
	stopTracing, ok := cli.StartTracing(ctx, cli.OS(), "planbus-dispatcher")
	if !ok {
		os.Exit(cli.ExitUsage)
	}
	code := dispatchercmd.Run(ctx, os.Args[1:], cli.OS())
	stopTracing()
	stop()
	os.Exit(code)
}

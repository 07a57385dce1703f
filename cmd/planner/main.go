// Command planner runs planbus: `planner run FILE` runs a plan end to end
// on an embedded NATS server, `planner serve` keeps a node up, `planner
// bench` measures it. See `planner help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/plannercmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills the process at once.
	go func() { <-ctx.Done(); stop() }()
	stopTracing, ok := cli.StartTracing(ctx, cli.OS(), "planbus-planner")
	if !ok {
		os.Exit(cli.ExitUsage)
	}
	code := plannercmd.Run(ctx, os.Args[1:], cli.OS())
	stopTracing()
	stop()
	os.Exit(code)
}

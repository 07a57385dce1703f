// Command planner runs planbus: `planner run FILE` runs a plan end to end
// on an embedded NATS server, `planner serve` keeps a node up, `planner
// bench` measures it. See `planner help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/web"
)

func main() {
	// The web view lives in this binary alone.
	cli.NewView = newView
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills the process at once.
	go func() { <-ctx.Done(); stop() }()
	stopTracing, ok := cli.StartTracing(ctx, cli.OS(), "planbus-planner")
	if !ok {
		os.Exit(cli.ExitUsage)
	}
	code := cli.Planner(ctx, os.Args[1:], cli.OS())
	stopTracing()
	stop()
	os.Exit(code)
}

func newView(nc *nats.Conn, o cli.ViewOptions, log zerolog.Logger) (cli.ViewHandler, error) {
	s, err := web.New(nc, web.Config{Version: o.Version, Token: o.Token, AnyHost: o.AnyHost}, log)
	if err != nil {
		return nil, err
	}
	return s, nil
}

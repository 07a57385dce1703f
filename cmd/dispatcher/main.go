// Command dispatcher runs plans published to NATS JetStream as DAGs of tool
// calls. See `dispatcher -h`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/planbus/planbus/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Dispatcher(ctx, os.Args[1:], cli.OS())
	stop()
	os.Exit(code)
}

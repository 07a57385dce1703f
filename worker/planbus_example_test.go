package worker_test

import (
	"context"
	"os"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/embedded"
)

// startPlanbus stands in for `planner serve` in the examples: an embedded
// JetStream server on a free port of 127.0.0.1 with planbus's streams and
// buckets. It returns the server's URL and a function that stops it and
// removes its store.
func startPlanbus() (url string, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "planbus-example-")
	if err != nil {
		panic(err)
	}
	cfg := bus.Config{Listen: "127.0.0.1:0", DataDir: dir}
	srv, err := embedded.Start(ctx, cfg, bustest.Log())
	if err != nil {
		panic(err)
	}
	cfg.URL = srv.ClientURL()
	conn, err := bus.Dial(ctx, cfg, bustest.Log())
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	if err := conn.Declare(ctx); err != nil {
		panic(err)
	}
	return cfg.URL, func() {
		srv.Shutdown()
		_ = os.RemoveAll(dir)
	}
}

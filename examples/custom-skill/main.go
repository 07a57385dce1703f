// Command custom-skill serves a skill of its own, wordcount, to a running
// planbus system: it connects to NATS, advertises the skill's manifest and
// takes the calls plans make of it, with the same lifecycle as planbus's
// own workers (heartbeats, cancels, a drain on SIGTERM).
//
//	go run ./cmd/planner serve                      # in the repository: a planbus node
//	go run . --nats-url nats://127.0.0.1:4222       # here: the wordcount worker
//	planner run --nats-url nats://127.0.0.1:4222 plan.json
//
// With authorization on (planner serve --auth), give the worker role's
// seed: --nkey <data-dir>/auth/worker.nk.
//
// It imports only planbus's public packages (skill, worker, planbus); being
// a module of its own, it could not import internal ones.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("custom-skill", flag.ContinueOnError)
	url := fs.String("nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server of the planbus system to join (env NATS_URL)")
	nkey := fs.String("nkey", os.Getenv("NATS_NKEY"), "the worker role's nkey seed file, when planbus runs with --auth (env NATS_NKEY)")
	concurrency := fs.Int("concurrency", 4, "calls of wordcount run at once by this process")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(os.Stderr, "custom-skill: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	opts := []nats.Option{nats.Name("custom-skill"), nats.MaxReconnects(-1)}
	if *nkey != "" {
		auth, err := nats.NkeyOptionFromSeed(*nkey)
		if err != nil {
			fmt.Fprintf(os.Stderr, "custom-skill: --nkey: %v\n", err)
			return 2
		}
		// The worker role receives replies under its own inbox prefix.
		opts = append(opts, auth, worker.RoleInbox())
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "custom-skill: connect to %s: %v\n", *url, err)
		return 1
	}
	defer nc.Close()

	w, err := worker.New(nc, worker.Config{Skills: []skill.Skill{wordcount()}, Concurrency: *concurrency},
		worker.WithLogger(log))
	if err != nil {
		fmt.Fprintf(os.Stderr, "custom-skill: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		select {
		case <-w.Ready():
			log.Info("custom-skill: serving wordcount", "url", nc.ConnectedUrlRedacted(), "worker", w.ID())
		case <-ctx.Done():
		}
	}()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "custom-skill: %v\n", err)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

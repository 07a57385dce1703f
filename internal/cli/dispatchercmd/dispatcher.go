// Package dispatchercmd is the dispatcher command behind cmd/dispatcher
// (and 'planner bench component dispatcher'): a dispatcher on a running
// system, with the flags of package cli.
package dispatchercmd

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/metrics"
)

const dispatcherUsage = `Usage: dispatcher [flags]

Runs plans published on planbus.plans.<planId>: releases each tool the
moment its dependencies finish, retries, enforces timeouts and publishes the
execution result. Run as many as you like; they share the work and the
plan state in KV.`

// Run is the dispatcher command: args are its flags, without the program
// name. It returns the exit code (package cli).
func Run(ctx context.Context, args []string, io cli.IO) int {
	var c cli.Common
	var df cli.DispatcherFlags
	var mf cli.MetricsFlags
	f := cli.NewFlags("dispatcher", io.Stderr, io.Env, dispatcherUsage)
	c.Register(f, cli.Connects)
	df.Register(f)
	mf.Register(f)
	if err := f.Parse(args); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := mf.Check("dispatcher"); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if c.Bus.URL == "" {
		return cli.UsageErr(io.Stderr, fmt.Errorf("dispatcher: --nats-url (or $NATS_URL) is required; `planner serve` runs a dispatcher on an embedded server"))
	}
	cfg := df.Config()
	cfg.Metrics = metrics.New()
	ms, err := mf.Start(cfg.Metrics, log)
	if err != nil {
		return cli.UsageErr(io.Stderr, fmt.Errorf("dispatcher: %w", err))
	}
	defer ms.Stop()
	return cli.ServeComponent(ctx, &c, log, io.Stderr, "dispatcher", bus.RoleDispatcher, func(conn *bus.Conn) (cli.Runner, error) {
		cfg.Metrics.SetConn(conn.NC)
		d, err := dispatcher.New(conn, cfg, log)
		if err != nil {
			return nil, err
		}
		return d.Run, nil
	})
}

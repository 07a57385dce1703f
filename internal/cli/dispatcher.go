package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/metrics"
)

const dispatcherUsage = `Usage: dispatcher [flags]

Runs plans published on planbus.plans.<planId>: releases each tool the
moment its dependencies finish, retries, enforces timeouts and publishes the
execution result. Run as many as you like; they share the work and the
plan state in KV.`

type dispatcherFlags struct {
	shards         int
	maxConcurrency int
	ackWait        time.Duration
	id             string
}

func (d *dispatcherFlags) register(f *flags) {
	f.Int(&d.shards, "shards", "PLANBUS_SHARDS", 16, "plans worked on at once by this dispatcher")
	f.Int(&d.maxConcurrency, "max-concurrency", "PLANBUS_MAX_CONCURRENCY", 0, "maxConcurrency of plans that set none (default: CPU count)")
	f.Duration(&d.ackWait, "dispatcher-ack-wait", "PLANBUS_DISPATCHER_ACK_WAIT", 30*time.Second, "how soon another dispatcher takes over the messages of a dead one")
	f.String(&d.id, "dispatcher-id", "PLANBUS_DISPATCHER_ID", "", "dispatcher id (default hostname-pid)")
}

func (d *dispatcherFlags) config() dispatcher.Config {
	return dispatcher.Config{ID: d.id, Shards: d.shards, DefaultMaxConcurrency: d.maxConcurrency, AckWait: d.ackWait, Version: Version()}
}

// Dispatcher is the dispatcher command.
func Dispatcher(ctx context.Context, args []string, io IO) int {
	var c common
	var df dispatcherFlags
	var mf metricsFlags
	f := newFlags("dispatcher", io.Stderr, io.Env, dispatcherUsage)
	c.register(f, connects)
	df.register(f)
	mf.register(f)
	if err := f.parse(args); err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := mf.check("dispatcher"); err != nil {
		return usageErr(io.Stderr, err)
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	if c.bus.URL == "" {
		return usageErr(io.Stderr, fmt.Errorf("dispatcher: --nats-url (or $NATS_URL) is required; `planner serve` runs a dispatcher on an embedded server"))
	}
	cfg := df.config()
	cfg.Metrics = metrics.New()
	ms, err := mf.start(cfg.Metrics, log)
	if err != nil {
		return usageErr(io.Stderr, fmt.Errorf("dispatcher: %w", err))
	}
	defer ms.Stop()
	return serveComponent(ctx, &c, log, io.Stderr, "dispatcher", bus.RoleDispatcher, func(conn *bus.Conn) (runner, error) {
		cfg.Metrics.SetConn(conn.NC)
		d, err := dispatcher.New(conn, cfg, log)
		if err != nil {
			return nil, err
		}
		return d.Run, nil
	})
}

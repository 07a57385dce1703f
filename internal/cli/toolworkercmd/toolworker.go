// Package toolworkercmd is the toolworker command behind cmd/toolworker
// (and 'planner bench component toolworker'): the built-in skills served
// to a running system, with the flags of package cli.
package toolworkercmd

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/mcpskills"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/worker"
)

const toolworkerUsage = `Usage: toolworker [flags]

Serves skills to planbus: pulls tool calls from planbus.tools.<skill>,
runs them with a deadline and heartbeats, and publishes their results.
Start more processes to add capacity; they share each skill's queue.`

// Run is the toolworker command: args are its flags, without the program
// name. It returns the exit code (package cli).
func Run(ctx context.Context, args []string, io cli.IO) int {
	var c cli.Common
	var wf cli.WorkerFlags
	var mf cli.MetricsFlags
	f := cli.NewFlags("toolworker", io.Stderr, io.Env, toolworkerUsage)
	c.Register(f, cli.Connects)
	wf.Register(f)
	wf.RegisterLLM(f)
	wf.RegisterMCP(f)
	mf.Register(f)
	if err := f.Parse(args); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := mf.Check("toolworker"); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	cfg, err := wf.Config()
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	specs, err := wf.MCPServers()
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if c.Bus.URL == "" {
		return cli.UsageErr(io.Stderr, fmt.Errorf("toolworker: --nats-url (or $NATS_URL) is required; `planner serve` runs workers on an embedded server"))
	}
	for _, spec := range specs {
		srv, err := mcpskills.Open(ctx, spec, mcpskills.Options{Log: logbridge.Slog(log), Stderr: mcpskills.PrefixLines(io.Stderr, "mcp "+spec.Name+": "), Version: cli.Version()})
		if err != nil {
			fmt.Fprintf(io.Stderr, "toolworker: --mcp: %v\n", err)
			return cli.ExitFailed
		}
		defer func() { _ = srv.Close() }()
		cfg.Skills = append(cfg.Skills, srv.Skills()...)
	}
	reg := metrics.New()
	ms, err := mf.Start(reg, log)
	if err != nil {
		return cli.UsageErr(io.Stderr, fmt.Errorf("toolworker: %w", err))
	}
	defer ms.Stop()
	return cli.ServeComponent(ctx, &c, log, io.Stderr, "toolworker", bus.RoleWorker, func(conn *bus.Conn) (cli.Runner, error) {
		reg.SetConn(conn.NC)
		w, err := worker.New(conn.NC, cfg, worker.WithLogger(logbridge.Slog(log)), worker.WithMiddleware(reg.Worker().Middleware()))
		if err != nil {
			return nil, err
		}
		return w.Run, nil
	})
}

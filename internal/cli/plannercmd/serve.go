package plannercmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/memlimit"
	"github.com/planbus/planbus/internal/embedded"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/rs/zerolog"
)

// authSummary tells how to reach a node whose server has authorization on.
func authSummary(url string, seeds *bus.Seeds) string {
	var files []string
	for _, r := range bus.Roles() {
		files = append(files, bus.SeedFileName(r))
	}
	return fmt.Sprintf("authentication on: role seeds in %s (%s); connect as a client with: nats --server %s --nkey %s req %s '{...}' "+
		"(components: --nats-url %s --nkey %s/<role>.nk; operators: --nkey %s --inbox-prefix %s)",
		seeds.Dir, strings.Join(files, ", "), url, seeds.File(bus.RoleClient), bus.SubjectPlanRequest,
		url, seeds.Dir, seeds.File(bus.RoleAdmin), bus.RoleAdmin.InboxPrefix())
}

const serveUsage = `Usage: planner serve [flags]

Without --nats-url: keeps a planbus node up until interrupted — an embedded
NATS JetStream server on --listen (default 127.0.0.1:4222) with its store in
--data-dir, the planner service, a dispatcher and --workers tool workers.
Other clients (the nats CLI, more toolworker or dispatcher processes)
connect to it. With --nats-url: runs the planner service alone against that
server.

--auth turns on authentication and authorization: a NATS nkey user per role
(admin, planner, dispatcher, worker, client) with least-privilege
permissions, seeds written to <data-dir>/auth/<role>.nk on first start and
reused after. Other processes connect with --nkey <data-dir>/auth/<role>.nk.
Protected mode: --listen on an address other than loopback needs --auth
(or --insecure).

The web view is served on --http (default ` + DefaultHTTP + `; "" turns it off),
as a client of the node. With --auth it asks for a token, kept in
<data-dir>/auth/web.token; an --http address other than loopback needs
--auth (or --insecure). With --nats-url, serve runs only the planner: serve
the view of that system with 'planner ui'.`

func plannerServe(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var nf nodeFlags
	f := cli.NewFlags("planner serve", io.Stderr, io.Env, serveUsage)
	c.Register(f, cli.Serves)
	nf.register(f)
	nf.view.register(f, DefaultHTTP)
	nf.metrics.Register(f)
	if err := f.Parse(args); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := c.CheckExposure("planner serve"); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := nf.view.check(f, "planner serve", c.Auth, c.Insecure); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := nf.metrics.Check("planner serve"); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if c.Bus.URL != "" {
		if nf.view.given {
			log.Warn().Msg("--http: with --nats-url, serve runs only the planner; serve the web view with planner ui")
		}
		return servePlanner(ctx, &c, &nf, log, io)
	}
	cfg, err := nf.config(c.Bus, c.Auth)
	if err != nil {
		return cli.UsageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	memLimit, memChosen := nf.plan.applyMemoryLimit(io.Env)
	log.Debug().Int64("memory_limit", memLimit).Bool("follows_live_heap", memChosen).Msg("soft memory limit")
	ms, err := nf.metrics.Start(cfg.Metrics, log)
	if err != nil {
		return cli.UsageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	defer ms.Stop()
	n, err := node.Start(ctx, cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("cannot start")
		if errors.Is(err, embedded.ErrListen) {
			return cli.ExitUsage
		}
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	if memChosen {
		go memlimit.Follow(ctx, memLimit, n.GenerationMemory, memlimit.Interval)
	}
	if len(n.Planners) > 0 {
		cfg.Metrics.SetConn(n.Planners[0].Conn.NC)
	}
	watch := "nats --server " + n.Bus.URL
	if n.Seeds != nil {
		watch += " --nkey " + n.Seeds.File(bus.RoleClient)
		log.Info().Str("seeds", n.Seeds.Dir).Msg(authSummary(n.Bus.URL, n.Seeds))
	}
	log.Info().Str("url", n.Bus.URL).Str("data_dir", cfg.Bus.Defaults().DataDir).Int("workers", len(n.Workers)).
		Bool("auth", n.Seeds != nil).Msg("planbus node up; watch it with: " + watch + " sub 'planbus.events.>'")
	v, code := serveView(ctx, n, &nf.view, cfg.Bus.Defaults().DataDir, log)
	if v == nil && code != cli.ExitOK {
		n.Stop()
		return code
	}
	defer v.Stop()
	return keepNode(ctx, n, log)
}

// keepNode keeps n up until ctx ends (exit 0) or one of its components
// dies on its own. A node without one of its parts would go on doing less
// than it was started for, unnoticed; so the death is logged at error,
// the rest of the node stopped, and the exit code is 1.
func keepNode(ctx context.Context, n *node.Node, log zerolog.Logger) int {
	select {
	case <-ctx.Done():
		log.Info().Msg("stopping")
		n.Stop()
		return cli.ExitOK
	case <-n.Done():
		log.Error().Err(n.Err()).Msg("a component died; stopping the node")
		n.Stop()
		return cli.ExitFailed
	}
}

// servePlanner runs the planner service alone against an external server.
func servePlanner(ctx context.Context, c *common, nf *nodeFlags, log zerolog.Logger, io cli.IO) int {
	pc, err := nf.plan.config()
	if err != nil {
		return cli.UsageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	memLimit, _ := nf.plan.applyMemoryLimit(io.Env)
	log.Debug().Int64("memory_limit", memLimit).Msg("soft memory limit")
	pc.Metrics = metrics.New()
	ms, err := nf.metrics.Start(pc.Metrics, log)
	if err != nil {
		return cli.UsageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	defer ms.Stop()
	return cli.ServeComponent(ctx, &c.Common, log, io.Stderr, "planner", bus.RolePlanner, func(conn *bus.Conn) (cli.Runner, error) {
		pc.Metrics.SetConn(conn.NC)
		if conn.NC.AuthRequired() {
			// Only planners.> is open to the planner role's requests.
			pc.ExternalPrefix = strings.TrimSuffix(bus.SubjectExternalPlanners, ">")
		}
		p, err := planner.New(conn, pc, log)
		if err != nil {
			return nil, err
		}
		return p.Run, nil
	})
}

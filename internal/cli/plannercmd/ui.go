package plannercmd

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
)

const uiUsage = `Usage: planner ui --nats-url URL [flags]

Serves the web view of a running planbus system (planner serve, the
compose stack, any cluster) on --http (default ` + DefaultHTTP + `) until
interrupted: requests as they change, each request's attempts and
outcome, each plan's DAG with its tools coloured as they run, the skills
and their health, the system's components and backlogs; submit and
cancel. It connects as a client: with authorization on, give the client
role's seed (--nkey, --creds).

--auth asks every visitor for a token: the one in --http-token-file (made
if missing), else one made at start and printed in the address to open.
An --http address beyond loopback needs --auth, or --insecure.`

// plannerUI is planner ui: the web view of a running system.
func plannerUI(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var vf viewFlags
	var login, insecure bool
	f := cli.NewFlags("planner ui", io.Stderr, io.Env, uiUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	vf.register(f, DefaultHTTP)
	f.Bool(&login, "auth", "PLANBUS_AUTH", false, "ask visitors for a token (see --http-token-file)")
	f.Bool(&insecure, "insecure", "PLANBUS_INSECURE", false, "let --http take a non-loopback address without --auth")
	log, code, ok := clientFlags(f, &c, args, io, "planner ui")
	if !ok {
		return code
	}
	if f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner ui: takes no arguments")
		return cli.ExitUsage
	}
	if err := vf.check(f, "planner ui", login, insecure); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if vf.addr == "" {
		fmt.Fprintln(io.Stderr, "planner ui: --http is empty: there is nothing to serve")
		return cli.ExitUsage
	}
	c.Bus.Role = bus.RoleClient
	conn, err := bus.Dial(ctx, c.Bus, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner ui: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer conn.Close()
	vf.given = true // ui serves nothing else: a taken address is an error
	v, err := vf.startView(conn.NC, login, "", log, nil)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner ui: %v\n", err)
		return cli.ExitUsage
	}
	defer v.Stop()
	<-ctx.Done()
	log.Info().Msg("stopping")
	return cli.ExitOK
}

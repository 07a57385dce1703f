// Package authcmd is `planner auth`: init writes a NATS nkey seed per
// role (and per worker group) and the nats-server configuration of their
// users and permissions; add-client adds a client of its own. Run is
// called by the planner command (package plannercmd).
package authcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
)

const authUsage = `Usage: planner auth init [flags] DIR

Writes one NATS nkey seed per role to DIR: admin.nk, planner.nk,
dispatcher.nk, worker.nk and client.nk (mode 0600; DIR 0700), and
--nats-conf (default DIR/auth.conf), a nats-server configuration block
with one user per role and the role's permissions, for servers configured
by file: include it from their configuration. Seeds that exist are kept,
so running it again only writes the configuration again, with the same
keys. A component connects as its role with --nkey DIR/<role>.nk.

--routes-conf (default DIR/routes.conf) is the cluster's routes between
the nodes --routes names (compose.yaml's three by default), authenticated
with a password kept in DIR/route.secret: include it inside the cluster
block, so that only the nodes join the cluster (a route that joins is
trusted with everything).
'planner serve --auth' does the same in <data-dir>/auth by itself.

worker.nk may serve every skill. --worker NAME=SKILL,SKILL... (repeatable)
adds a worker group: a seed DIR/worker-NAME.nk whose holder may take the
calls of those skills only, advertise only their manifests and answer
only their invocations; its skills are kept in DIR/worker-NAME.skills, so
later runs (and 'planner serve --auth' on that directory) keep the group.
Giving a group again replaces its skills and keeps its seed. Run a worker
as a group with 'toolworker --nkey DIR/worker-NAME.nk --skills ...'.

  planner auth init --worker shell=shell --worker web=http,echo ./auth

A client of its own, whose requests and sessions others may not touch:
'planner auth add-client NAME' (see planner auth add-client --help).`

const addClientUsage = `Usage: planner auth add-client [flags] NAME

Writes the seed of a client of its own, DIR/client-NAME.nk (kept if it
exists), and DIR/auth.conf again with its user. A client holding it
calls planbus as NAME: the planner's endpoints on its own subjects
(planbus.client.NAME.>), its replies on its own inbox (_INBOX_client_NAME),
and what it submits (requests, the sessions it uses first) is its own:
another client may not read its replies, nor cancel, approve or reset
them (FORBIDDEN); an admin may, on planbus.client.NAME.>. The planner's
commands and the Go client (client.As) take the name from the seed's
file name: --nkey DIR/client-NAME.nk.

DIR is --dir, default <data-dir>/auth, the seeds of 'planner serve --auth'.
The server admits the new client when it starts again: restart
'planner serve --auth', or the NATS nodes of a cluster (one at a time).

  planner auth add-client alice
  planner run --nats-url nats://127.0.0.1:4222 --nkey ~/.local/share/planbus/auth/client-alice.nk plan.json`

// Run is `planner auth`: init and add-client; args are what follows
// "auth". It returns the exit code (package cli).
func Run(ctx context.Context, args []string, io cli.IO) int {
	if len(args) > 0 && args[0] == "add-client" {
		return authAddClient(ctx, args[1:], io)
	}
	if len(args) == 0 || args[0] != "init" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(io.Stdout, authUsage)
			return cli.ExitOK
		}
		fmt.Fprintln(io.Stderr, authUsage)
		return cli.ExitUsage
	}
	var natsConf, routesConf, routes string
	var groups workerGroups
	f := cli.NewFlags("planner auth init", io.Stderr, io.Env, authUsage)
	f.String(&natsConf, "nats-conf", "", "", "where to write the nats-server configuration block (default DIR/auth.conf)")
	f.String(&routesConf, "routes-conf", "", "", "where to write the cluster's authenticated routes, to include in nats-server's cluster block (default DIR/routes.conf)")
	f.String(&routes, "routes", "", "nats1:6222,nats2:6222,nats3:6222", "the cluster's nodes, host:port of their cluster ports, comma-separated (the default is compose.yaml's); empty: no routes.conf")
	f.Var(&groups, "worker", "add a worker group NAME=SKILL,SKILL...: a seed worker-NAME.nk that serves those skills only (repeatable)")
	if err := f.Parse(args[1:]); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if f.NArg() != 1 {
		fmt.Fprintln(io.Stderr, "planner auth init: want exactly one DIR"+f.LateFlags())
		return cli.ExitUsage
	}
	dir := f.Arg(0)
	if natsConf == "" {
		natsConf = filepath.Join(dir, "auth.conf")
	}
	if routesConf == "" {
		routesConf = filepath.Join(dir, "routes.conf")
	}
	existed := map[bus.Role]bool{}
	for _, r := range bus.Roles() {
		_, err := os.Stat(filepath.Join(dir, bus.SeedFileName(r)))
		existed[r] = err == nil
	}
	for _, g := range groups {
		if _, err := bus.CheckWorkerGroup(g.Name, g.Skills); err != nil {
			fmt.Fprintf(io.Stderr, "planner auth init: --worker: %v\n", err)
			return cli.ExitUsage
		}
	}
	groupExisted := map[string]bool{}
	for _, g := range groups {
		_, err := os.Stat(filepath.Join(dir, bus.GroupSeedFile(g.Name)))
		groupExisted[g.Name] = err == nil
		if err := bus.AddWorkerGroup(dir, g.Name, g.Skills); err != nil {
			fmt.Fprintf(io.Stderr, "planner auth init: %v\n", err)
			return cli.ExitFailed
		}
	}
	seeds, err := bus.EnsureSeeds(dir)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner auth init: %v\n", err)
		return cli.ExitFailed
	}
	for _, r := range bus.Roles() {
		what := "created"
		if existed[r] {
			what = "kept"
		}
		fmt.Fprintf(io.Stdout, "%s  %s (%s)\n", seeds.File(r), what, seeds.PublicKey(r))
	}
	for _, g := range seeds.Groups() {
		what := "kept"
		if ex, given := groupExisted[g.Name]; given && !ex {
			what = "created"
		}
		fmt.Fprintf(io.Stdout, "%s  %s (%s): worker group for skills %s\n", seeds.GroupFile(g.Name), what, g.PublicKey, strings.Join(g.Skills, ", "))
	}
	if err := bus.WriteFileAtomic(natsConf, bus.NATSAuthConfig(seeds), 0o644); err != nil {
		fmt.Fprintf(io.Stderr, "planner auth init: %v\n", err)
		return cli.ExitFailed
	}
	fmt.Fprintf(io.Stdout, "%s  written: users and permissions of every role, to include in nats-server's configuration\n", natsConf)
	if hosts := cli.SplitList(routes); len(hosts) > 0 {
		secret, err := bus.EnsureRouteSecret(dir)
		if err == nil {
			var conf []byte
			if conf, err = bus.NATSRoutesConfig(secret, hosts); err != nil {
				fmt.Fprintf(io.Stderr, "planner auth init: --routes: %v\n", err)
				return cli.ExitUsage
			}
			// Readable by the NATS nodes' user in their containers; DIR
			// (0700) keeps it from the host's other users.
			err = bus.WriteFileAtomic(routesConf, conf, 0o644)
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner auth init: %v\n", err)
			return cli.ExitFailed
		}
		fmt.Fprintf(io.Stdout, "%s  written: the cluster's routes to %s with their password, to include in nats-server's cluster block\n", routesConf, strings.Join(hosts, ", "))
	}
	return cli.ExitOK
}

// workerGroups is --worker NAME=SKILL,SKILL..., repeatable.
type workerGroups []bus.WorkerGroup

func (w *workerGroups) String() string {
	var out []string
	for _, g := range *w {
		out = append(out, g.Name+"="+strings.Join(g.Skills, ","))
	}
	return strings.Join(out, " ")
}

func (w *workerGroups) Set(v string) error {
	name, list, ok := strings.Cut(v, "=")
	if !ok || name == "" || list == "" {
		return fmt.Errorf("want NAME=SKILL,SKILL..., e.g. shell=shell or web=http,echo; got %q", v)
	}
	*w = append(*w, bus.WorkerGroup{Name: name, Skills: strings.Split(list, ",")})
	return nil
}

// authAddClient is `planner auth add-client NAME`.
func authAddClient(_ context.Context, args []string, io cli.IO) int {
	var dir, natsConf string
	f := cli.NewFlags("planner auth add-client", io.Stderr, io.Env, addClientUsage)
	f.String(&dir, "dir", "", filepath.Join(bus.DefaultDataDir(), "auth"), "the seeds' directory (planner serve --auth's is <data-dir>/auth)")
	f.String(&natsConf, "nats-conf", "", "", "where to write the nats-server configuration block (default DIR/auth.conf)")
	if err := f.Parse(args); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if f.NArg() != 1 {
		fmt.Fprintln(io.Stderr, "planner auth add-client: want exactly one NAME"+f.LateFlags())
		return cli.ExitUsage
	}
	name := f.Arg(0)
	if natsConf == "" {
		natsConf = filepath.Join(dir, "auth.conf")
	}
	_, err := os.Stat(filepath.Join(dir, bus.ClientSeedFile(name)))
	existed := err == nil
	if err := bus.AddClient(dir, name); err != nil {
		fmt.Fprintf(io.Stderr, "planner auth add-client: %v\n", err)
		if errors.Is(err, bus.ErrSeed) && !strings.Contains(err.Error(), "directory") {
			return cli.ExitUsage
		}
		return cli.ExitFailed
	}
	seeds, err := bus.EnsureSeeds(dir)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner auth add-client: %v\n", err)
		return cli.ExitFailed
	}
	what := "created"
	if existed {
		what = "kept"
	}
	for _, c := range seeds.Clients() {
		if c.Name == name {
			fmt.Fprintf(io.Stdout, "%s  %s (%s): client %s\n", seeds.ClientFile(name), what, c.PublicKey, name)
		}
	}
	if err := bus.WriteFileAtomic(natsConf, bus.NATSAuthConfig(seeds), 0o644); err != nil {
		fmt.Fprintf(io.Stderr, "planner auth add-client: %v\n", err)
		return cli.ExitFailed
	}
	fmt.Fprintf(io.Stdout, "%s  written: users and permissions of every role and client\n", natsConf)
	fmt.Fprintf(io.Stdout, "restart 'planner serve --auth' (or the NATS nodes, one at a time) to admit it; then connect with --nkey %s\n", seeds.ClientFile(name))
	return cli.ExitOK
}

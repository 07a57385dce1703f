package plannercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/progress"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/plan"
	"github.com/rs/zerolog"
)

const runUsage = `Usage: planner run [flags] FILE

Runs FILE ('-' for stdin) to its end: a Plan JSON, or a plan request
({"kind": "plan" | "external" | "htn" | "goap" | "template", ...}) that goes
through the planner and its replan loop. Progress goes to stderr; the execution result (or the
request's outcome) is the last line on stdout. Exits 0 on success, 1 if the
plan or request failed, timed out, was rejected or fell back, 2 if FILE is
not valid. Without --nats-url it runs on a private embedded server (a
temporary store and a free port, unless --listen or --data-dir say
otherwise), so it can run beside a live node; --auth runs it with roles and
permissions, as 'planner serve --auth' does. A client may not publish plans,
so with --auth, or with --nkey or --creds, a Plan JSON goes to the planner
as a request of kind plan (it runs as <requestId>-1, its requestId being
the plan's planId) and the execution result is printed as usual.`

func plannerRun(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var nf nodeFlags
	var quiet, verbose bool
	var wait time.Duration
	f := cli.NewFlags("planner run", io.Stderr, io.Env, runUsage)
	c.Register(f, cli.RunsPrivately)
	c.RegisterClient(f)
	nf.register(f)
	f.Bool(&quiet, "quiet", "", false, "no progress on stderr")
	f.Bool(&verbose, "v", "", false, "a progress line for every event, even for plans of more than 50 tools (which otherwise get one summary line)")
	f.Duration(&wait, "wait", "", 0, "how long to wait for the result (default: the plan's timeout plus a minute)")
	nf.view.register(f, "")
	if err := f.Parse(args); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if f.NArg() != 1 {
		fmt.Fprintln(io.Stderr, "planner run: want exactly one FILE (or - for stdin)"+f.LateFlags())
		return cli.ExitUsage
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := c.CheckExposure("planner run"); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if err := nf.view.check(f, "planner run", c.Auth, c.Insecure); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if c.Bus.URL == "" {
		if _, err := nf.config(c.Bus, c.Auth); err != nil {
			return cli.UsageErr(io.Stderr, fmt.Errorf("planner run: %w", err))
		}
	}
	name := f.Arg(0)
	doc, err := readInput(name, io.Stdin)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.ExitUsage
	}
	if isRequest(doc) {
		return runRequest(ctx, f, &c, &nf, name, doc, quiet, verbose, wait, log, io)
	}
	p, err := plan.Decode(doc)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return cli.ExitUsage
	}
	if len(p.Tools) == 0 {
		fmt.Fprintf(io.Stderr, "planner run: %s: at /tools: the plan has no tools: there is nothing to run\n", name)
		return cli.ExitUsage
	}
	if wait == 0 {
		wait = time.Duration(p.TimeoutMs)*time.Millisecond + time.Minute
	}

	conn, nctx, stop, err := c.connectOrEmbed(ctx, f, &nf, log, true)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer stop()
	v, err := nf.view.runView(conn, c.Auth, log, io)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.ExitUsage
	}
	defer v.Stop()
	// A client may not publish plans: one with a role's seed asks the
	// planner to run it.
	viaPlanner := c.Auth || (c.Bus.URL != "" && (c.Bus.NKeySeedFile != "" || c.Bus.CredsFile != ""))
	if c.Bus.URL != "" && !viaPlanner && !serviceAnswers(conn, bus.ServiceDispatcher) {
		fmt.Fprintf(io.Stderr, "planner run: no dispatcher answers on %s; the plan will wait in %s until one starts\n",
			c.Bus.URL, bus.StreamPlans)
	}

	var shown func(planbus.Event)
	endProgress := func() {}
	if !quiet {
		pr := progress.New(io.Stderr, verbose)
		pr.ApproveFlags = approveFlags(&c, conn)
		defer pr.Close()
		shown, endProgress = pr.Event, pr.Close
	}
	var seen idSeen
	onEvent := seen.follow(shown)
	cl, err := clientOn(conn, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.ExitFailed
	}
	rctx, cancel := context.WithTimeout(nctx, wait)
	defer cancel()
	if viaPlanner {
		o, err := cl.RunPlan(rctx, doc, onEvent)
		endProgress()
		if refusedInput(err) {
			fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
			return cli.ExitUsage
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner run: %v%s\n", runErr(nctx, unavailable(err)), seen.goesOn(ctx, &c))
			return cli.CtxExit(ctx, cli.ExitFailed)
		}
		return printPlanOutcome("planner run", o, io)
	}
	res, err := cl.ExecutePlan(rctx, doc, onEvent)
	endProgress()
	if errors.Is(err, client.ErrPlanIDTaken) {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return cli.ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v%s\n", runErr(nctx, err), seen.goesOn(ctx, &c))
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	return printExecution("planner run", res, io)
}

// printPlanOutcome prints what running a bare plan through the planner
// came to: the plan's execution result, or, when no plan ran (a skill
// disabled in the session, say), the request's outcome, which tells why.
// It returns the exit code it means.
func printPlanOutcome(cmd string, o *planbus.Outcome, io cli.IO) int {
	if o.Execution == nil {
		return printOutcome(cmd, o, io)
	}
	return printExecution(cmd, o.Execution, io)
}

// printExecution prints a plan's execution result as the last line on
// stdout and returns the exit code it means.
func printExecution(cmd string, res *planbus.ExecutionResult, io cli.IO) int {
	out, _ := jsonLine(res)
	fmt.Fprintln(io.Stdout, out)
	if !res.Success {
		msg := string(res.State)
		if res.Error != nil {
			// Messages may name the plan already: not twice in a line.
			msg += ": " + strings.TrimPrefix(res.Error.Message, "plan "+res.PlanID+": ")
		}
		fmt.Fprintf(io.Stderr, "%s: plan %s %s\n", cmd, res.PlanID, msg)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// serviceAnswers pings a micro service by name.
func serviceAnswers(conn *bus.Conn, name string) bool {
	_, err := conn.NC.Request("$SRV.PING."+name, nil, 2*time.Second)
	return err == nil
}

// set reports whether a flag was given on the command line or through its
// environment variable.
func (c *common) set(f *cli.Flags, name string) bool {
	found := false
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			found = true
		}
	})
	if found {
		return true
	}
	env := map[string]string{"log-level": "PLANBUS_LOG_LEVEL", "listen": "PLANBUS_LISTEN", "data-dir": "PLANBUS_DATA_DIR",
		"drain-timeout": "PLANBUS_DRAIN_TIMEOUT", "sync": "PLANBUS_SYNC"}[name]
	return env != "" && f.Env(env) != ""
}

// privateRunSync is the sync setting of a private run's temporary store.
var privateRunSync = bus.Sync{Interval: time.Second}

// connectOrEmbed connects to --nats-url, or starts a node on an embedded
// server. With private set, the embedded server gets a temporary store and
// a free port unless --listen or --data-dir were given. The context it
// returns is ctx, or, with an embedded node, one that also ends when a
// component of the node dies, with the death as its cause
// (context.Cause), so that a run does not wait for what can no longer
// come.
func (c *common) connectOrEmbed(ctx context.Context, f *cli.Flags, nf *nodeFlags, log zerolog.Logger, private bool) (*bus.Conn, context.Context, func(), error) {
	if c.Bus.URL != "" {
		conn, err := c.dialAsClient(ctx, log)
		if err != nil {
			return nil, nil, nil, err
		}
		return conn, ctx, conn.Close, nil
	}
	bc := c.Bus
	cleanup := func() {}
	if private && bc.DataDir == "" {
		dir, err := os.MkdirTemp("", "planbus-run-")
		if err != nil {
			return nil, nil, nil, err
		}
		bc.DataDir = dir
		cleanup = func() { _ = os.RemoveAll(dir) }
		if !c.set(f, "sync") {
			// The store goes away with the run: flushing every write to a
			// disk nobody will read again after a crash buys nothing.
			bc.Sync = privateRunSync
		}
	}
	cfg, err := nf.config(bc, c.Auth)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if private && !c.set(f, "drain-timeout") {
		// The private server goes away with the run: nothing is gained by
		// letting calls finish after it is interrupted.
		cfg.Worker.DrainTimeout = time.Second
	}
	n, err := node.Start(ctx, cfg, log)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	// The run itself is a client of the node.
	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		n.Stop()
		cleanup()
		return nil, nil, nil, err
	}
	nctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-n.Done():
			cancel(n.Err())
		case <-nctx.Done():
		}
	}()
	stop := func() {
		cancel(nil)
		<-watched
		conn.Close()
		n.Stop()
		cleanup()
	}
	return conn, nctx, stop, nil
}

// idSeen keeps the request id of the first event a run sees.
type idSeen struct {
	mu sync.Mutex
	id string
}

// follow returns an event callback that notes the request id and passes
// the event on to show (which may be nil).
func (s *idSeen) follow(show func(planbus.Event)) func(planbus.Event) {
	return func(ev planbus.Event) {
		s.mu.Lock()
		if s.id == "" {
			s.id = ev.RequestID
		}
		s.mu.Unlock()
		if show != nil {
			show(ev)
		}
	}
}

// goesOn is what an interrupted run against a running system (ctx is the
// command's, ended by the interrupt) adds to its error: the request goes
// on there, and how to follow or stop it.
func (s *idSeen) goesOn(ctx context.Context, c *common) string {
	s.mu.Lock()
	id := s.id
	s.mu.Unlock()
	if ctx.Err() == nil || c.Bus.URL == "" || id == "" {
		return ""
	}
	u := bus.RedactURL(c.Bus.URL)
	return fmt.Sprintf("\nplanner run: request %s goes on running on %s: follow it with 'planner watch --nats-url %s %s', stop it with 'planner cancel --nats-url %s %s'",
		id, u, u, id, u, id)
}

// runErr is the error to show for err, a run's failure: when the node
// under the run died, the death.
func runErr(nctx context.Context, err error) error {
	if cause := context.Cause(nctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return err
}

// approveFlags are the flags 'planner approve' needs to reach the node a
// run started for itself (none when the run was given --nats-url: its
// user knows how they connect).
func approveFlags(c *common, conn *bus.Conn) string {
	if c.Bus.URL != "" {
		return ""
	}
	flags := " --nats-url " + conn.NC.ConnectedUrl()
	if seed := conn.Config.NKeySeedFile; seed != "" {
		flags += " --nkey " + seed
	}
	return flags
}

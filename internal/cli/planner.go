package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/embedded"
	"github.com/planbus/planbus/internal/htncli"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/templates"
)

const plannerUsage = `Usage: planner <command> [flags]

Commands:
  run FILE     run a plan or a request end to end and print its result
  serve        keep a planbus node up (embedded NATS, planner, dispatcher, workers)
  submit FILE  send a plan or a request to a running system; print its requestId
  watch ID     follow a request (running or ended) to its end, as run shows it
  cancel ID    cancel a request or a plan
  approve ID TOOL  approve (or --reject) a tool waiting for approval
  ls           list recent requests
  status ID    show a plan's or a request's state, or a session's agent, in a running system
  skills       list the skills workers advertise and their health in a session
  reset SESSION  make a session's skills healthy again (--state: clear its state too)
  agent ...    start, stop or show a session's GOAP agent (planner agent -h)
  guide MSG    play one turn of a guided session; print the plan's context
  ui           serve the web view of a running system
  bench        run the DAG benchmark workloads
  htn          plan with an InductorHtn domain, printing what the reference prints
  auth init D  write a seed per role and a nats-server auth block to directory D
  version      print the version

Without --nats-url, run and serve start an embedded NATS JetStream server
with the planner service, a dispatcher and tool workers in-process; submit,
watch, cancel, approve, ls, status, skills, reset, guide and ui work on a
running system and need --nats-url. serve also serves the web view on ` + DefaultHTTP + ` (--http).
'planner <command> -h' shows the flags of a command.`

// Planner is the planner command.
func Planner(ctx context.Context, args []string, io IO) int {
	if len(args) == 0 {
		fmt.Fprintln(io.Stderr, plannerUsage)
		return ExitUsage
	}
	switch args[0] {
	case "run":
		return plannerRun(ctx, args[1:], io)
	case "serve":
		return plannerServe(ctx, args[1:], io)
	case "bench":
		return plannerBench(ctx, args[1:], io)
	case "status":
		return plannerStatus(ctx, args[1:], io)
	case "agent":
		return plannerAgent(ctx, args[1:], io)
	case "submit":
		return plannerSubmit(ctx, args[1:], io)
	case "watch":
		return plannerWatch(ctx, args[1:], io)
	case "cancel":
		return plannerCancel(ctx, args[1:], io)
	case "approve":
		return plannerApprove(ctx, args[1:], io)
	case "ls":
		return plannerLs(ctx, args[1:], io)
	case "skills":
		return plannerSkills(ctx, args[1:], io)
	case "reset":
		return plannerReset(ctx, args[1:], io)
	case "guide":
		return plannerGuide(ctx, args[1:], io)
	case "ui":
		return plannerUI(ctx, args[1:], io)
	case "htn":
		return htncli.Run(ctx, args[1:], io.Stdout, io.Stderr)
	case "auth":
		return plannerAuth(ctx, args[1:], io)
	case "version", "--version", "-version":
		fmt.Fprintln(io.Stdout, versionName, Version())
		return ExitOK
	case "help", "-h", "--help", "-help":
		fmt.Fprintln(io.Stdout, plannerUsage)
		return ExitOK
	}
	fmt.Fprintf(io.Stderr, "planner: unknown command %q\n\n%s\n", args[0], plannerUsage)
	return ExitUsage
}

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

type nodeFlags struct {
	view    viewFlags
	metrics metricsFlags
	// reg is the process's metrics registry, made by config and served
	// beside the view and on --metrics.
	reg     *metrics.Registry
	workers int
	worker  workerFlags
	disp    dispatcherFlags
	plan    plannerFlags
}

func (n *nodeFlags) register(f *flags) {
	f.Int(&n.workers, "workers", "PLANBUS_WORKERS", 4, "tool workers to run in-process on the embedded server")
	n.worker.register(f)
	n.disp.register(f)
	n.plan.register(f)
}

type plannerFlags struct {
	domains       string
	templates     string
	fallback      string
	ackWait       time.Duration
	htnMaxMemory  int64
	goapMaxMemory int64
	goapMaxNodes  int
	genMaxMemory  int64
	genConc       int
	memoryLimit   int64
}

func (p *plannerFlags) register(f *flags) {
	f.Duration(&p.ackWait, "planner-ack-wait", "PLANBUS_PLANNER_ACK_WAIT", 30*time.Second, "how soon another planner takes over the requests of a dead one")
	f.String(&p.domains, "domains", "PLANBUS_DOMAINS", "", "directory of HTN (<name>.htn) and GOAP (<name>.goap.json) domains that requests may name")
	f.String(&p.templates, "templates", "PLANBUS_TEMPLATES", "", "plan template library (JSON) for requests of kind template")
	f.String(&p.fallback, "fallback-file", "PLANBUS_FALLBACK_FILE", "", "fallback texts, one per line, {input} standing for the request's input (default: three built-in texts)")
	f.Size(&p.htnMaxMemory, "htn-max-memory", "PLANBUS_HTN_MAX_MEMORY", planner.DefaultHTNMaxMemory,
		"most memory one HTN generation may hold (requests may ask for less in htn.budget.memory)")
	f.Size(&p.goapMaxMemory, "goap-max-memory", "PLANBUS_GOAP_MAX_MEMORY", planner.DefaultGOAPMaxMemory,
		"most memory one GOAP generation may hold (requests may ask for less in goap.budget.memory)")
	f.Int(&p.goapMaxNodes, "goap-max-nodes", "PLANBUS_GOAP_MAX_NODES", planner.DefaultGOAPMaxNodes,
		"most states one GOAP generation may expand (requests may ask for less in goap.budget.nodes)")
	f.Size(&p.genMaxMemory, "gen-max-memory", "PLANBUS_GEN_MAX_MEMORY", planner.DefaultGenMaxMemory,
		"memory all generations running at once may hold together; a generation waits until its budget fits")
	f.Int(&p.genConc, "gen-concurrency", "PLANBUS_GEN_CONCURRENCY", 0, "HTN and GOAP searches of requests run at once, and as many other generations (plans as given, templates) and half as many searches of GOAP agents beside them; the others wait in line (0: the CPU count)")
	f.Size(&p.memoryLimit, "memory-limit", "PLANBUS_MEMORY_LIMIT", 0,
		"Go's soft memory limit for this process (0: $GOMEMLIMIT if set, else --gen-max-memory + 128MiB, raised by twice the live heap that is not the running generations')")
}

// memoryFollowEvery is how often followLiveMemory sets the limit again.
const memoryFollowEvery = 2 * time.Second

// memoryHeadroom is what the soft memory limit leaves above the
// generations' budget for the rest of the process.
const memoryHeadroom = 128 << 20

// applyMemoryLimit sets the process's soft memory limit: --memory-limit,
// else $GOMEMLIMIT when set, else --gen-max-memory plus room for the rest
// of the process. Generations that fill their budgets leave as much
// garbage as they hold; with the limit, Go collects it before it doubles
// the heap. It returns the limit in force, and whether it is planbus's
// choice (neither flag nor variable given).
func (p *plannerFlags) applyMemoryLimit(env func(string) string) (limit int64, chosen bool) {
	switch {
	case p.memoryLimit > 0:
		debug.SetMemoryLimit(p.memoryLimit)
	case env("GOMEMLIMIT") == "":
		debug.SetMemoryLimit(p.genMaxMemory + memoryHeadroom)
		chosen = true
	}
	return debug.SetMemoryLimit(-1), chosen
}

// followLiveMemory raises the soft memory limit planbus chose, base, by
// twice the live heap that is not the running generations' (their memory
// budgets, generations()), every interval until ctx ends. The limit is
// there to collect what runaway generations leave, before it doubles the
// heap; but a node running plans at a high rate holds hundreds of MB that
// are live (its embedded server's events stream, message ids kept for
// de-duplication, subject indexes), and under a limit below that the
// collector runs without pause: at 300 plans a second with the limit at
// 384 MiB, plans waited seconds. Twice the rest of the live heap is the
// room Go's default (GOGC=100) gives it; with nothing but generations
// running, the limit stays near base.
func followLiveMemory(ctx context.Context, base int64, generations func() int64, interval time.Duration) {
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rtmetrics.Read(sample)
		live := int64(sample[0].Value.Uint64())
		debug.SetMemoryLimit(memoryLimitFor(base, live, generations()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// memoryLimitFor is base plus twice what of the live heap is not the
// generations'.
func memoryLimitFor(base, live, generations int64) int64 {
	return base + 2*max(0, live-generations)
}

func (p *plannerFlags) config() (planner.Config, error) {
	cfg := planner.Config{DomainsDir: p.domains, AckWait: p.ackWait, Version: Version(),
		HTNMaxMemory: p.htnMaxMemory, GOAPMaxMemory: p.goapMaxMemory, GOAPMaxNodes: p.goapMaxNodes,
		GenMaxMemory: p.genMaxMemory, GenConcurrency: p.genConc}
	switch {
	case p.htnMaxMemory < 1<<20:
		return cfg, fmt.Errorf("--htn-max-memory %d: want at least 1MiB", p.htnMaxMemory)
	case p.goapMaxMemory < 1<<20:
		return cfg, fmt.Errorf("--goap-max-memory %d: want at least 1MiB", p.goapMaxMemory)
	case p.goapMaxNodes < 1:
		return cfg, fmt.Errorf("--goap-max-nodes %d: want at least 1", p.goapMaxNodes)
	case p.genMaxMemory < max(p.htnMaxMemory, p.goapMaxMemory):
		return cfg, fmt.Errorf("--gen-max-memory %d: want at least --htn-max-memory (%d) and --goap-max-memory (%d), so that a generation fits",
			p.genMaxMemory, p.htnMaxMemory, p.goapMaxMemory)
	case p.genConc < 0:
		return cfg, fmt.Errorf("--gen-concurrency %d: want 0 (the CPU count) or more", p.genConc)
	}
	if p.domains != "" {
		if st, err := os.Stat(p.domains); err != nil || !st.IsDir() {
			return cfg, fmt.Errorf("--domains %q: not a directory", p.domains)
		}
	}
	if p.templates != "" {
		var err error
		if cfg.Templates, err = templates.ReadFile(p.templates); err != nil {
			return cfg, fmt.Errorf("--templates: %w", err)
		}
	}
	if p.fallback != "" {
		b, err := os.ReadFile(p.fallback)
		if err != nil {
			return cfg, fmt.Errorf("--fallback-file: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				cfg.FallbackTemplates = append(cfg.FallbackTemplates, line)
			}
		}
		if len(cfg.FallbackTemplates) == 0 {
			return cfg, fmt.Errorf("--fallback-file %s: no texts in it", p.fallback)
		}
	}
	return cfg, nil
}

func (n *nodeFlags) config(bc bus.Config, auth bool) (node.Config, error) {
	wc, err := n.worker.config()
	if err != nil {
		return node.Config{}, err
	}
	if n.workers < 0 {
		return node.Config{}, fmt.Errorf("--workers %d: want 0 or more", n.workers)
	}
	pc, err := n.plan.config()
	if err != nil {
		return node.Config{}, err
	}
	if n.reg == nil {
		n.reg = metrics.New()
		n.view.metrics = n.reg
	}
	return node.Config{Bus: bc, Auth: auth, Workers: n.workers, Worker: wc, Dispatcher: n.disp.config(), Planner: pc, Metrics: n.reg}, nil
}

func plannerRun(ctx context.Context, args []string, io IO) int {
	var c common
	var nf nodeFlags
	var quiet, verbose bool
	var wait time.Duration
	f := newFlags("planner run", io.Stderr, io.Env, runUsage)
	c.register(f, runsPrivately)
	c.registerClient(f)
	nf.register(f)
	f.Bool(&quiet, "quiet", "", false, "no progress on stderr")
	f.Bool(&verbose, "v", "", false, "a progress line for every event, even for plans of more than 50 tools (which otherwise get one summary line)")
	f.Duration(&wait, "wait", "", 0, "how long to wait for the result (default: the plan's timeout plus a minute)")
	nf.view.register(f, "")
	if err := f.parse(args); err != nil {
		return usageErr(io.Stderr, err)
	}
	if f.NArg() != 1 {
		fmt.Fprintln(io.Stderr, "planner run: want exactly one FILE (or - for stdin)"+f.lateFlags())
		return ExitUsage
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := c.checkExposure("planner run"); err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := nf.view.check(f, "planner run", c.auth, c.insecure); err != nil {
		return usageErr(io.Stderr, err)
	}
	if c.bus.URL == "" {
		if _, err := nf.config(c.bus, c.auth); err != nil {
			return usageErr(io.Stderr, fmt.Errorf("planner run: %w", err))
		}
	}
	name := f.Arg(0)
	doc, err := readInput(name, io.Stdin)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ExitUsage
	}
	if isRequest(doc) {
		return runRequest(ctx, f, &c, &nf, name, doc, quiet, verbose, wait, log, io)
	}
	p, err := plan.Decode(doc)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return ExitUsage
	}
	if len(p.Tools) == 0 {
		fmt.Fprintf(io.Stderr, "planner run: %s: at /tools: the plan has no tools: there is nothing to run\n", name)
		return ExitUsage
	}
	if wait == 0 {
		wait = time.Duration(p.TimeoutMs)*time.Millisecond + time.Minute
	}

	conn, nctx, stop, err := c.connectOrEmbed(ctx, f, &nf, log, true)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer stop()
	v, err := nf.view.runView(conn, c.auth, log, io)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ExitUsage
	}
	defer v.Stop()
	// A client may not publish plans: one with a role's seed asks the
	// planner to run it.
	viaPlanner := c.auth || (c.bus.URL != "" && (c.bus.NKeySeedFile != "" || c.bus.CredsFile != ""))
	if c.bus.URL != "" && !viaPlanner && !serviceAnswers(conn, bus.ServiceDispatcher) {
		fmt.Fprintf(io.Stderr, "planner run: no dispatcher answers on %s; the plan will wait in %s until one starts\n",
			c.bus.URL, bus.StreamPlans)
	}

	var shown func(plan.Event)
	endProgress := func() {}
	if !quiet {
		pr := newProgress(io.Stderr, verbose)
		pr.approveFlags = approveFlags(&c, conn)
		defer pr.close()
		shown, endProgress = pr.event, pr.close
	}
	var seen idSeen
	progress := seen.follow(shown)
	cl, err := clientOn(conn, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ExitFailed
	}
	rctx, cancel := context.WithTimeout(nctx, wait)
	defer cancel()
	if viaPlanner {
		o, err := cl.RunPlan(rctx, doc, progress)
		endProgress()
		if refusedInput(err) {
			fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
			return ExitUsage
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner run: %v%s\n", runErr(nctx, unavailable(err)), seen.goesOn(ctx, &c))
			return ctxExit(ctx, ExitFailed)
		}
		return printPlanOutcome("planner run", o, io)
	}
	res, err := cl.ExecutePlan(rctx, doc, progress)
	endProgress()
	if errors.Is(err, client.ErrPlanIDTaken) {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v%s\n", runErr(nctx, err), seen.goesOn(ctx, &c))
		return ctxExit(ctx, ExitFailed)
	}
	return printExecution("planner run", res, io)
}

// printPlanOutcome prints what running a bare plan through the planner
// came to: the plan's execution result, or, when no plan ran (a skill
// disabled in the session, say), the request's outcome, which tells why.
// It returns the exit code it means.
func printPlanOutcome(cmd string, o *planbus.Outcome, io IO) int {
	if o.Execution == nil {
		return printOutcome(cmd, o, io)
	}
	return printExecution(cmd, o.Execution, io)
}

// printExecution prints a plan's execution result as the last line on
// stdout and returns the exit code it means.
func printExecution(cmd string, res *planbus.ExecutionResult, io IO) int {
	out, _ := jsonLine(res)
	fmt.Fprintln(io.Stdout, out)
	if !res.Success {
		msg := res.State
		if res.Error != nil {
			// Messages may name the plan already: not twice in a line.
			msg += ": " + strings.TrimPrefix(res.Error.Message, "plan "+res.PlanID+": ")
		}
		fmt.Fprintf(io.Stderr, "%s: plan %s %s\n", cmd, res.PlanID, msg)
		return ExitFailed
	}
	return ExitOK
}

// serviceAnswers pings a micro service by name.
func serviceAnswers(conn *bus.Conn, name string) bool {
	_, err := conn.NC.Request("$SRV.PING."+name, nil, 2*time.Second)
	return err == nil
}

// set reports whether a flag was given on the command line or through its
// environment variable.
func (c *common) set(f *flags, name string) bool {
	found := false
	f.Visit(func(fl *flagDef) {
		if fl.Name == name {
			found = true
		}
	})
	if found {
		return true
	}
	env := map[string]string{"log-level": "PLANBUS_LOG_LEVEL", "listen": "PLANBUS_LISTEN", "data-dir": "PLANBUS_DATA_DIR",
		"drain-timeout": "PLANBUS_DRAIN_TIMEOUT", "sync": "PLANBUS_SYNC"}[name]
	return env != "" && f.env(env) != ""
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
func (c *common) connectOrEmbed(ctx context.Context, f *flags, nf *nodeFlags, log zerolog.Logger, private bool) (*bus.Conn, context.Context, func(), error) {
	if c.bus.URL != "" {
		conn, err := c.dialAsClient(ctx, log)
		if err != nil {
			return nil, nil, nil, err
		}
		return conn, ctx, conn.Close, nil
	}
	bc := c.bus
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
	cfg, err := nf.config(bc, c.auth)
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
func (s *idSeen) follow(show func(plan.Event)) func(plan.Event) {
	return func(ev plan.Event) {
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
	if ctx.Err() == nil || c.bus.URL == "" || id == "" {
		return ""
	}
	u := bus.RedactURL(c.bus.URL)
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

func plannerServe(ctx context.Context, args []string, io IO) int {
	var c common
	var nf nodeFlags
	f := newFlags("planner serve", io.Stderr, io.Env, serveUsage)
	c.register(f, serves)
	nf.register(f)
	nf.view.register(f, DefaultHTTP)
	nf.metrics.register(f)
	if err := f.parse(args); err != nil {
		return usageErr(io.Stderr, err)
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := c.checkExposure("planner serve"); err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := nf.view.check(f, "planner serve", c.auth, c.insecure); err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := nf.metrics.check("planner serve"); err != nil {
		return usageErr(io.Stderr, err)
	}
	if c.bus.URL != "" {
		if nf.view.given {
			log.Warn().Msg("--http: with --nats-url, serve runs only the planner; serve the web view with planner ui")
		}
		return servePlanner(ctx, &c, &nf, log, io)
	}
	cfg, err := nf.config(c.bus, c.auth)
	if err != nil {
		return usageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	memLimit, memChosen := nf.plan.applyMemoryLimit(io.Env)
	log.Debug().Int64("memory_limit", memLimit).Bool("follows_live_heap", memChosen).Msg("soft memory limit")
	ms, err := nf.metrics.start(cfg.Metrics, log)
	if err != nil {
		return usageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	defer ms.Stop()
	n, err := node.Start(ctx, cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("cannot start")
		if errors.Is(err, embedded.ErrListen) {
			return ExitUsage
		}
		return ctxExit(ctx, ExitFailed)
	}
	if memChosen {
		go followLiveMemory(ctx, memLimit, n.GenerationMemory, memoryFollowEvery)
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
	if v == nil && code != ExitOK {
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
		return ExitOK
	case <-n.Done():
		log.Error().Err(n.Err()).Msg("a component died; stopping the node")
		n.Stop()
		return ExitFailed
	}
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	const limit = 64 << 20
	var r io.Reader
	if name == "-" {
		r = stdin
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, limit>>20)
	}
	return b, nil
}

func jsonLine(v any) (string, error) {
	var sb strings.Builder
	enc := jsonEncoder(&sb)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(sb.String(), "\n"), nil
}

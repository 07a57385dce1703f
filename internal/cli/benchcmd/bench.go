// Package benchcmd is `planner bench`: the DAG workloads, the bus floor
// and soaks (package bench) run on a private embedded server, with the
// dispatchers and workers in-process or, with --procs, as processes of
// their own (this binary run again as 'planner bench component ...', the
// code of packages dispatchercmd and toolworkercmd). Run is called by the
// planner command (package plannercmd).
package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/dispatchercmd"
	"github.com/planbus/planbus/internal/cli/memlimit"
	"github.com/planbus/planbus/internal/cli/toolworkercmd"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
	"github.com/rs/zerolog"
)

const benchUsage = `Usage: planner bench [--workloads DIR | --only NAMES | --scale] [flags]
       planner bench --soak DURATION --rate N [flags]

Runs every DAG workload (the built-in ones, the *.json files in DIR, the
names in --only, or with --scale the scaling set: chain-10/100/1000,
fanout-100/1000/10000/50000, many-plans-100/1000/5000) through the whole
system on a private embedded server and through the execution engine alone,
driven by goroutines with no bus (the engine floor): one warm-up, then
--runs measured runs. --only takes built-in names and generated ones:
chain-N (N tools in a line), fanout-N (root, N parallel tools, join) and
many-plans-N (N concurrent 5-tool diamonds). A workload the plan limits
refuse is reported as refused and the others run. A workload or bus floor
that fails does not stop the others: what was measured is printed, then a
line naming each failure, and the exit status is 1.

First it measures the bus floor on the same server with the same --sync:
p50 and p99 of a JetStream publish+ack, a KV compare-and-set and a
work-queue publish→pull delivery, and bus-only programs that do a
chain step's, a fan-out's and many 5-tool plans' messages with no planbus
code (the fan-out again with planbus's three progress events a call; the
plans with every message planbus stores and sends for one). Then it prints
a Markdown table per workload (makespan median (min–max), ms per
critical-path step, tools/s, for workloads with instances plans/s and plan
latency p50/p99, the whole system's CPU time per tool and the dispatchers'
compare-and-set conflicts per plan) and each workload's cost ratio to the
bus floor (docs/benchmarks.md defines them).

Dispatchers and workers run in-process (--dispatchers, --workers), or with
--procs as processes of their own: this binary run again as
'planner bench component dispatcher|toolworker FLAGS', the code of the
dispatcher and toolworker commands, on the bench's server. CPU time then
adds theirs (read from /proc while they run).

--soak DURATION --rate N submits N plans a second (a 5-tool diamond each)
for DURATION instead of the workloads and samples the RSS of the bench
process (and of the component processes with --procs) every --sample,
then prints the samples, whether RSS plateaued: stayed within ±10% after
the first tenth of the soak (at most its first ten minutes; the retention
and a minute when the soak outlasts it; --warm-up if longer), and the KB of
RSS each plan finished after that added: the least-squares slope of RSS
over plans finished, what a retained plan costs while the retention
outlasts the soak.`

// benchFlags are planner bench's settings.
type benchFlags struct {
	dir, only, cpuprofile string
	memprofile            string
	scale                 bool
	runs, workers         int
	dispatchers           int
	concurrency           int
	procs                 bool
	serveMemory           bool
	busFloor              bool
	floorSamples          int
	floorRounds           int
	floorSteps            int
	floorCalls            int
	floorPlans            int
	soak, sample, drain   time.Duration
	warmUp                time.Duration
	rate                  int
}

func (b *benchFlags) register(f *cli.Flags) {
	f.String(&b.dir, "workloads", "PLANBUS_BENCH_WORKLOADS", "", "directory of workload files (default: the built-in workloads)")
	f.String(&b.only, "only", "", "", "run just these workloads, comma-separated: built-in names, chain-N, fanout-N, many-plans-N")
	f.Bool(&b.scale, "scale", "", false, "run the scaling set (chain-10/100/1000, fanout-100/1000/10000/50000, many-plans-100/1000/5000)")
	f.Int(&b.runs, "runs", "", 5, "measured runs per workload")
	f.Int(&b.workers, "workers", "", 2, "tool workers")
	f.Int(&b.dispatchers, "dispatchers", "", 1, "dispatchers")
	f.Int(&b.concurrency, "concurrency", "", 128, "calls per skill per worker")
	f.Bool(&b.procs, "procs", "", false, "run the dispatchers and workers as processes of their own")
	f.Bool(&b.serveMemory, "serve-memory-limit", "", false,
		"run under the soft memory limit planner serve sets by default (--gen-max-memory + 128MiB, raised by twice the live heap that is not generations')")
	f.Bool(&b.busFloor, "bus-floor", "", true, "measure the bus floor first and print each workload's ratio to it")
	f.Int(&b.floorSamples, "floor-samples", "", 1000, "samples of each bus floor trip")
	f.Int(&b.floorRounds, "floor-rounds", "", 5, "measured rounds of each bus-only pattern (chain, fan-out, plans)")
	f.Int(&b.floorSteps, "floor-steps", "", 100, "steps of the bus-only chain")
	f.Int(&b.floorCalls, "floor-calls", "", 1000, "calls of the bus-only fan-outs")
	f.Int(&b.floorPlans, "floor-plans", "", 1000, "5-tool plans of the bus-only plans")
	f.Duration(&b.soak, "soak", "", 0, "instead of the workloads, submit --rate plans a second for this long and sample RSS")
	f.Int(&b.rate, "rate", "", 200, "plans a second during --soak")
	f.Duration(&b.sample, "sample", "", 10*time.Second, "time between two RSS samples during --soak")
	f.Duration(&b.warmUp, "warm-up", "", 0,
		"what the --soak's verdict leaves out, if longer than its own warm-up: e.g. the 10-minute duplicate window and the time the events stream takes to reach its cap, to measure what grows with the retention alone")
	f.Duration(&b.drain, "drain", "", time.Minute, "after --soak, how long to wait for the plans still running")
	f.String(&b.cpuprofile, "cpuprofile", "", "", "write a CPU profile of the measured runs (or of the whole --soak) to this file (the bench process only)")
	f.String(&b.memprofile, "memprofile", "", "", "write a heap profile to this file at the end (after a --soak, before its system stops: what it still holds; with --soak also FILE.warm-up, at the end of the warm-up, for pprof -base)")
}

func (b *benchFlags) validate() error {
	switch {
	case b.runs < 1:
		return fmt.Errorf("planner bench: --runs %d: want at least 1", b.runs)
	case b.dispatchers < 1:
		return fmt.Errorf("planner bench: --dispatchers %d: want at least 1", b.dispatchers)
	case b.workers < 1:
		return fmt.Errorf("planner bench: --workers %d: want at least 1", b.workers)
	case b.concurrency < 1:
		return fmt.Errorf("planner bench: --concurrency %d: want at least 1", b.concurrency)
	case b.floorSamples < 1 || b.floorRounds < 1:
		return fmt.Errorf("planner bench: --floor-samples %d, --floor-rounds %d: want at least 1 each", b.floorSamples, b.floorRounds)
	case b.floorSteps < 1 || b.floorCalls < 1 || b.floorPlans < 1:
		return fmt.Errorf("planner bench: --floor-steps %d, --floor-calls %d, --floor-plans %d: want at least 1 each", b.floorSteps, b.floorCalls, b.floorPlans)
	case b.soak < 0:
		return fmt.Errorf("planner bench: --soak %s: want a positive duration", b.soak)
	case b.soak > 0 && b.rate < 1:
		return fmt.Errorf("planner bench: --rate %d: want at least 1 plan a second", b.rate)
	case b.warmUp < 0 || (b.soak > 0 && b.warmUp >= b.soak):
		return fmt.Errorf("planner bench: --warm-up %s: want it shorter than the soak %s", b.warmUp, b.soak)
	case b.soak > 0 && (b.sample <= 0 || b.drain <= 0):
		return fmt.Errorf("planner bench: --sample %s, --drain %s: want positive durations", b.sample, b.drain)
	case b.scale && (b.only != "" || b.dir != ""):
		return errors.New("planner bench: --scale runs the scaling set: give it without --only and --workloads")
	}
	return nil
}

// workloads returns the workloads the flags name.
func (b *benchFlags) workloads() ([]*bench.Workload, error) {
	all, err := bench.Builtin()
	if b.dir != "" {
		all, err = bench.Load(b.dir)
	}
	switch {
	case err != nil:
		return nil, err
	case b.scale:
		return bench.Select(all, bench.Scaling)
	case b.only != "":
		return bench.Select(all, cli.SplitList(b.only))
	}
	return all, nil
}

// Run is planner bench: args are its flags, after "bench"; "component
// dispatcher|toolworker FLAGS" runs one component of a --procs bench (this
// binary run again). It returns the exit code (package cli).
func Run(ctx context.Context, args []string, io cli.IO) int {
	if len(args) > 0 && args[0] == "component" {
		return benchComponent(ctx, args[1:], io)
	}
	b, c, err := parseBenchArgs(args, io)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	loads, err := b.workloads()
	if err != nil {
		fmt.Fprintln(io.Stderr, err)
		return cli.ExitUsage
	}
	tmp, err := os.MkdirTemp(c.Bus.DataDir, "planbus-bench-")
	if err != nil {
		return benchFailed(ctx, io, err)
	}
	defer os.RemoveAll(tmp)
	n, err := startBenchNode(ctx, tmp, &b, c.Bus, log)
	if err != nil {
		return benchFailed(ctx, io, err)
	}
	defer n.Stop()
	if b.serveMemory {
		go memlimit.Follow(ctx, generator.DefaultGenMaxMemory+memlimit.Headroom, n.GenerationMemory, memlimit.Interval)
	}
	conn, err := n.Dial(ctx, log)
	if err != nil {
		return benchFailed(ctx, io, err)
	}
	defer conn.Close()
	m := selfMeters(io.Stderr)
	if b.procs {
		procs, err := startComponents(ctx, n.Bus.URL, &b, c.LogLevel, c.Bus, log, io)
		if err != nil {
			return benchFailed(ctx, io, err)
		}
		defer procs.Stop()
		// From here on a component process that ends ends the bench.
		wctx, cancel := procs.Watch(ctx)
		defer cancel()
		ctx = wctx
		m.addProcs(procs)
	}
	if err := bench.Settle(ctx, conn.NC, b.dispatchers, c.Bus.Defaults().Partitions); err != nil {
		return benchFailed(ctx, io, err)
	}
	sys, err := bench.NewSystem(conn)
	if err != nil {
		return benchFailed(ctx, io, err)
	}
	defer sys.Close()
	if b.soak > 0 {
		return runSoak(ctx, sys, &b, c.Bus, m, io)
	}
	return runWorkloads(ctx, n, conn, sys, loads, &b, c.Bus, m, log, io)
}

// parseBenchArgs parses and checks planner bench's flags: its own and
// the common ones it takes (logging, and the private server's store,
// sync, retention, partitions and events kept).
func parseBenchArgs(args []string, io cli.IO) (benchFlags, cli.Common, error) {
	var b benchFlags
	var c cli.Common
	f := cli.NewFlags("planner bench", io.Stderr, io.Env, benchUsage)
	b.register(f)
	f.String(&c.LogLevel, "log-level", "PLANBUS_LOG_LEVEL", "warn", "debug, info, warn or error")
	f.String(&c.Bus.DataDir, "data-dir", "", "", "directory for the private server's store (default: a new temporary one; put it on the disk you want to measure)")
	f.Sync(&c.Bus.Sync, "sync", "PLANBUS_SYNC", bus.DefaultSync, "when the store is flushed to disk: always or an interval like 1s")
	f.Duration(&c.Bus.Retention, "retention", "PLANBUS_RETENTION", bus.DefaultRetention,
		"how long finished plans, results and outcomes are kept (a --soak's memory follows it)")
	f.Int(&c.Bus.Partitions, "partitions", "PLANBUS_PARTITIONS", bus.DefaultPartitions,
		"partitions of the plans' messages, each consumed by one dispatcher")
	f.KeepEvents(&c.Bus.KeepEvents, "keep-events", "PLANBUS_KEEP_EVENTS",
		"progress events the events stream keeps: all, or outcomes (all but tool.released and tool.started) (default all)")
	c.LogFormat = "console"
	if err := f.Parse(args); err != nil {
		return b, c, err
	}
	return b, c, b.validate()
}

// benchFailed prints why the bench could not go on and returns its exit
// code: cli.ExitFailed, or cli.ExitSignal when ctx has ended.
func benchFailed(ctx context.Context, io cli.IO, err error) int {
	fmt.Fprintln(io.Stderr, "planner bench:", err)
	return cli.CtxExit(ctx, cli.ExitFailed)
}

// startBenchNode starts the bench's private server, its store in dir,
// with bc's sync, retention, partitions and events kept; with --procs
// alone (the components run as processes), else with b's dispatchers and
// workers in-process, the workers serving the echo and sleep skills.
func startBenchNode(ctx context.Context, dir string, b *benchFlags, bc bus.Config, log zerolog.Logger) (*node.Node, error) {
	cfg := node.Config{Bus: bus.Config{Listen: "127.0.0.1:0", DataDir: dir, Sync: bc.Sync, Retention: bc.Retention,
		Partitions: bc.Partitions, KeepEvents: bc.KeepEvents}}
	if b.procs {
		cfg.NoDispatcher = true
	} else {
		cfg.Dispatchers, cfg.Workers = b.dispatchers, b.workers
		cfg.Worker = worker.Config{Skills: []skill.Skill{skills.Echo(), skills.Sleep()}, Concurrency: b.concurrency,
			DrainTimeout: time.Second}
	}
	return node.Start(ctx, cfg, log)
}

// benchMeters read the system's CPU time and RSS: this process's, and
// the component processes' too with --procs.
type benchMeters struct {
	cpu   bench.CPUClock          // nil when CPU time cannot be read
	rss   func() ([]int64, error) // one a process, as names
	names []string
	where string // where the dispatchers and workers run, for the header
}

// selfMeters measures this process alone. A CPU clock that cannot be
// read is said on stderr and left out, not fatal.
func selfMeters(stderr io.Writer) benchMeters {
	cpu := bench.CPUClock(bench.SelfCPU)
	if _, err := cpu(); err != nil {
		fmt.Fprintln(stderr, "planner bench: CPU time not measured:", err)
		cpu = nil
	}
	rss := func() ([]int64, error) {
		r, err := bench.RSS(0)
		return []int64{r}, err
	}
	return benchMeters{cpu: cpu, rss: rss, names: []string{"bench"}, where: "in-process"}
}

// addProcs adds the component processes of a --procs bench to what m
// measures.
func (m *benchMeters) addProcs(procs *bench.Procs) {
	if m.cpu != nil {
		m.cpu = func() (time.Duration, error) {
			self, err := bench.SelfCPU()
			if err != nil {
				return 0, err
			}
			children, err := procs.CPU()
			return self + children, err
		}
	}
	m.names = append(m.names, procs.Names()...)
	m.rss = func() ([]int64, error) {
		self, err := bench.RSS(0)
		if err != nil {
			return nil, err
		}
		children, err := procs.RSS()
		return append([]int64{self}, children...), err
	}
	m.where = "as processes"
}

// runSoak is planner bench --soak: it submits plans at b's rate for
// b.soak, sampling RSS, and prints the samples and the verdict. The heap
// profile (--memprofile) is written before the system stops, so it shows
// what the system still holds. It returns the exit code.
func runSoak(ctx context.Context, sys *bench.System, b *benchFlags, bc bus.Config, m benchMeters, io cli.IO) int {
	fmt.Fprintf(io.Stderr, "planner bench: soak of %s at %d plans/s; %d dispatchers, %d workers %s, GOMAXPROCS %d, sync %s\n",
		b.soak, b.rate, b.dispatchers, b.workers, m.where, runtime.GOMAXPROCS(0), bc.Sync)
	// The whole soak, a system that fell behind included.
	profile, code := createProfile(b.cpuprofile, io)
	if code != cli.ExitOK {
		return code
	}
	defer profile.Close()
	if err := startCPUProfile(profile); err != nil {
		return benchFailed(ctx, io, err)
	}
	defer pprof.StopCPUProfile()
	var atWarmUp func()
	if b.memprofile != "" {
		atWarmUp = func() {
			if err := writeHeapProfile(b.memprofile + ".warm-up"); err != nil {
				fmt.Fprintln(io.Stderr, "planner bench: --memprofile at the warm-up's end:", err)
			}
		}
	}
	res, err := sys.Soak(ctx, bench.SoakConfig{Duration: b.soak, Rate: b.rate, Sample: b.sample, Drain: b.drain,
		PlanTimeout: min(10*time.Minute, bc.Retention-time.Minute), WarmUp: max(b.warmUp, soakWarmUp(b.soak, bc.Retention)), Retention: bc.Defaults().Retention,
		RSS: m.rss, Names: m.names, LiveHeap: memlimit.Live, Progress: io.Stderr, AtWarmUp: atWarmUp})
	if res != nil {
		bench.ReportSoak(io.Stdout, res)
		// What the system holds is worth a profile even when plans
		// were lost (a system that fell behind holds them too).
		if perr := writeHeapProfile(b.memprofile); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return benchFailed(ctx, io, err)
	}
	return cli.ExitOK
}

// runWorkloads measures the bus floor (unless --bus-floor=false) and
// then each workload on the system and on the engine floor, and prints
// the tables. What is measured is kept: a failure of the bus floor or of
// a workload is named after the tables of the others, and the exit
// status is 1. It returns the exit code.
func runWorkloads(ctx context.Context, n *node.Node, conn *bus.Conn, sys *bench.System, loads []*bench.Workload, b *benchFlags,
	bc bus.Config, m benchMeters, log zerolog.Logger, io cli.IO) int {
	fmt.Fprintf(io.Stderr, "planner bench: %d workloads, %d runs each after a warm-up; %d dispatchers, %d workers %s, GOMAXPROCS %d, sync %s\n",
		len(loads), b.runs, b.dispatchers, b.workers, m.where, runtime.GOMAXPROCS(0), bc.Sync)
	// The profile's file is made before anything is measured, so a bad
	// path costs no bench; the profile covers the workloads only.
	profile, code := createProfile(b.cpuprofile, io)
	if code != cli.ExitOK {
		return code
	}
	defer profile.Close()
	var out benchOutcome
	if b.busFloor {
		out.measureFloor(ctx, io, n, b, m.cpu, log)
	}
	if err := startCPUProfile(profile); err != nil {
		return benchFailed(ctx, io, err)
	}
	defer pprof.StopCPUProfile()
	opts := bench.Options{Runs: b.runs, Progress: io.Stderr, CPU: m.cpu, Conflicts: bench.Conflicts(conn.NC, b.dispatchers)}
	engineOpts := bench.Options{Runs: b.runs, Progress: io.Stderr, Decoded: true}
	out.measureAll(ctx, io, loads, sys.Run, opts, engineOpts)
	if err := writeHeapProfile(b.memprofile); err != nil {
		out.fail(ctx, io, "--memprofile", err)
	}
	out.report(io.Stdout)
	if len(out.failed) > 0 {
		fmt.Fprintf(io.Stderr, "planner bench: %d failed (named at the end of the output)\n", len(out.failed))
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	return cli.ExitOK
}

// benchOutcome is what a bench run measured, what the plan limits
// refused and what failed.
type benchOutcome struct {
	floor          *bench.BusFloor
	system, engine []*bench.Result // engine[i] is nil if system[i]'s engine floor failed
	refused        []string
	failed         []string // each "what: failed: why"
}

// fail records that what failed with err, and prints it at once; when
// ctx has ended, err is followed by the cause (a component process that
// ended) unless it already holds it.
func (o *benchOutcome) fail(ctx context.Context, io cli.IO, what string, err error) {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	line := fmt.Sprintf("%s: failed: %v", what, err)
	fmt.Fprintln(io.Stderr, "planner bench:", line)
	o.failed = append(o.failed, line)
}

// measure runs w on the system and on the engine floor and keeps what
// each measured; a workload the plan limits refuse is recorded as
// refused, and a failed measurement as failed.
func (o *benchOutcome) measure(ctx context.Context, io cli.IO, w *bench.Workload, system bench.Runner, opts, engineOpts bench.Options) {
	if _, err := w.Plan("check"); err != nil {
		fmt.Fprintf(io.Stderr, "planner bench: %s refused: %v\n", w.Name, err)
		o.refused = append(o.refused, fmt.Sprintf("%s (%d tools a plan): refused: %v", w.Name, len(w.Tools), err))
		return
	}
	s, err := bench.Measure(ctx, w, "planbus", system, opts)
	if err != nil {
		o.fail(ctx, io, w.Name+" on planbus", err)
		return
	}
	e, err := bench.Measure(ctx, w, "engine", bench.FloorRunner, engineOpts)
	if err != nil {
		o.fail(ctx, io, w.Name+" on the engine floor", err)
		e = nil
	}
	o.system, o.engine = append(o.system, s), append(o.engine, e)
}

// measureFloor measures the bus floor and prints its table, or records
// that it failed.
func (o *benchOutcome) measureFloor(ctx context.Context, io cli.IO, n *node.Node, b *benchFlags, cpu bench.CPUClock, log zerolog.Logger) {
	fmt.Fprintln(io.Stderr, "planner bench: measuring the bus floor")
	floor, err := measureBusFloor(ctx, n, b, cpu, log)
	if err != nil {
		o.fail(ctx, io, "bus floor", err)
		return
	}
	o.floor = floor
	bench.ReportBus(io.Stdout, floor)
	fmt.Fprintln(io.Stdout)
}

// measureAll measures each of loads in turn. Once ctx has ended
// (interrupted, or a component process ended) the workloads left are
// recorded as not run, in one failure.
func (o *benchOutcome) measureAll(ctx context.Context, io cli.IO, loads []*bench.Workload, system bench.Runner, opts, engineOpts bench.Options) {
	for i, w := range loads {
		if ctx.Err() != nil {
			var names []string
			for _, w := range loads[i:] {
				names = append(names, w.Name)
			}
			o.fail(ctx, io, strings.Join(names, ", "), errors.New("not run"))
			return
		}
		o.measure(ctx, io, w, system, opts, engineOpts)
	}
}

// report prints the workloads' table, the refused ones, the ratios to
// the bus floor when it was measured, and a line for each failure.
func (o *benchOutcome) report(w io.Writer) {
	if len(o.system) > 0 {
		bench.Report(w, o.system, o.engine)
	}
	for _, r := range o.refused {
		fmt.Fprintf(w, "\n%s\n", r)
	}
	if o.floor != nil && len(o.system) > 0 {
		fmt.Fprintln(w)
		bench.ReportRatios(w, o.floor, o.system)
	}
	if len(o.failed) > 0 {
		fmt.Fprintln(w)
		for _, f := range o.failed {
			fmt.Fprintln(w, f)
		}
	}
}

// measureBusFloor measures the bus floor on n's server over two
// connections of its own, as a dispatcher and a worker have.
func measureBusFloor(ctx context.Context, n *node.Node, b *benchFlags, cpu bench.CPUClock, log zerolog.Logger) (*bench.BusFloor, error) {
	d, err := n.Dial(ctx, log)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	w, err := n.Dial(ctx, log)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return bench.MeasureBus(ctx, bench.BusConfig{Dispatcher: d, Worker: w, CPU: cpu, Samples: b.floorSamples, Rounds: b.floorRounds,
		Steps: b.floorSteps, Calls: b.floorCalls, Plans: b.floorPlans})
}

// componentSpecs are the dispatcher and toolworker processes of a --procs
// bench: self run as 'planner bench component ...' against url. Each
// declares the streams, with the same retention, partitions and events
// kept as cfg.
func componentSpecs(self, url string, b *benchFlags, logLevel string, cfg bus.Config) []bench.Proc {
	var specs []bench.Proc
	common := []string{"--nats-url", url, "--log-level", logLevel, "--retention", cfg.Retention.String(),
		"--partitions", strconv.Itoa(cfg.Defaults().Partitions), "--keep-events", string(cfg.Defaults().KeepEvents)}
	for i := range b.dispatchers {
		id := "dispatcher-" + strconv.Itoa(i+1)
		specs = append(specs, bench.Proc{Name: id, Path: self,
			Args: append([]string{"bench", "component", "dispatcher", "--dispatcher-id", id}, common...)})
	}
	for i := range b.workers {
		id := "worker-" + strconv.Itoa(i+1)
		specs = append(specs, bench.Proc{Name: id, Path: self,
			Args: append([]string{"bench", "component", "toolworker", "--id", id, "--skills", "echo,sleep",
				"--concurrency", strconv.Itoa(b.concurrency), "--drain-timeout", "1s"}, common...)})
	}
	return specs
}

// startComponents starts b.dispatchers dispatcher and b.workers toolworker
// processes, this binary run as 'planner bench component ...', against the
// server at url, and waits until each serves (its micro service answers).
func startComponents(ctx context.Context, url string, b *benchFlags, logLevel string, cfg bus.Config, log zerolog.Logger, io cli.IO) (*bench.Procs, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--procs runs this binary again, but its path is unknown: %w", err)
	}
	procs, err := bench.StartProcs(componentSpecs(self, url, b, logLevel, cfg), io.Stderr)
	if err != nil {
		return nil, err
	}
	wctx, cancel := procs.Watch(ctx)
	defer cancel()
	wctx, cancelWait := context.WithTimeout(wctx, 2*time.Minute)
	defer cancelWait()
	nc, err := bus.Dial(wctx, bus.Config{URL: url}, log)
	if err != nil {
		procs.Stop()
		return nil, err
	}
	defer nc.Close()
	for _, svc := range []struct {
		name string
		want int
	}{{bus.ServiceDispatcher, b.dispatchers}, {bus.ServiceToolworker, b.workers}} {
		for {
			if _, err = bench.Instances(wctx, nc.NC, svc.name, svc.want); err == nil {
				break
			}
			if wctx.Err() != nil {
				procs.Stop()
				return nil, fmt.Errorf("component processes not serving: %w", errors.Join(err, context.Cause(wctx)))
			}
		}
	}
	return procs, nil
}

// benchComponent runs one component of a --procs bench: the dispatcher or
// toolworker command with the arguments given.
func benchComponent(ctx context.Context, args []string, io cli.IO) int {
	if len(args) > 0 {
		switch args[0] {
		case "dispatcher":
			return dispatchercmd.Run(ctx, args[1:], io)
		case "toolworker":
			return toolworkercmd.Run(ctx, args[1:], io)
		}
	}
	fmt.Fprintln(io.Stderr, "Usage: planner bench component dispatcher|toolworker [flags]\n\nRuns one component of a 'planner bench --procs'; the flags are those of the dispatcher and toolworker commands.")
	return cli.ExitUsage
}

// soakWarmUp is what a soak's verdict leaves out beyond its first tenth:
// the retention and a minute, when the soak outlasts it. Memory can only
// level off once the first plans expire; a soak shorter than the
// retention is judged on its tail as it is.
func soakWarmUp(soak, retention time.Duration) time.Duration {
	if w := retention + time.Minute; w < soak {
		return w
	}
	return 0
}

// createProfile creates the file of --cpuprofile at path (nil, and
// ExitOK, when path is empty); a path that cannot be created is a usage
// error, said on io.Stderr.
func createProfile(path string, io cli.IO) (*os.File, int) {
	if path == "" {
		return nil, cli.ExitOK
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(io.Stderr, "planner bench:", err)
		return nil, cli.ExitUsage
	}
	return f, cli.ExitOK
}

// startCPUProfile starts a CPU profile into f, if there is one (stopping
// none that was not started is a no-op: pprof.StopCPUProfile).
func startCPUProfile(f *os.File) error {
	if f == nil {
		return nil
	}
	return pprof.StartCPUProfile(f)
}

// writeHeapProfile writes the heap profile of what is live now to path
// (nothing when path is empty).
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

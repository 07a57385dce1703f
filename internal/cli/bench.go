package cli

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/planbus/planbus/internal/bench"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

const benchUsage = `Usage: planner bench [--workloads DIR | --only NAMES] [flags]

Runs every DAG workload (the built-in ones, or the *.json files in DIR)
through the whole system on a private embedded server (dispatchers and
workers in-process, no-op and sleeping tools) and through the execution
engine alone, driven by goroutines with no bus (the engine floor): one
warm-up, then --runs measured runs.

First it measures the bus floor on the same server with the same --sync:
p50 and p99 of a JetStream publish+ack, a KV compare-and-set and a
work-queue publish→pull delivery, and two bus-only programs that do a
chain step's and a fan-out's messages with no planbus code. Then it prints
a Markdown table per workload (makespan median (min–max), ms per
critical-path step, tools/s, for workloads with instances plans/s and plan
latency p50/p99, the whole system's CPU time per tool and the dispatchers'
compare-and-set conflicts per plan) and each workload's ratio to the bus
floor (docs/benchmarks.md defines them).`

// benchFlags are planner bench's settings.
type benchFlags struct {
	dir, only, cpuprofile string
	runs, workers         int
	dispatchers           int
	concurrency           int
	busFloor              bool
	floorSamples          int
	floorRounds           int
}

func plannerBench(ctx context.Context, args []string, io IO) int {
	var b benchFlags
	var c common
	f := newFlags("planner bench", io.Stderr, io.Env, benchUsage)
	f.String(&b.dir, "workloads", "PLANBUS_BENCH_WORKLOADS", "", "directory of workload files (default: the built-in workloads)")
	f.String(&b.only, "only", "", "", "run just these workloads, comma-separated names")
	f.Int(&b.runs, "runs", "", 5, "measured runs per workload")
	f.Int(&b.workers, "workers", "", 2, "tool workers")
	f.Int(&b.dispatchers, "dispatchers", "", 1, "dispatchers")
	f.Int(&b.concurrency, "concurrency", "", 128, "calls per skill per worker")
	f.Bool(&b.busFloor, "bus-floor", "", true, "measure the bus floor first and print each workload's ratio to it")
	f.Int(&b.floorSamples, "floor-samples", "", 1000, "samples of each bus floor trip")
	f.Int(&b.floorRounds, "floor-rounds", "", 5, "measured rounds of each bus-only pattern (100-step chain, 1000-call fan-out)")
	f.String(&c.logLevel, "log-level", "PLANBUS_LOG_LEVEL", "warn", "debug, info, warn or error")
	f.String(&b.cpuprofile, "cpuprofile", "", "", "write a CPU profile of the measured runs to this file")
	f.String(&c.bus.DataDir, "data-dir", "", "", "directory for the private server's store (default: a new temporary one; put it on the disk you want to measure)")
	f.Sync(&c.bus.Sync, "sync", "PLANBUS_SYNC", bus.DefaultSync, "when the store is flushed to disk: always or an interval like 1s")
	c.logFormat = "console"
	if err := f.parse(args); err != nil {
		return usageErr(io.Stderr, err)
	}
	switch {
	case b.runs < 1:
		return usageErr(io.Stderr, fmt.Errorf("planner bench: --runs %d: want at least 1", b.runs))
	case b.dispatchers < 1:
		return usageErr(io.Stderr, fmt.Errorf("planner bench: --dispatchers %d: want at least 1", b.dispatchers))
	case b.floorSamples < 1 || b.floorRounds < 1:
		return usageErr(io.Stderr, fmt.Errorf("planner bench: --floor-samples %d, --floor-rounds %d: want at least 1 each", b.floorSamples, b.floorRounds))
	case b.workers < 1:
		return usageErr(io.Stderr, fmt.Errorf("planner bench: --workers %d: want at least 1", b.workers))
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	all, err := bench.Builtin()
	if b.dir != "" {
		all, err = bench.Load(b.dir)
	}
	if err != nil {
		fmt.Fprintln(io.Stderr, err)
		return ExitUsage
	}
	var loads []*bench.Workload
	for _, w := range all {
		if b.only == "" || slices.Contains(splitList(b.only), w.Name) {
			loads = append(loads, w)
		}
	}
	fail := func(err error) int {
		fmt.Fprintln(io.Stderr, "planner bench:", err)
		return ExitFailed
	}
	tmp, err := os.MkdirTemp(c.bus.DataDir, "planbus-bench-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	n, err := node.Start(ctx, node.Config{
		Bus:         bus.Config{Listen: "127.0.0.1:0", DataDir: tmp, Sync: c.bus.Sync},
		Dispatchers: b.dispatchers,
		Workers:     b.workers,
		Worker: worker.Config{Skills: []skill.Skill{skills.Echo(), skills.Sleep()}, Concurrency: b.concurrency,
			DrainTimeout: time.Second},
	}, log)
	if err != nil {
		return fail(err)
	}
	defer n.Stop()
	conn, err := n.Dial(ctx, log)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	sys, err := bench.NewSystem(conn)
	if err != nil {
		return fail(err)
	}
	defer sys.Close()
	cpu := bench.CPUClock(bench.SelfCPU)
	if _, err := cpu(); err != nil {
		fmt.Fprintln(io.Stderr, "planner bench: CPU time not measured:", err)
		cpu = nil
	}
	fmt.Fprintf(io.Stderr, "planner bench: %d workloads, %d runs each after a warm-up; %d dispatchers, %d workers in-process, GOMAXPROCS %d, sync %s\n",
		len(loads), b.runs, b.dispatchers, b.workers, runtime.GOMAXPROCS(0), c.bus.Sync)

	var floor *bench.BusFloor
	if b.busFloor {
		fmt.Fprintln(io.Stderr, "planner bench: measuring the bus floor")
		d, err := n.Dial(ctx, log)
		if err != nil {
			return fail(err)
		}
		defer d.Close()
		w, err := n.Dial(ctx, log)
		if err != nil {
			return fail(err)
		}
		defer w.Close()
		if floor, err = bench.MeasureBus(ctx, bench.BusConfig{Dispatcher: d, Worker: w, CPU: cpu,
			Samples: b.floorSamples, Rounds: b.floorRounds}); err != nil {
			return fail(err)
		}
		bench.ReportBus(io.Stdout, floor)
		fmt.Fprintln(io.Stdout)
	}

	if b.cpuprofile != "" {
		fh, err := os.Create(b.cpuprofile)
		if err != nil {
			fmt.Fprintln(io.Stderr, "planner bench:", err)
			return ExitUsage
		}
		defer fh.Close()
		if err := pprof.StartCPUProfile(fh); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	opts := bench.Options{Runs: b.runs, Progress: io.Stderr, CPU: cpu, Conflicts: bench.Conflicts(conn.NC, b.dispatchers)}
	var system, engine []*bench.Result
	for _, w := range loads {
		s, err := bench.Measure(ctx, w, "planbus", sys.Run, opts)
		if err != nil {
			return fail(err)
		}
		e, err := bench.Measure(ctx, w, "engine", bench.FloorRunner, bench.Options{Runs: b.runs, Progress: io.Stderr})
		if err != nil {
			return fail(err)
		}
		system, engine = append(system, s), append(engine, e)
	}
	bench.Report(io.Stdout, system, engine)
	if floor != nil {
		fmt.Fprintln(io.Stdout)
		bench.ReportRatios(io.Stdout, floor, system)
	}
	return ExitOK
}

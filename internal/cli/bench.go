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

const benchUsage = `Usage: planner bench [--workloads DIR] [flags]

Runs every DAG workload (the built-in ones, or the *.json files in DIR) through the whole system on a
private embedded server (dispatcher and workers in-process, no-op and
sleeping tools) and through an in-process goroutine executor with no bus
(the floor): one warm-up, then --runs measured runs. Prints a Markdown
table: makespan median (min–max), ms per critical-path step, tools/s and,
for workloads with instances, plans/s and plan latency p50/p99.`

func plannerBench(ctx context.Context, args []string, io IO) int {
	var dir, only, cpuprofile string
	var runs, workers, concurrency int
	var c common
	f := newFlags("planner bench", io.Stderr, io.Env, benchUsage)
	f.String(&dir, "workloads", "PLANBUS_BENCH_WORKLOADS", "", "directory of workload files (default: the built-in workloads)")
	f.String(&only, "only", "", "", "run just these workloads, comma-separated names")
	f.Int(&runs, "runs", "", 5, "measured runs per workload")
	f.Int(&workers, "workers", "", 2, "tool workers")
	f.Int(&concurrency, "concurrency", "", 128, "calls per skill per worker")
	f.String(&c.logLevel, "log-level", "PLANBUS_LOG_LEVEL", "warn", "debug, info, warn or error")
	f.String(&cpuprofile, "cpuprofile", "", "", "write a CPU profile of the measured runs to this file")
	f.String(&c.bus.DataDir, "data-dir", "", "", "directory for the private server's store (default: a new temporary one; put it on the disk you want to measure)")
	f.Sync(&c.bus.Sync, "sync", "PLANBUS_SYNC", bus.DefaultSync, "when the store is flushed to disk: always or an interval like 1s")
	c.logFormat = "console"
	if err := f.parse(args); err != nil {
		return usageErr(io.Stderr, err)
	}
	if runs < 1 {
		fmt.Fprintln(io.Stderr, "planner bench: --runs must be at least 1")
		return ExitUsage
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	all, err := bench.Builtin()
	if dir != "" {
		all, err = bench.Load(dir)
	}
	if err != nil {
		fmt.Fprintln(io.Stderr, err)
		return ExitUsage
	}
	var loads []*bench.Workload
	for _, w := range all {
		if only == "" || slices.Contains(splitList(only), w.Name) {
			loads = append(loads, w)
		}
	}
	tmp, err := os.MkdirTemp(c.bus.DataDir, "planbus-bench-")
	if err != nil {
		fmt.Fprintln(io.Stderr, err)
		return ExitFailed
	}
	defer os.RemoveAll(tmp)
	n, err := node.Start(ctx, node.Config{
		Bus:     bus.Config{Listen: "127.0.0.1:0", DataDir: tmp, Sync: c.bus.Sync},
		Workers: workers,
		Worker: worker.Config{Skills: []skill.Skill{skills.Echo(), skills.Sleep()}, Concurrency: concurrency,
			DrainTimeout: time.Second},
	}, log)
	if err != nil {
		fmt.Fprintln(io.Stderr, "planner bench:", err)
		return ExitFailed
	}
	defer n.Stop()
	conn, err := n.Dial(ctx, log)
	if err != nil {
		fmt.Fprintln(io.Stderr, "planner bench:", err)
		return ExitFailed
	}
	defer conn.Close()
	sys, err := bench.NewSystem(conn)
	if err != nil {
		fmt.Fprintln(io.Stderr, "planner bench:", err)
		return ExitFailed
	}
	defer sys.Close()
	fmt.Fprintf(io.Stderr, "planner bench: %d workloads, %d runs each after a warm-up; %d workers, GOMAXPROCS %d, sync %s\n",
		len(loads), runs, workers, runtime.GOMAXPROCS(0), c.bus.Sync)
	if cpuprofile != "" {
		fh, err := os.Create(cpuprofile)
		if err != nil {
			fmt.Fprintln(io.Stderr, "planner bench:", err)
			return ExitUsage
		}
		defer fh.Close()
		if err := pprof.StartCPUProfile(fh); err != nil {
			fmt.Fprintln(io.Stderr, "planner bench:", err)
			return ExitFailed
		}
		defer pprof.StopCPUProfile()
	}
	var system, floor []*bench.Result
	for _, w := range loads {
		s, err := bench.Measure(ctx, w, "planbus", sys.Run, runs, io.Stderr)
		if err != nil {
			fmt.Fprintln(io.Stderr, "planner bench:", err)
			return ExitFailed
		}
		fl, err := bench.Measure(ctx, w, "floor", bench.FloorRunner, runs, io.Stderr)
		if err != nil {
			fmt.Fprintln(io.Stderr, "planner bench:", err)
			return ExitFailed
		}
		system, floor = append(system, s), append(floor, fl)
	}
	bench.Report(io.Stdout, system, floor)
	return ExitOK
}

package plannercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/htn"
)

// plannerHTN is planner htn, the command-line front end of the htn
// planner:
//
//	htn -program FILE [-goal 'travel-to(park)'] [-first] [-query] [-facts] [-budget BYTES]
//
// It prints plans, query answers and final facts in the exact format of
// the InductorHtn reference engine, so outputs can be compared string for
// string; it owns the I/O and leaves planning to package htn. It parses
// args (without the command's name), plans or queries, and writes the
// result to stdout and diagnostics to stderr. ctx cancels a long search.
//
// Exit status: 0 when a plan (or query answer) was found, 1 when there is
// none or planning failed (the reason is on stderr), 2 for usage errors and
// for programs or goals that do not parse (the message names
// file:line:column).
func plannerHTN(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseHTNFlags(args, stderr)
	if !ok {
		return code
	}
	src, err := os.ReadFile(f.program)
	if err != nil {
		fmt.Fprintf(stderr, "htn: %v\n", err)
		return cli.ExitUsage
	}
	prog, err := htn.Parse(string(src))
	if err != nil {
		return reportParse(stderr, f.program, err)
	}
	g, ok := htnGoal(prog, f, stderr)
	if !ok {
		return cli.ExitUsage
	}
	// What write() prints goes to stdout as it happens; the result starts
	// on a line of its own after it.
	out := &lineWriter{w: stdout}
	opts := htn.Options{FirstOnly: f.first, Budget: htn.Budget{Memory: f.budget}, Output: out, Trace: f.traces, TraceLimit: f.traceLimit}
	start := time.Now()
	var o htnOutcome
	if f.query {
		o = runHTNQuery(ctx, prog, g, opts, out)
	} else {
		o = runHTNPlan(ctx, prog, g, opts, out, stderr, f.first, f.facts)
	}
	reportHTNCost(stderr, f, time.Since(start), o.stats)
	return htnExit(stderr, f.query, g, o)
}

// htnFlags are planner htn's settings, as its flags set them.
type htnFlags struct {
	program, goal string
	// goalGiven tells -goal '' (plan no goals) from no -goal at all
	// (plan the program's goals(...) statement).
	goalGiven                          bool
	first, query, facts, stats, traces bool
	budget                             int64
	traceLimit                         int
	memprofile                         string
}

// parseHTNFlags parses planner htn's arguments. When ok is false the
// command ends at once with code: cli.ExitOK for -h, cli.ExitUsage for a
// bad flag, a stray argument or a missing -program, the reason and the
// usage already on stderr.
func parseHTNFlags(args []string, stderr io.Writer) (f htnFlags, code int, ok bool) {
	fs := flag.NewFlagSet("htn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.program, "program", "", "InductorHtn program `file` (required)")
	fs.StringVar(&f.goal, "goal", "", "comma-separated goals, e.g. 'travel-to(park)'; defaults to the program's goals(...) statement; -goal '' plans no goals (the empty plan)")
	fs.BoolVar(&f.first, "first", false, "stop at the first plan (or answer) and print it as (op1, op2)")
	fs.BoolVar(&f.query, "query", false, "treat the goal as a Prolog query and print its answers")
	fs.BoolVar(&f.facts, "facts", false, "also print the final facts of each plan")
	fs.Int64Var(&f.budget, "budget", 0, "memory budget in `bytes` (0: the default of 256 MiB, -1: none)")
	fs.BoolVar(&f.stats, "stats", false, "print nodes, steps, peak memory and time to stderr")
	fs.BoolVar(&f.traces, "traces", false, "print the planner's search to stderr: tasks, methods tried and their conditions, operators, failures, plans")
	fs.IntVar(&f.traceLimit, "trace-limit", 0, "most search events -traces prints (0: the default of 10000); the rest are counted")
	fs.StringVar(&f.memprofile, "memprofile", "", "write a heap profile to `file` after planning")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: htn -program FILE [-goal GOALS] [-first] [-query] [-facts] [-budget BYTES] [-traces]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, cli.ExitOK, false
		}
		return f, cli.ExitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "htn: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return f, cli.ExitUsage, false
	}
	if f.program == "" {
		fmt.Fprintln(stderr, "htn: -program is required")
		fs.Usage()
		return f, cli.ExitUsage, false
	}
	fs.Visit(func(fl *flag.Flag) { f.goalGiven = f.goalGiven || fl.Name == "goal" })
	return f, cli.ExitOK, true
}

// htnGoal returns the goals to plan: -goal's when it was given, even
// empty, else the program's goals(...) statement. It reports false (the
// reason on stderr) when there is neither.
func htnGoal(prog *htn.Program, f htnFlags, stderr io.Writer) (string, bool) {
	if f.goal != "" || f.goalGiven {
		return f.goal, true
	}
	g, ok := prog.Goals()
	if !ok {
		fmt.Fprintf(stderr, "htn: no -goal given and %s has no goals(...) statement\n", f.program)
	}
	return g, ok
}

// htnOutcome is what one search leaves for the cost report and the exit
// status.
type htnOutcome struct {
	found   bool
	stats   htn.Stats
	failure *htn.Failure // why no plan was found; nil for queries
	err     error
}

// runHTNQuery answers goal as a Prolog query and prints the answers on
// out, on a line of their own after whatever write() printed.
func runHTNQuery(ctx context.Context, prog *htn.Program, goal string, opts htn.Options, out *lineWriter) htnOutcome {
	var o htnOutcome
	ans, err := prog.Query(ctx, goal, opts)
	o.err = err
	if ans != nil {
		o.stats = ans.Stats
	}
	if err == nil {
		out.endLine()
		fmt.Fprintln(out, htn.FormatQuery(ans))
		o.found = len(ans.Solutions) > 0
	}
	return o
}

// runHTNPlan plans goal, prints the search trace (when kept) on stderr
// and the plans on out, on a line of their own after whatever write()
// printed.
func runHTNPlan(ctx context.Context, prog *htn.Program, goal string, opts htn.Options, out *lineWriter, stderr io.Writer, first, facts bool) htnOutcome {
	var o htnOutcome
	res, err := prog.Plan(ctx, goal, opts)
	o.err = err
	if res != nil {
		o.stats, o.failure = res.Stats, res.Failure
		printTrace(stderr, res)
	}
	if err == nil {
		o.found = len(res.Plans) > 0
		out.endLine()
		printPlans(out, res, first, facts)
	}
	return o
}

// reportHTNCost prints what the search cost (-stats) and writes the heap
// profile (-memprofile). Both come after the result so they measure the
// whole search; a profile that cannot be written is reported, not fatal.
func reportHTNCost(stderr io.Writer, f htnFlags, elapsed time.Duration, st htn.Stats) {
	if f.stats {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(stderr, "htn: %s nodes=%d steps=%d peak-estimate=%dB heap-sys=%dB total-alloc=%dB\n",
			elapsed.Round(time.Microsecond), st.Nodes, st.Steps, st.PeakMemory, ms.HeapSys, ms.TotalAlloc)
	}
	if f.memprofile != "" {
		if perr := writeHeapProfile(f.memprofile); perr != nil {
			fmt.Fprintf(stderr, "htn: %v\n", perr)
		}
	}
}

// htnExit turns a search's outcome into planner htn's exit status,
// saying on stderr why when it is not cli.ExitOK: a goal that does not
// parse is a usage error, a failed search or an empty result is
// cli.ExitFailed.
func htnExit(stderr io.Writer, query bool, goal string, o htnOutcome) int {
	if o.err != nil {
		var pe *htn.ParseError
		if errors.As(o.err, &pe) {
			return reportParse(stderr, "-goal", o.err)
		}
		fmt.Fprintf(stderr, "htn: %s: %v\n", goal, o.err)
		return cli.ExitFailed
	}
	if !o.found {
		if query {
			fmt.Fprintf(stderr, "htn: query %s has no answer\n", goal)
		} else {
			fmt.Fprintf(stderr, "%v\n", &htn.NoPlanError{Goal: goal, Failure: o.failure})
		}
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// printTrace writes the search trace of -traces, one event a line.
func printTrace(w io.Writer, res *htn.Result) {
	for _, ev := range res.Trace {
		fmt.Fprintf(w, "trace %s\n", ev)
	}
	if res.TraceDropped > 0 {
		fmt.Fprintf(w, "trace: %d more events not kept (-trace-limit)\n", res.TraceDropped)
	}
}

// lineWriter remembers whether what was written so far ends a line.
type lineWriter struct {
	w       io.Writer
	midLine bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.midLine = p[len(p)-1] != '\n'
	}
	return l.w.Write(p)
}

// endLine ends a line left open by write().
func (l *lineWriter) endLine() {
	if l.midLine {
		_, _ = l.Write([]byte("\n"))
	}
}

func printPlans(w io.Writer, res *htn.Result, first, facts bool) {
	if first {
		var p *htn.Plan
		if len(res.Plans) > 0 {
			p = &res.Plans[0]
		}
		fmt.Fprintln(w, htn.FormatPlan(p))
		if facts {
			fmt.Fprintln(w, htn.FormatPlanFacts(p))
		}
		return
	}
	fmt.Fprintln(w, htn.FormatPlans(res.Plans))
	if facts {
		fmt.Fprintln(w, htn.FormatFacts(res.Plans))
	}
}

// reportParse prints a parse error as file:line:col: message.
func reportParse(stderr io.Writer, file string, err error) int {
	var pe *htn.ParseError
	if errors.As(err, &pe) {
		fmt.Fprintf(stderr, "htn: %s:%d:%d: %s\n", file, pe.Line, pe.Column, pe.Msg)
	} else {
		fmt.Fprintf(stderr, "htn: %s: %v\n", file, err)
	}
	return cli.ExitUsage
}

// writeHeapProfile writes a heap profile to path, after a collection.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

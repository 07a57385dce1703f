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
	fs := flag.NewFlagSet("htn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	program := fs.String("program", "", "InductorHtn program `file` (required)")
	goal := fs.String("goal", "", "comma-separated goals, e.g. 'travel-to(park)'; defaults to the program's goals(...) statement; -goal '' plans no goals (the empty plan)")
	first := fs.Bool("first", false, "stop at the first plan (or answer) and print it as (op1, op2)")
	query := fs.Bool("query", false, "treat the goal as a Prolog query and print its answers")
	facts := fs.Bool("facts", false, "also print the final facts of each plan")
	budget := fs.Int64("budget", 0, "memory budget in `bytes` (0: the default of 256 MiB, -1: none)")
	stats := fs.Bool("stats", false, "print nodes, steps, peak memory and time to stderr")
	traces := fs.Bool("traces", false, "print the planner's search to stderr: tasks, methods tried and their conditions, operators, failures, plans")
	traceLimit := fs.Int("trace-limit", 0, "most search events -traces prints (0: the default of 10000); the rest are counted")
	memprofile := fs.String("memprofile", "", "write a heap profile to `file` after planning")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: htn -program FILE [-goal GOALS] [-first] [-query] [-facts] [-budget BYTES] [-traces]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "htn: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return cli.ExitUsage
	}
	if *program == "" {
		fmt.Fprintln(stderr, "htn: -program is required")
		fs.Usage()
		return cli.ExitUsage
	}
	src, err := os.ReadFile(*program)
	if err != nil {
		fmt.Fprintf(stderr, "htn: %v\n", err)
		return cli.ExitUsage
	}
	prog, err := htn.Parse(string(src))
	if err != nil {
		return reportParse(stderr, *program, err)
	}
	goalGiven := false
	fs.Visit(func(f *flag.Flag) { goalGiven = goalGiven || f.Name == "goal" })
	g := *goal
	if g == "" && !goalGiven {
		var ok bool
		if g, ok = prog.Goals(); !ok {
			fmt.Fprintf(stderr, "htn: no -goal given and %s has no goals(...) statement\n", *program)
			return cli.ExitUsage
		}
	}
	// What write() prints goes to stdout as it happens; the result starts
	// on a line of its own after it.
	out := &lineWriter{w: stdout}
	stdout = out
	opts := htn.Options{FirstOnly: *first, Budget: htn.Budget{Memory: *budget}, Output: out, Trace: *traces, TraceLimit: *traceLimit}
	start := time.Now()
	var (
		found   bool
		st      htn.Stats
		failure *htn.Failure
	)
	if *query {
		var ans *htn.Answer
		ans, err = prog.Query(ctx, g, opts)
		if ans != nil {
			st = ans.Stats
		}
		if err == nil {
			out.endLine()
			fmt.Fprintln(stdout, htn.FormatQuery(ans))
			found = len(ans.Solutions) > 0
		}
	} else {
		var res *htn.Result
		res, err = prog.Plan(ctx, g, opts)
		if res != nil {
			st, failure = res.Stats, res.Failure
			printTrace(stderr, res)
		}
		if err == nil {
			found = len(res.Plans) > 0
			out.endLine()
			printPlans(stdout, res, *first, *facts)
		}
	}
	elapsed := time.Since(start)
	if *stats {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(stderr, "htn: %s nodes=%d steps=%d peak-estimate=%dB heap-sys=%dB total-alloc=%dB\n",
			elapsed.Round(time.Microsecond), st.Nodes, st.Steps, st.PeakMemory, ms.HeapSys, ms.TotalAlloc)
	}
	if *memprofile != "" {
		if perr := writeHeapProfile(*memprofile); perr != nil {
			fmt.Fprintf(stderr, "htn: %v\n", perr)
		}
	}
	if err != nil {
		var pe *htn.ParseError
		if errors.As(err, &pe) {
			return reportParse(stderr, "-goal", err)
		}
		fmt.Fprintf(stderr, "htn: %s: %v\n", g, err)
		return cli.ExitFailed
	}
	if !found {
		if *query {
			fmt.Fprintf(stderr, "htn: query %s has no answer\n", g)
		} else {
			fmt.Fprintf(stderr, "%v\n", &htn.NoPlanError{Goal: g, Failure: failure})
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

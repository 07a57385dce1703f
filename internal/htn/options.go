package htn

import (
	"context"
	"fmt"
	"io"
)

// DefaultMemoryBudget is the memory budget used when Budget.Memory is 0.
// It is far above what the benchmark domains need (deep3000 stays under a
// few megabytes, all 16,384 plans of wide7x4 under 32 MB), so only a
// runaway search reaches it.
const DefaultMemoryBudget int64 = 256 << 20

// Budget bounds one Plan or Query call. Going over any limit ends the call
// with ErrBudgetExceeded; it never silently shortens a plan.
type Budget struct {
	// Memory is the approximate number of bytes the search may hold at
	// once: planner nodes (pooled ones too) and what each holds (task
	// lists, decompositions, condition answers, operator lists), the
	// world state's changes and indexes, the resolver's stores, and the
	// plans or answers collected so far with everything they keep alive.
	// The estimate follows Go's allocation sizes, so it tracks the live
	// heap the call adds (see TestMemoryEstimate). 0 means
	// DefaultMemoryBudget; negative means no limit.
	Memory int64
	// Nodes caps the number of planner search nodes created. 0 means no limit.
	Nodes int64
	// Steps caps the number of resolver steps (goals tried). 0 means no limit.
	Steps int64
}

// Options configure one Plan or Query call. The zero value finds all plans
// with the default budget.
type Options struct {
	// FirstOnly stops after the first plan (FindPlan) or query answer.
	FirstOnly bool
	// Budget bounds memory and work; see Budget.
	Budget Budget
	// Disabled, if set, is asked before an operator is applied. When it
	// returns true the operator counts as not applicable: the branch fails
	// and the search backtracks to the next method or condition.
	Disabled func(operatorName string) bool
	// Output receives what write/1, writeln/1 and nl/0 print. Nil discards it.
	Output io.Writer
	// Trace records the planner's search in Result.Trace, as the
	// reference engine's tracing (showTraces) writes it: the tasks taken,
	// the methods tried and how their conditions went, the operators
	// applied or refused, the tasks that failed back to their parent and
	// the plans found. Query ignores it.
	Trace bool
	// TraceLimit is how many events Trace keeps: the first TraceLimit,
	// the others only counted (Result.TraceDropped). 0 means
	// DefaultTraceLimit. The events kept count against Budget.Memory.
	TraceLimit int
}

// Stats describe the work of one call.
type Stats struct {
	Nodes         int64 // planner search nodes created
	Steps         int64 // resolver goals tried
	PeakMemory    int64 // highest memory estimate seen, in bytes (see Budget.Memory)
	BudgetChecked bool  // the memory budget was enforced
}

// run holds everything one Plan or Query call owns. Nothing in it is
// shared with other calls, which is what makes a Program safe for
// concurrent use.
type run struct {
	prog       *Program
	syms       *symtab
	st         *state
	ctx        context.Context
	opts       Options
	eng        *engine
	nextFree   int64
	memLimit   int64
	plannerMem int64 // planner nodes and what they hold
	keptMem    int64 // collected plans or answers and what they keep alive
	stats      Stats
	ticks      int

	trace        []TraceEvent // Options.Trace
	traceDropped int64
	traceMem     int64 // what trace holds
}

func newRun(ctx context.Context, p *Program, opts Options) *run {
	r := &run{prog: p, syms: p.syms.overlay(), ctx: ctx, opts: opts}
	r.st = newState(p)
	r.memLimit = opts.Budget.Memory
	if r.memLimit == 0 {
		r.memLimit = DefaultMemoryBudget
	}
	r.eng = &engine{r: r}
	r.eng.ev = evaluator{syms: r.syms, deref: r.eng.deref}
	return r
}

func (r *run) freeID() int64 {
	r.nextFree++
	return r.nextFree
}

// check enforces the budget and the context. It is called every few
// hundred resolver steps and at every planner node.
func (r *run) check() error {
	mem := r.plannerMem + r.keptMem + r.traceMem + r.st.memBytes() + r.eng.memBytes() + r.syms.memBytes()
	if mem > r.stats.PeakMemory {
		r.stats.PeakMemory = mem
	}
	if r.memLimit > 0 && mem > r.memLimit {
		return &BudgetError{Limit: BudgetMemory, Used: mem, Budget: r.memLimit}
	}
	if b := r.opts.Budget.Nodes; b > 0 && r.stats.Nodes > b {
		return &BudgetError{Limit: BudgetNodes, Used: r.stats.Nodes, Budget: b}
	}
	if b := r.opts.Budget.Steps; b > 0 && r.stats.Steps > b {
		return &BudgetError{Limit: BudgetSteps, Used: r.stats.Steps, Budget: b}
	}
	r.ticks++
	if r.ticks&15 == 0 {
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrCanceled, err)
		}
	}
	return nil
}

func (r *run) printer() printer {
	return printer{syms: r.syms, refName: r.eng.refName}
}

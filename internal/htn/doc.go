// Package htn is a hierarchical task network planner for the InductorHtn
// language (EricZinda/InductorHtn): the same syntax, the same semantics and
// the same printed output, so domains written for the reference engine run
// unchanged and results compare string for string.
//
// # Using it
//
// Parse compiles a program once; the *Program is immutable and may be used
// by any number of goroutines at the same time.
//
//	prog, err := htn.Parse(src)          // *htn.ParseError (errors.Is ErrSyntax) names line and column
//	res, err := prog.Plan(ctx, "travel-to(park)", htn.Options{})
//	fmt.Println(htn.FormatPlans(res.Plans)) // [ { (walk(downtown,park)) } ]
//
// Plan returns every plan in depth-first order, or the first one with
// Options.FirstOnly. Each Plan carries its operators (name, arguments,
// hidden flag), the final facts (Plan.Facts) and, per operator, the trace
// of methods and bindings that produced it (Operator.Trace). Query answers
// a Prolog query against the program's facts and axioms. FormatPlans,
// FormatPlan, FormatFacts, FormatPlanFacts and FormatQuery print results
// exactly as the reference does.
//
// The package is pure: no I/O (write/1 goes to Options.Output if set), no
// goroutines, no global state. A call stops early when its context ends
// (ErrCanceled) or its Budget runs out (a *BudgetError, which wraps
// ErrBudgetExceeded, with the plans found so far and the partial branch in
// the Result). The memory budget counts everything the call holds,
// collected plans included, at the sizes the Go allocator hands out.
// Options.Disabled
// lets a caller forbid operators by name; the planner then backtracks as if
// the operator did not apply.
//
// # Language
//
// Statements are facts (at(downtown).), axioms (Prolog rules), methods
// (head :- [else,] [allOf|anyOf,] if(...), do(...).), operators
// (head :- [hidden,] del(...), add(...).) and goals(...). Terms are atoms,
// 'quoted atoms', "strings", numbers, ?variables, _ and lists. See
// docs/htn.md for the supported constructs and builtins and for where this
// package deliberately differs from the reference (it reports domain errors
// instead of aborting the process, and never returns a truncated plan
// without ErrBudgetExceeded).
//
// # Design
//
// Atoms are interned, numbers are native int64/float64 values (with the
// reference's text-based identity preserved), clauses are indexed by name,
// arity and first argument, and the resolver binds variables through a
// trail instead of rewriting pending goals. The planner is the reference's
// stackless search: an explicit node stack with continue points. Nodes
// share task and operator lists and one undo-logged world state, so memory
// grows linearly with plan depth.
package htn

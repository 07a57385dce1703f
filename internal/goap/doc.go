// Package goap is goal-oriented action planning (seed 002): a domain of
// facts, actions and goals; an A* planner that finds the cheapest sequence
// of actions reaching a goal; a goal arbiter with hysteresis, preemption and
// cooldowns; and a tracker with the executor's rules (consecutive failure
// threshold, monitoring, replanning). docs/goap.md describes the domain
// format and how the planner service uses the package.
//
// # Using it
//
//	d, err := goap.Decode(doc)   // *goap.DomainError (errors.Is ErrInvalidDomain) with a JSON pointer
//	r, err := goap.Plan(ctx, d, goap.State{"wood": 2}, "build-cabin", goap.Options{Disabled: off})
//	p, err := goap.ToPlan(r)     // *plan.Plan: one tool per step, chained
//	p, err = goap.PlanJSON(ctx, d, s, "build-cabin", opts) // both, without the Result (the planner service)
//
//	pl := goap.NewPlanner(d)     // reused by one goroutine: a warm Search allocates nothing
//	sol, err := pl.Search(ctx, s, "build-cabin", goap.Options{})
//	r = sol.Result()             // the steps' inputs and predicted states, on demand
//	p, err = sol.ToPlan()        // or the plan straight away
//
// A domain document (schemas/goap-domain.schema.json) declares its facts
// with a type and usually a default, derived facts (named expressions
// over the facts), its actions with preconditions, an optional requires
// expression (preconditions with or), effects (set, inc, dec), a cost (a
// number or an expr-lang/expr expression over the facts) and an input
// whose strings may hold {fact} templates, and its goals with conditions
// (none: an always applicable goal, never satisfied), a utility (number
// or expression), an optional validity expression and a cooldown.
// Conditions are structured (equals, ne, lt, lte, gt, gte, exists) so the
// planner can reason about them; expressions are compiled by Decode,
// which reports their errors with the action or goal and the field they
// belong to.
//
// # Planning
//
// Plan is A* over world states. Before searching it drops the actions a
// disabled skill rules out, those that cannot matter to the goal (they
// change no fact the goal, or a precondition or cost of an action that
// matters, depends on) and those that only move numbers the way no
// condition wants them, and keys states by the relevant facts the
// remaining actions change, increments included, as the seed's
// "Incremental Effects Need State Keys" warns; states are packed into
// machine words and compared as such. The heuristic is admissible and
// consistent (see docs/goap.md), so the plan is the cheapest one; ties
// between equally cheap plans are broken deterministically by smaller
// heuristic, then by creation order, which follows the domain's action
// order. A goal without conditions is planned as the cheapest single
// action that applies. Plan returns
// *UnreachableError (ErrUnreachable) naming the unsatisfied conditions and
// why, a *BudgetError (ErrBudgetExceeded) after Options.MaxNodes
// expansions or once it holds more than Options.MaxMemory bytes, and
// ErrCanceled when its context ends.
//
// # Arbiter and tracker
//
// An Arbiter picks the goal to pursue: valid, unsatisfied, utility > 0 and
// not cooling down, highest utility first, switching from the current goal
// only by a margin (Hysteresis between plans, Preemption while a plan
// runs). A Tracker takes step outcomes and observed states and answers
// continue, retry, replan, done or give up. Both take time and states as
// arguments and keep a memory (ArbiterState, TrackerState) that marshals
// to JSON, so a stateless service can keep it in a KV bucket.
//
// The package is pure: no I/O, no goroutines, no clock, no global state.
// A *Domain is immutable (but for the pool of Planners that Plan borrows
// from) and safe for concurrent use by any number of Plan calls, Planners,
// arbiters and trackers; a Planner, an Arbiter or a Tracker belongs to
// one goroutine at a time.
package goap

package htn

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// When a search finds no plan, the reference engine reports how far it got
// (FindAllPlans' furthestFailureIndex and furthestFailureContext): the
// failure deepest in the search, and among failures at the same depth, the
// one whose method condition got furthest along its goals, with the terms
// of the last failureContext(...) that condition ran. This file keeps that
// record for Plan and turns it into a Failure.

// FailureReason says why the task of a Failure could not be solved.
type FailureReason string

// The reasons of a Failure.
const (
	// FailCondition: a method's if() had no answer in the state of that
	// point of the search (the reference records only these).
	FailCondition FailureReason = "condition"
	// FailNoMethod: the task is no operator and no method's head unifies
	// with it, or it is not a task at all (a number, an unbound variable).
	FailNoMethod FailureReason = "no method"
	// FailOperator: the task names an operator that does not apply: it is
	// disabled (Options.Disabled), its head does not unify with the task,
	// or the unifier is not ground.
	FailOperator FailureReason = "operator"
)

// Failure is the furthest point a search that found no plan reached:
// Result.Failure, and NoPlanError.Failure.
type Failure struct {
	// Depth is the task's depth in the search: 1 for the first goal, one
	// more for every task solved on the way to it (the planner's node
	// stack, the reference's deepestTaskFailure).
	Depth int
	// Task is the task that could not be solved, as it was then.
	Task   Term
	Reason FailureReason
	// Method and Line name the method whose condition failed
	// (FailCondition): its head as written and where it is defined.
	Method string
	Line   int
	// Condition is the goal of the method's if() that the resolution got
	// furthest to before failing, with the values its variables had then,
	// and ConditionIndex its position (0-based) in the if().
	Condition      Term
	ConditionIndex int
	// Context is the terms of the last failureContext(...) the condition
	// ran before that failure (nil if none): the author's own note of
	// where the resolution was.
	Context []Term
	// Detail says more for FailOperator and FailNoMethod.
	Detail string
}

// String says where the search stopped and why, for people:
//
//	task travel-to(park) at depth 1: method travel-to(?q) (line 5) failed its condition at walking-distance(downtown,park) (goal 2 of its if())
func (f *Failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s at depth %d: ", f.Task, f.Depth)
	switch f.Reason {
	case FailCondition:
		fmt.Fprintf(&b, "method %s (line %d) failed its condition at %s (goal %d of its if())", f.Method, f.Line, f.Condition, f.ConditionIndex+1)
		if len(f.Context) > 0 {
			parts := make([]string, len(f.Context))
			for i, t := range f.Context {
				parts[i] = t.String()
			}
			fmt.Fprintf(&b, ", failure context (%s)", strings.Join(parts, ", "))
		}
	default:
		b.WriteString(f.Detail)
	}
	return b.String()
}

// ErrNoPlan is matched by every *NoPlanError.
var ErrNoPlan = errors.New("htn: no plan")

// NoPlanError is a goal that has no plan, with how far its search got.
// Plan does not return it (no plan is a result, not an error); callers that
// treat no plan as a failure build it from the Result.
type NoPlanError struct {
	Goal string
	// Failure is the Result's Failure; nil if the search failed nowhere
	// (it cannot, for a search that ended without a plan).
	Failure *Failure
}

func (e *NoPlanError) Error() string {
	if e.Failure == nil {
		return fmt.Sprintf("%v for %s", ErrNoPlan, e.Goal)
	}
	return fmt.Sprintf("%v for %s: the search got furthest at %s", ErrNoPlan, e.Goal, e.Failure)
}

// Unwrap returns ErrNoPlan.
func (e *NoPlanError) Unwrap() error { return ErrNoPlan }

// ctxEntry is one failureContext(...) call in force: its arguments in the
// frame of base.
type ctxEntry struct {
	args []term
	base int32
}

// condFailure is the furthest failure of one resolution of a condition:
// the position of the goal of the conjunction it failed in (-1: none yet),
// that goal and the failure context then, as public terms.
type condFailure struct {
	set  bool
	idx  int32
	goal Term
	ctx  []Term
}

// rootIndex is the position in the conjunction being solved of the goal
// that the goal at fr.goals[pos] runs for.
func (e *engine) rootIndex(fr *frame, pos int32) int32 {
	if fr == e.root {
		return pos
	}
	return fr.rootIdx
}

// noteFail records the failure of the goal at fr.goals[pos] if it got
// further than the failures before it: to a later goal of the
// conjunction, or to the same goal with a failure context where the
// record has none. It builds terms only when the record changes.
func (e *engine) noteFail(fr *frame, pos int32) {
	idx := e.rootIndex(fr, pos)
	f := &e.fail
	if idx <= e.failFloor || f.set && (idx < f.idx || idx == f.idx && (len(f.ctx) > 0 || len(e.ctxs) == 0)) {
		return
	}
	f.set, f.idx = true, idx
	f.goal = e.public(e.root.goals[idx], e.root.base)
	f.ctx = nil
	if n := len(e.ctxs); n > 0 {
		c := e.ctxs[n-1]
		f.ctx = make([]Term, len(c.args))
		for i, a := range c.args {
			f.ctx[i] = e.public(a, c.base)
		}
	}
}

// public converts a term of the store as it stands, its unbound variables
// named as written (or _G<cell> for those without a name).
func (e *engine) public(t term, base int32) Term {
	t, base = e.deref(t, base)
	switch t.k {
	case kRef:
		c := &e.env[t.n]
		if c.name != 0 && !c.anon {
			return Term{Kind: Variable, Name: e.r.syms.name(c.name)}
		}
		return Term{Kind: Variable, Name: "_G" + strconv.FormatInt(t.n, 10)}
	case kCompound:
		args := make([]Term, len(t.args))
		for i, a := range t.args {
			args[i] = e.public(a, base)
		}
		return Term{Kind: Compound, Name: e.r.syms.name(t.sym), Args: args}
	}
	return publicTerm(t, e.r.syms)
}

// failRec is the planner's furthest failure so far.
type failRec struct {
	set    bool
	depth  int
	idx    int32 // the condition's goal; -1 for failures that are not a condition's
	reason FailureReason
	task   term
	method *method
	cond   condFailure
	detail string
}

// noteFailure records a failure of node n's task if it is the furthest
// yet: deeper in the search than the record, or as deep and further along
// a condition (the reference's PlanState::RecordFailure, which also counts
// failures that are not a condition's).
func (pl *planner) noteFailure(reason FailureReason, n *pnode, cf condFailure, detail string) {
	idx := int32(-1)
	if reason == FailCondition {
		idx = cf.idx
	}
	if !pl.mayBeFurthest(idx) {
		return
	}
	pl.furthest = failRec{set: true, depth: len(pl.stack), idx: idx, reason: reason, task: n.curT, method: n.method, cond: cf, detail: detail}
}

// mayBeFurthest reports whether a failure of the task on top of the stack
// at goal idx of a condition (-1: not a condition's) would be the
// furthest yet. None is once a plan is found: a Result with plans reports
// no failure.
func (pl *planner) mayBeFurthest(idx int32) bool {
	f, depth := &pl.furthest, len(pl.stack)
	return pl.plans == 0 && (!f.set || depth > f.depth || depth == f.depth && idx > f.idx)
}

// refusal is why a task cannot be taken at all.
type refusal uint8

const (
	notATask    refusal = iota // a number or an unbound variable
	noMethod                   // no operator, and no method unifies
	opDisabled                 // Options.Disabled refuses its operator
	opNoUnify                  // its operator's head does not unify with it
	opNotGround                // its operator's unifier is not ground
)

// describe says what a refusal is as a failure and as a trace event.
func (r refusal) describe(op *operator, syms *symtab) (FailureReason, TraceKind, string) {
	switch r {
	case notATask:
		return FailNoMethod, TraceNoMethod, "not a task (a number or an unbound variable)"
	case noMethod:
		return FailNoMethod, TraceNoMethod, "no operator or method takes it"
	case opDisabled:
		return FailOperator, TraceRefused, "operator " + syms.name(op.head.sym) + " is disabled"
	case opNoUnify:
		return FailOperator, TraceRefused, "operator " + op.text + " does not unify with it"
	}
	return FailOperator, TraceRefused, "operator " + op.text + " does not apply: its variables are not all bound"
}

// tracking says whether the resolution of node n's condition, about to
// start, is to record how far it gets, and the goal position it must get
// past to matter (-1: any). Only a failure that may become the furthest
// counts: none once a plan is found (a Result with plans reports no
// failure), none shallower than the record, and at the record's depth only
// past its goal. A trace wants every failure.
func (pl *planner) tracking() (bool, int32) {
	if pl.r.opts.Trace {
		return true, -1
	}
	f, depth := &pl.furthest, len(pl.stack)
	switch {
	case pl.plans > 0 || f.set && depth < f.depth:
		return false, -1
	case f.set && depth == f.depth:
		return true, f.idx
	}
	return true, -1
}

// failure returns the record as a Failure, nil if there is none.
func (pl *planner) failure() *Failure {
	f := &pl.furthest
	if !f.set {
		return nil
	}
	out := &Failure{Depth: f.depth, Task: publicTerm(f.task, pl.r.syms), Reason: f.reason, Detail: f.detail}
	if f.reason == FailCondition {
		out.Method, out.Line = f.method.text, f.method.line
		out.Condition, out.ConditionIndex, out.Context = f.cond.goal, int(f.cond.idx), f.cond.ctx
	}
	return out
}

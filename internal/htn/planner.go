package htn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// The planner is the reference's stackless depth-first search
// (HtnPlanner::FindNextPlan): an explicit stack of nodes, each solving one
// task, and a continue point per node saying where to resume when the
// node is on top of the stack again. Nothing in the search recurses.
//
// Differences from the reference are in representation only: task lists
// and operator lists are persistent linked lists shared between nodes, and
// the world state is one undo-logged structure instead of a copy per
// branch, so memory grows linearly with plan depth.

type contPoint uint8

const (
	cNextTask contPoint = iota
	cNextMethod
	cNextCondition
	cReturnFromOperator
	cReturnFromCondition
	cReturnFromTry
	cReturnFromSetOf
)

type taskKind uint8

const (
	taskNormal       taskKind = iota
	taskTry                   // try block built by anyOf: inner holds its tasks
	taskTryEnd                // bookkeeping: the try node at index node got through
	taskCountAnyOf            // bookkeeping: one branch of the anyOf node succeeded
	taskFailIfNoneOf          // bookkeeping: fail unless an anyOf branch succeeded
)

// taskCell is a persistent list of tasks.
type taskCell struct {
	kind  taskKind
	t     term
	node  int32
	ctx   *decomp
	inner []taskCell
	next  *taskCell
}

// opCell is a persistent list of applied operators, newest first.
type opCell struct {
	op     term
	hidden bool
	ctx    *decomp
	prev   *opCell
	n      int
	bytes  int64 // the cell and its operator's term
	kept   bool  // a collected plan holds it
}

// decomp records a method application: which task it decomposed, with
// which method and variable values. Tasks and operators point at the
// decomposition they came from, which gives every operator its trace.
type decomp struct {
	parent *decomp
	task   term
	m      *method
	vals   []term
	bytes  int64 // the record, its values and the terms of its do() list
	kept   bool  // a collected plan holds it
}

// condAnswer is one answer of a method's condition: the values of the
// method's variables, and what building them allocated.
type condAnswer struct {
	vals  []term
	bytes int64
}

type pnode struct {
	cont    contPoint
	tasks   *taskCell // tasks left after the current one
	cur     *taskCell // the current task
	curT    term      // the current task with arithmetic evaluated
	ops     *opCell
	mark    int // state undo mark when the node was created
	methods []*method
	mi      int
	method  *method
	conds   []condAnswer
	ci      int
	condMem int64 // what conds hold

	retry             bool
	methodHadSolution bool
	atLeastOne        bool
	anyOfCount        int
	mem               int64 // bytes held for this node, released when it is popped
}

type planner struct {
	r        *run
	stack    []*pnode
	ret      bool
	free     []*pnode
	slices   int64   // what stack and free hold, as charged to plannerMem
	furthest failRec // the furthest failure (failure.go)
	plans    int     // plans found, for the trace
}

// charge adds bytes held by node n (nil: by the planner for the whole run).
func (pl *planner) charge(n *pnode, bytes int64) {
	pl.r.plannerMem += bytes
	if n != nil {
		n.mem += bytes
	}
}

// recount charges the node stack and the pool at their capacity.
func (pl *planner) recount() {
	m := sliceBytes(cap(pl.stack), sizePtr) + sliceBytes(cap(pl.free), sizePtr)
	pl.r.plannerMem += m - pl.slices
	pl.slices = m
}

func (pl *planner) top() *pnode { return pl.stack[len(pl.stack)-1] }

// push creates a child of n that must solve tasks followed by n's
// remaining tasks, with the given operator list, and makes n resume at ret.
// held is what was allocated for the child (its task cells, operator
// cell, decomposition): the child holds it until it is popped. Nodes are
// pooled, so a node, once allocated, counts for the whole run.
func (pl *planner) push(n *pnode, tasks *taskCell, ops *opCell, ret contPoint, held int64) error {
	var c *pnode
	if k := len(pl.free); k > 0 {
		c = pl.free[k-1]
		pl.free = pl.free[:k-1]
		*c = pnode{}
	} else {
		c = &pnode{}
		pl.r.plannerMem += sizeNode
	}
	c.tasks = tasks
	c.ops = ops
	c.mark = pl.r.st.mark()
	if n != nil {
		n.cont = ret
	}
	pl.stack = append(pl.stack, c)
	pl.charge(c, held)
	pl.recount()
	pl.r.stats.Nodes++
	return pl.r.check()
}

// pop removes the top node, rolls the state back to where the node
// started and passes ret to the node below (the reference's Return).
func (pl *planner) pop(ret bool) {
	n := pl.top()
	pl.r.st.undo(n.mark)
	pl.r.plannerMem -= n.mem
	pl.stack = pl.stack[:len(pl.stack)-1]
	pl.ret = ret
	n.conds, n.methods, n.tasks, n.cur, n.ops = nil, nil, nil, nil, nil
	pl.free = append(pl.free, n)
	pl.recount()
}

// prepend returns a list of copies of cells followed by rest, and the
// bytes the copies take.
func prepend(cells []taskCell, rest *taskCell) (*taskCell, int64) {
	if len(cells) == 0 {
		return rest, 0
	}
	return link(append([]taskCell(nil), cells...), rest), sliceBytes(len(cells), sizeTaskCell)
}

// link chains cells, which the caller owns, in front of rest.
func link(cells []taskCell, rest *taskCell) *taskCell {
	for i := len(cells) - 1; i >= 0; i-- {
		cells[i].next = rest
		rest = &cells[i]
	}
	return rest
}

// next finds the next plan. It returns nil when the search is over.
func (pl *planner) next() (*Plan, error) {
	for len(pl.stack) > 0 {
		n := pl.top()
		switch n.cont {
		case cNextTask:
			if n.tasks == nil {
				p := pl.solution(n)
				pl.plans++
				if pl.r.opts.Trace {
					pl.trace(TracePlan, nil, nil, 0, strconv.Itoa(pl.plans))
				}
				pl.pop(true)
				return p, nil
			}
			n.cur = n.tasks
			n.tasks = n.tasks.next
			if err := pl.nextTask(n); err != nil {
				return nil, err
			}

		case cNextMethod:
			if n.mi < len(n.methods) {
				n.method = n.methods[n.mi]
				n.mi++
			} else {
				n.method = nil
			}
			pl.charge(n, -n.condMem)
			n.conds, n.ci, n.condMem = nil, 0, 0
			if n.methodHadSolution {
				n.atLeastOne = true
				// Skip the else methods that follow a method that led to a plan.
				for n.method != nil && n.method.isElse {
					pl.trace(TraceElse, &n.curT, n.method, 0, "a method before it led to a plan")
					if n.mi < len(n.methods) {
						n.method = n.methods[n.mi]
						n.mi++
					} else {
						n.method = nil
					}
				}
				n.methodHadSolution = false
			}
			if n.method == nil {
				if !n.atLeastOne {
					pl.trace(TraceFail, &n.curT, nil, 0, "no method led to a plan")
				}
				pl.pop(n.atLeastOne)
				continue
			}
			conds, bytes, cf, err := pl.conditions(n.curT, n.method)
			if err != nil {
				return nil, err
			}
			if len(conds) == 0 {
				pl.noteFailure(FailCondition, n, cf, "")
				if pl.r.opts.Trace {
					pl.trace(TraceMethod, &n.curT, n.method, 0, fmt.Sprintf("its condition failed at %s (goal %d of its if())", clipText(cf.goal.String(), maxTraceText), cf.idx+1))
				}
				continue // try the next method
			}
			pl.trace(TraceMethod, &n.curT, n.method, len(conds), "")
			n.conds, n.condMem = conds, bytes
			pl.charge(n, bytes)
			switch n.method.kind {
			case methodNormal:
				n.cont = cNextCondition
			case methodAllOf:
				if err := pl.allOf(n); err != nil {
					return nil, err
				}
			case methodAnyOf:
				if err := pl.anyOf(n); err != nil {
					return nil, err
				}
			}

		case cNextCondition:
			if n.ci >= len(n.conds) {
				n.cont = cNextMethod
				continue
			}
			ans := n.conds[n.ci]
			n.ci++
			sub, held := pl.subtasks(n, ans, nil)
			if err := pl.push(n, link(sub, n.tasks), n.ops, cReturnFromCondition, held); err != nil {
				return nil, err
			}

		case cReturnFromCondition:
			if pl.ret {
				n.methodHadSolution = true
			}
			n.cont = cNextCondition

		case cReturnFromOperator:
			pl.pop(pl.ret)

		case cReturnFromTry:
			if !pl.ret && n.retry {
				// Nothing got through the try(): carry on without it.
				pl.trace(TraceTrySkipped, nil, nil, 0, "")
				n.cont = cNextTask
				continue
			}
			pl.pop(pl.ret)

		case cReturnFromSetOf:
			if pl.ret {
				n.methodHadSolution = true
			}
			n.cont = cNextMethod
		}
	}
	return nil, nil
}

// nextTask starts solving n.cur: bookkeeping, an operator, try() or methods.
func (pl *planner) nextTask(n *pnode) error {
	cur := n.cur
	switch cur.kind {
	case taskTryEnd:
		pl.stack[cur.node].retry = false
		return nil
	case taskCountAnyOf:
		pl.stack[cur.node].anyOfCount++
		return nil
	case taskFailIfNoneOf:
		if pl.stack[cur.node].anyOfCount == 0 {
			pl.trace(TraceAnyOfNone, nil, nil, 0, "")
			pl.pop(false)
		}
		return nil
	case taskTry:
		return pl.startTry(n, cur.inner)
	}
	var alloc int64
	t, err := pl.r.resolveArith(cur.t, &alloc)
	if err != nil {
		return err
	}
	pl.charge(n, alloc)
	n.curT = t
	pl.trace(TraceTask, &n.curT, nil, 0, "")
	if t.k != kAtom && t.k != kCompound {
		pl.refuse(n, notATask, nil)
		return nil
	}
	if op := pl.r.prog.ops[t.sym]; op != nil {
		return pl.applyOperator(n, t, op)
	}
	if t.sym == symTry {
		inner := make([]taskCell, len(t.args))
		for i, a := range t.args {
			inner[i] = taskCell{t: a, ctx: cur.ctx}
		}
		return pl.startTry(n, inner)
	}
	methods := pl.unifyingMethods(t)
	if len(methods) == 0 {
		pl.refuse(n, noMethod, nil)
		return nil
	}
	pl.charge(n, sliceBytes(cap(methods), sizeMethodPtr))
	n.methods, n.mi = methods, 0
	n.cont = cNextMethod
	return nil
}

// startTry runs the try's tasks, then a tryEnd marker, then the rest. If
// no plan gets past the marker, the node resumes without the try.
func (pl *planner) startTry(n *pnode, inner []taskCell) error {
	idx := int32(len(pl.stack) - 1)
	rest := &taskCell{kind: taskTryEnd, node: idx, next: n.tasks}
	n.retry = true
	tasks, held := prepend(inner, rest)
	return pl.push(n, tasks, n.ops, cReturnFromTry, held+allocSize(sizeTaskCell))
}

func (pl *planner) applyOperator(n *pnode, t term, op *operator) error {
	r := pl.r
	if r.opts.Disabled != nil && r.opts.Disabled(r.syms.name(op.head.sym)) {
		pl.refuse(n, opDisabled, op)
		return nil
	}
	e := r.eng
	e.reset()
	task := e.importTerm(t, map[int64]int32{})
	base := e.newVars(op.vars)
	if !e.unify(task, 0, op.head, base) {
		pl.refuse(n, opNoUnify, op)
		return nil
	}
	// The reference requires the unifier to be ground.
	for _, idx := range e.trail {
		c := &e.env[idx]
		if !isGround(e.resolve(c.val, c.base)) {
			pl.refuse(n, opNotGround, op)
			return nil
		}
	}
	before := e.alloc
	head := e.freeze(op.head, base)
	headBytes := e.alloc - before
	dels := make([]term, len(op.del))
	for i, d := range op.del {
		dels[i] = e.freeze(d, base)
	}
	adds := make([]term, len(op.add))
	addBytes := make([]int64, len(op.add))
	for i, a := range op.add {
		before := e.alloc
		adds[i] = e.freeze(a, base)
		addBytes[i] = e.alloc - before
	}
	pr := r.printer()
	for _, d := range dels {
		if !isGround(d) {
			return &RuntimeError{Err: ErrNotGround, Term: pr.String(d), Msg: "deleted by operator " + pr.String(head)}
		}
		if !r.st.remove(d) {
			return &RuntimeError{Err: ErrFactMissing, Term: pr.String(d), Msg: "deleted by operator " + pr.String(head)}
		}
	}
	for i, a := range adds {
		if !isGround(a) {
			return &RuntimeError{Err: ErrNotGround, Term: pr.String(a), Msg: "added by operator " + pr.String(head)}
		}
		if !r.st.insert(a, addBytes[i]) {
			return &RuntimeError{Err: ErrFactExists, Term: pr.String(a), Msg: "added by operator " + pr.String(head)}
		}
	}
	cnt := 1
	if n.ops != nil {
		cnt = n.ops.n + 1
	}
	ops := &opCell{op: head, hidden: op.hidden, ctx: n.cur.ctx, prev: n.ops, n: cnt, bytes: sizeOpCell + headBytes}
	if op.hidden {
		pl.trace(TraceOperator, &head, nil, 0, "hidden")
	} else {
		pl.trace(TraceOperator, &head, nil, 0, "")
	}
	return pl.push(n, n.tasks, ops, cReturnFromOperator, ops.bytes)
}

// unifyingMethods lists, in document order, the methods whose head
// unifies with the task.
func (pl *planner) unifyingMethods(t term) []*method {
	cands := pl.r.prog.methods[headKey(t)]
	if len(cands) == 0 {
		return nil
	}
	e := pl.r.eng
	var out []*method
	for _, m := range cands {
		e.reset()
		task := e.importTerm(t, map[int64]int32{})
		base := e.newVars(m.vars)
		if e.unify(m.head, base, task, 0) {
			out = append(out, m)
		}
	}
	return out
}

// conditions resolves a method's if() for a task against the current
// state and returns, for each answer, the values of the method's
// variables, the bytes the answers hold and, when there is no answer,
// how far the resolution got.
func (pl *planner) conditions(t term, m *method) ([]condAnswer, int64, condFailure, error) {
	e := pl.r.eng
	e.reset()
	task := e.importTerm(t, map[int64]int32{})
	base := e.newVars(m.vars)
	if !e.unify(m.head, base, task, 0) {
		return nil, 0, condFailure{}, nil
	}
	snapshot := func() condAnswer {
		before := e.alloc
		vals := make([]term, len(m.vars))
		for i := range vals {
			vals[i] = e.freeze(term{k: kVar, n: int64(i)}, base)
		}
		return condAnswer{vals: vals, bytes: e.alloc - before + termsBytes(len(vals))}
	}
	if len(m.cond) == 0 {
		a := snapshot()
		return []condAnswer{a}, a.bytes + allocSize(sizeAnswer), condFailure{}, nil
	}
	var out []condAnswer
	var held int64
	e.track, e.failFloor = pl.tracking()
	err := e.solveAt(m.cond, base, func() (bool, error) {
		a := snapshot()
		out = append(out, a)
		// Backtracking releases the answer's terms from e.alloc; the
		// resolver's budget checks see them here until the node takes them.
		held += a.bytes
		e.extraMem += a.bytes
		return true, nil
	})
	e.extraMem -= held
	cf := e.fail
	if e.track && len(out) == 0 && !cf.set && err == nil {
		cf = condFailure{set: true, goal: e.public(m.cond[0], base)}
	}
	e.track = false
	return out, held + sliceBytes(cap(out), sizeAnswer), cf, err
}

// subtasks instantiates the method's do() list for one condition answer.
// extra, if not nil, is appended (anyOf's bookkeeping). It returns the
// cells and the bytes they hold with their decomposition.
func (pl *planner) subtasks(n *pnode, ans condAnswer, extra []taskCell) ([]taskCell, int64) {
	m := n.method
	d := &decomp{parent: n.cur.ctx, task: n.curT, m: m, vals: ans.vals}
	out := make([]taskCell, 0, len(m.tasks)+len(extra))
	var alloc int64
	for _, t := range m.tasks {
		out = append(out, taskCell{t: instantiate(t, ans.vals, &alloc), ctx: d})
	}
	// A collected plan keeps the decomposition with its values and the
	// terms its tasks were built from; the node keeps the cells too.
	d.bytes = sizeDecomp + ans.bytes + alloc
	return append(out, extra...), sizeDecomp + alloc + sliceBytes(cap(out), sizeTaskCell)
}

// instantiate replaces clause variables by their values, adding the bytes
// of the terms it builds to *alloc.
func instantiate(t term, vals []term, alloc *int64) term {
	switch t.k {
	case kVar:
		return vals[t.n]
	case kCompound:
		return mapArgs(t, func(a term) term { return instantiate(a, vals, alloc) }, alloc)
	}
	return t
}

// allOf merges the do() lists of all answers into one branch.
func (pl *planner) allOf(n *pnode) error {
	var all []taskCell
	var held int64
	for _, ans := range n.conds {
		sub, h := pl.subtasks(n, ans, nil)
		all = append(all, sub...)
		held += h - sliceBytes(cap(sub), sizeTaskCell) // copied into all
	}
	held += sliceBytes(cap(all), sizeTaskCell)
	return pl.push(n, link(all, n.tasks), n.ops, cReturnFromSetOf, held)
}

// anyOf wraps each answer's do() list in a try block that counts its
// success, then fails the branch if none succeeded.
func (pl *planner) anyOf(n *pnode) error {
	child := int32(len(pl.stack))
	all := make([]taskCell, 0, len(n.conds)+1)
	held := sliceBytes(cap(all), sizeTaskCell)
	for _, ans := range n.conds {
		inner, h := pl.subtasks(n, ans, []taskCell{{kind: taskCountAnyOf, node: child}})
		all = append(all, taskCell{kind: taskTry, inner: inner, ctx: n.cur.ctx})
		held += h
	}
	all = append(all, taskCell{kind: taskFailIfNoneOf, node: child})
	n.anyOfCount = 0
	return pl.push(n, link(all, n.tasks), n.ops, cReturnFromSetOf, held)
}

// keep charges what a collected plan holds: its fact lists, and the
// operator cells, decompositions and added facts it shares with the search
// and with the plans before it, each counted once.
func (pl *planner) keep(p *Plan) {
	r := pl.r
	n := sliceBytes(cap(p.deleted), 4) + sliceBytes(cap(p.added), sizeTerm) + r.st.keep()
	for o := p.last; o != nil && !o.kept; o = o.prev {
		o.kept = true
		n += o.bytes
		for d := o.ctx; d != nil && !d.kept; d = d.parent {
			d.kept = true
			n += d.bytes
		}
	}
	r.keptMem += n
}

// solution turns the node where the task list ran out into a Plan.
func (pl *planner) solution(n *pnode) *Plan {
	st := pl.r.st
	p := &Plan{syms: pl.r.syms, prog: pl.r.prog}
	if st.deleted > 0 {
		p.deleted = make([]int32, 0, st.deleted)
		for id, del := range st.baseDel {
			if del {
				p.deleted = append(p.deleted, int32(id))
			}
		}
	}
	if st.alive > 0 {
		p.added = make([]term, 0, st.alive)
		for i := range st.adds {
			if st.adds[i].alive {
				p.added = append(p.added, st.adds[i].t)
			}
		}
	}
	p.last = n.ops
	return p
}

func publicArgs(t term, syms *symtab) []Term {
	if t.k != kCompound {
		return nil
	}
	out := make([]Term, len(t.args))
	for i, a := range t.args {
		out[i] = publicTerm(a, syms)
	}
	return out
}

// resolveArith evaluates the arithmetic subterms of a task, as the
// reference does before solving it. Expressions that cannot be evaluated
// (unbound or non-numeric operands) are kept as written.
// The bytes of the terms it builds are added to *alloc.
func (r *run) resolveArith(t term, alloc *int64) (term, error) {
	if t.k != kCompound {
		return t, nil
	}
	ev := evaluator{syms: r.syms, deref: func(t term, b int32) (term, int32) { return t, b }}
	if ev.opOf(t) != opNone {
		v, err := ev.eval(t, 0)
		switch {
		case err == nil:
			return v, nil
		case errors.Is(err, errUnbound), errors.Is(err, errNonNumeric):
		case errors.Is(err, ErrUnknownFunction):
			// Not an arithmetic expression after all (for example min/3).
		default:
			return term{}, &RuntimeError{Err: err, Term: r.printer().String(t), Msg: "evaluating a task argument"}
		}
	}
	var args []term
	for i, a := range t.args {
		v, err := r.resolveArith(a, alloc)
		if err != nil {
			return term{}, err
		}
		if args == nil {
			if v.k == a.k && v.n == a.n && v.sym == a.sym && sameSlice(v.args, a.args) {
				continue
			}
			args = make([]term, len(t.args))
			*alloc += termsBytes(len(args))
			copy(args, t.args[:i])
		}
		args[i] = v
	}
	if args == nil {
		return t, nil
	}
	return compound(t.sym, args), nil
}

// Plan finds plans for goal, a comma-separated task list such as
// "travel-to(park)" (an empty goal has one empty plan). It returns every
// plan in depth-first order, or only the first with opts.FirstOnly. No
// plan is not an error: Result.Plans is empty.
//
// Errors: a *ParseError for a malformed goal; ErrBudgetExceeded (with
// Result.Partial set) when the budget runs out; ErrCanceled when ctx ends;
// a *RuntimeError for a domain error in the program, such as an operator
// deleting a fact that is not in the state.
func (p *Program) Plan(ctx context.Context, goal string, opts Options) (*Result, error) {
	r := newRun(ctx, p, opts)
	ps := newParser(goal, r.syms)
	goals, err := ps.parseGoalList()
	if err != nil {
		return nil, err
	}
	cells := make([]taskCell, len(goals))
	for i, g := range goals {
		// Goal variables become plan-level variables, one per name.
		cells[i] = taskCell{t: nameVars(g, ps.vars)}
	}
	pl := &planner{r: r}
	res := &Result{}
	if err := pl.push(nil, link(cells, nil), nil, 0, sliceBytes(len(cells), sizeTaskCell)); err != nil {
		return pl.fail(res, err)
	}
	for {
		plan, err := pl.next()
		if err != nil {
			return pl.fail(res, err)
		}
		if plan == nil {
			break
		}
		before := sliceBytes(cap(res.Plans), sizePlan)
		res.Plans = append(res.Plans, *plan)
		if opts.FirstOnly {
			break
		}
		r.keptMem += sliceBytes(cap(res.Plans), sizePlan) - before
		pl.keep(plan)
	}
	if len(res.Plans) == 0 {
		res.Failure = pl.failure()
	}
	pl.finish(res)
	return res, nil
}

// refuse fails node n's task, which nothing can solve (op: the operator
// it names, if it does), and records why.
func (pl *planner) refuse(n *pnode, why refusal, op *operator) {
	if pl.r.opts.Trace || pl.mayBeFurthest(-1) {
		reason, kind, detail := why.describe(op, pl.r.syms)
		pl.noteFailure(reason, n, condFailure{}, detail)
		pl.trace(kind, &n.curT, nil, 0, detail)
	}
	pl.pop(false)
}

// finish gives the result what the run gathered: its statistics and trace.
func (pl *planner) finish(res *Result) {
	res.Stats = pl.r.stats
	res.Trace, res.TraceDropped = pl.r.trace, pl.r.traceDropped
}

// fail finishes a run that stopped with an error, keeping what was found.
func (pl *planner) fail(res *Result, err error) (*Result, error) {
	if errors.Is(err, ErrBudgetExceeded) && len(pl.stack) > 0 {
		res.Partial = pl.solution(pl.top())
	}
	pl.finish(res)
	return res, err
}

// CheckGoal parses goal as Plan does, without planning: a *ParseError
// (matching ErrSyntax) for a malformed goal, nil for one Plan would take.
func CheckGoal(goal string) error {
	_, err := newParser(goal, newSymtab()).parseGoalList()
	return err
}

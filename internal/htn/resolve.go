package htn

import (
	"strconv"
)

// The resolver is a structure-sharing Prolog engine. Clause terms are never
// copied to be used: a goal is a clause term plus the base of the frame
// that holds its variables, a binding points at a term plus a base, and
// every binding is written to a trail so backtracking undoes it. Pending
// goals are never rewritten.
//
// The search itself is a loop over an explicit choicepoint stack. Builtins
// that resolve a sub-goal on their own (not, first, count, findall, ...)
// run a nested loop on the same stacks.

// cell is one variable of the binding store.
type cell struct {
	val    term
	base   int32
	bound  bool
	anon   bool
	name   symbol
	freeID int64 // the plan-level variable this cell stands for, if any
	tpos   int32 // trail position of the binding; orders query answers
}

// frame is a clause body being run: goals[pos:] remain, then the
// continuation ret/retPos.
type frame struct {
	goals  []term
	base   int32
	cutB   int32 // choicepoint height a cut in this body returns to
	ret    *frame
	retPos int32
	// rootIdx is the position, in the conjunction solveAt was given, of
	// the goal this body runs for (failure tracking; see noteFail). It
	// fits the struct's padding.
	rootIdx int32
}

type cpKind uint8

const (
	cpClauses cpKind = iota // remaining clauses of a predicate call
	cpAlts                  // remaining precomputed answers (sortBy, distinct)
)

type choicepoint struct {
	kind   cpKind
	nctx   int32 // failure contexts in force when it was made (engine.ctxs)
	goal   term
	gbase  int32
	fr     *frame
	pos    int32
	trail  int32
	env    int32
	frames int64
	alloc  int64

	pred     *predicate
	cands    []int32
	ci       int32
	adds     []int32
	ai       int32
	first    term
	hasFirst bool

	alts [][]bindRec
}

// bindRec is one binding of an answer kept by sortBy or distinct.
type bindRec struct {
	idx int32
	val term
}

type engine struct {
	r          *run
	ev         evaluator
	env        []cell
	trail      []int32
	cps        []choicepoint
	frames     int64
	collecting int
	extraMem   int64 // answers collected by findall, sortBy, distinct
	alloc      int64 // terms built by resolve and freeze since reset, less those backtracked over
	curFr      *frame
	curPos     int32
	pushed     *frame
	steps      int

	// Failure tracking, for the planner's conditions (track set): the
	// conjunction being solved (root), how deep solveAt calls are nested
	// (nest; only failures of the outermost resolution count), the
	// failureContext(...) calls in force on the current branch (ctxs,
	// cut back on backtracking) and the furthest failure so far (fail).
	track     bool
	failFloor int32 // a failure at this goal position or before it does not count
	nest      int
	root      *frame
	ctxs      []ctxEntry
	fail      condFailure
}

// memBytes estimates what the resolver holds: its stores at their
// capacity (they are reused, never shrunk), the frames and terms of the
// resolution under way and the answers collected.
func (e *engine) memBytes() int64 {
	return sliceBytes(cap(e.env), sizeCell) + sliceBytes(cap(e.trail), 4) + sliceBytes(cap(e.cps), sizeChoice) +
		sliceBytes(cap(e.ctxs), sizeCtxEntry) + e.frames*sizeFrame + e.alloc + e.extraMem
}

// reset empties the stores between two independent resolutions.
func (e *engine) reset() {
	e.env = e.env[:0]
	e.trail = e.trail[:0]
	e.cps = e.cps[:0]
	e.frames = 0
	e.collecting = 0
	e.extraMem = 0
	e.alloc = 0
	e.ctxs = e.ctxs[:0]
	e.fail = condFailure{}
}

func (e *engine) refName(idx int64) string {
	if idx >= 0 && int(idx) < len(e.env) {
		c := &e.env[idx]
		if c.freeID != 0 || c.name != 0 {
			return e.r.syms.name(c.name)
		}
	}
	return "_G" + strconv.FormatInt(idx, 10)
}

// newVars allocates the cells of a clause's variables and returns the base.
func (e *engine) newVars(vars []varInfo) int32 {
	base := int32(len(e.env))
	for _, v := range vars {
		e.env = append(e.env, cell{anon: v.anon, name: v.name})
	}
	return base
}

func (e *engine) deref(t term, base int32) (term, int32) {
	for {
		var idx int64
		switch t.k {
		case kVar:
			idx = int64(base) + t.n
		case kRef:
			idx = t.n
		default:
			return t, base
		}
		c := &e.env[idx]
		if !c.bound {
			return term{k: kRef, n: idx}, 0
		}
		t, base = c.val, c.base
	}
}

func (e *engine) bind(idx int64, t term, base int32) {
	c := &e.env[idx]
	c.val, c.base, c.bound = t, base, true
	c.tpos = int32(len(e.trail))
	e.trail = append(e.trail, int32(idx))
}

func (e *engine) undoTrail(m int32) {
	for int32(len(e.trail)) > m {
		idx := e.trail[len(e.trail)-1]
		e.trail = e.trail[:len(e.trail)-1]
		c := &e.env[idx]
		c.bound = false
		c.val = term{}
	}
}

// occurs reports whether the unbound cell idx appears in t.
func (e *engine) occurs(idx int64, t term, base int32) bool {
	t, base = e.deref(t, base)
	switch t.k {
	case kRef:
		return t.n == idx
	case kCompound:
		for _, a := range t.args {
			if e.occurs(idx, a, base) {
				return true
			}
		}
	}
	return false
}

// unify unifies a (the "left" side: a clause head, the first argument of
// =/2) with b. It follows the reference's order exactly, because the order
// in which query variables get bound is the order answers are printed in:
// arguments right to left, depth first, and a left variable is bound to the
// right term before a right variable is bound to the left one.
func (e *engine) unify(a term, ab int32, b term, bb int32) bool {
	a, ab = e.deref(a, ab)
	b, bb = e.deref(b, bb)
	if a.k == kRef {
		if b.k == kRef && b.n == a.n {
			return true
		}
		if b.k != kCompound || !e.occurs(a.n, b, bb) {
			e.bind(a.n, b, bb)
			return true
		}
	}
	if b.k == kRef {
		if a.k != kCompound || !e.occurs(b.n, a, ab) {
			e.bind(b.n, a, ab)
			return true
		}
		return false
	}
	if a.k == kRef {
		return false
	}
	if a.k != kCompound {
		return sameAtomic(a, b)
	}
	if b.k != kCompound || a.sym != b.sym || len(a.args) != len(b.args) {
		return false
	}
	for i := len(a.args) - 1; i >= 0; i-- {
		if !e.unify(a.args[i], ab, b.args[i], bb) {
			return false
		}
	}
	return true
}

// identical is ==/2: equal without binding anything.
func (e *engine) identical(a term, ab int32, b term, bb int32) bool {
	a, ab = e.deref(a, ab)
	b, bb = e.deref(b, bb)
	if a.k != b.k || a.sym != b.sym || a.n != b.n || len(a.args) != len(b.args) {
		return false
	}
	for i := range a.args {
		if !e.identical(a.args[i], ab, b.args[i], bb) {
			return false
		}
	}
	return true
}

// resolve copies a term with every bound variable replaced by its value.
// Unbound variables stay as kRef. Parts without variables are shared.
func (e *engine) resolve(t term, base int32) term {
	t, base = e.deref(t, base)
	if t.k != kCompound {
		return t
	}
	return mapArgs(t, func(a term) term { return e.resolve(a, base) }, &e.alloc)
}

// mapArgs returns compound t with f applied to each argument. Arguments f
// returns unchanged are shared, and t itself is returned when f changed
// none, so ground parts of terms are never copied. The bytes of a new
// argument slice are added to *alloc.
func mapArgs(t term, f func(term) term, alloc *int64) term {
	var args []term
	for i, a := range t.args {
		r := f(a)
		if args == nil {
			if r.k == a.k && r.n == a.n && r.sym == a.sym && sameSlice(r.args, a.args) {
				continue
			}
			args = make([]term, len(t.args))
			*alloc += termsBytes(len(args))
			copy(args, t.args[:i])
		}
		args[i] = r
	}
	if args == nil {
		return t
	}
	return compound(t.sym, args)
}

func sameSlice(a, b []term) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// freeze resolves a term for use outside the engine: unbound variables
// become kFree terms with a stable identity and their source name.
func (e *engine) freeze(t term, base int32) term {
	t, base = e.deref(t, base)
	switch t.k {
	case kRef:
		c := &e.env[t.n]
		if c.freeID == 0 {
			c.freeID = e.r.freeID()
		}
		return term{k: kFree, sym: c.name, n: c.freeID}
	case kCompound:
		return mapArgs(t, func(a term) term { return e.freeze(a, base) }, &e.alloc)
	}
	return t
}

// importTerm brings a term from outside (a task, a goal) into the store:
// each kFree variable gets one cell, shared by all its occurrences.
func (e *engine) importTerm(t term, m map[int64]int32) term {
	switch t.k {
	case kFree:
		idx, ok := m[t.n]
		if !ok {
			idx = int32(len(e.env))
			e.env = append(e.env, cell{name: t.sym, freeID: t.n})
			m[t.n] = idx
		}
		return term{k: kRef, n: int64(idx)}
	case kCompound:
		var args []term
		for i, a := range t.args {
			r := e.importTerm(a, m)
			if args == nil {
				if r.k == a.k && r.n == a.n {
					continue
				}
				args = make([]term, len(t.args))
				e.alloc += termsBytes(len(args))
				copy(args, t.args[:i])
			}
			args[i] = r
		}
		if args == nil {
			return t
		}
		return compound(t.sym, args)
	}
	return t
}

// solveAt runs the conjunction goals (relative to frame base) and calls
// yield after each answer with the bindings in place. yield returns false
// to stop; the bindings of that answer are then left in place. Choicepoints
// created here never outlive the call. Bindings made before the first
// choicepoint are not undone: the caller undoes the trail to its own mark
// when it wants that.
func (e *engine) solveAt(goals []term, base int32, yield func() (bool, error)) error {
	h0 := int32(len(e.cps))
	e.frames++
	fr := &frame{goals: goals, base: base, cutB: h0}
	if e.nest == 0 {
		e.root = fr
	}
	e.nest++
	err := e.loop(fr, 0, h0, yield)
	e.nest--
	return err
}

func (e *engine) loop(fr *frame, pos int32, h0 int32, yield func() (bool, error)) error {
	for {
		for fr != nil && pos >= int32(len(fr.goals)) {
			fr, pos = fr.ret, fr.retPos
		}
		if fr == nil {
			more, err := yield()
			if err != nil || !more {
				e.cps = e.cps[:h0]
				return err
			}
			var ok bool
			if fr, pos, ok = e.backtrack(h0); !ok {
				return nil
			}
			continue
		}
		e.r.stats.Steps++
		e.steps++
		if e.steps&255 == 0 {
			if err := e.r.check(); err != nil {
				e.cps = e.cps[:h0]
				return err
			}
		}
		nfr, npos, ok, err := e.step(fr, pos)
		if err != nil {
			e.cps = e.cps[:h0]
			return err
		}
		if !ok {
			if e.track && e.nest == 1 {
				e.noteFail(fr, pos)
			}
			if fr, pos, ok = e.backtrack(h0); !ok {
				return nil
			}
			continue
		}
		fr, pos = nfr, npos
	}
}

// next returns the continuation after the goal at fr.goals[pos].
func next(fr *frame, pos int32) (*frame, int32) {
	pos++
	for fr != nil && pos >= int32(len(fr.goals)) {
		fr, pos = fr.ret, fr.retPos
	}
	return fr, pos
}

func (e *engine) backtrack(h0 int32) (*frame, int32, bool) {
	for int32(len(e.cps)) > h0 {
		i := len(e.cps) - 1
		cp := &e.cps[i]
		e.undoTrail(cp.trail)
		if e.collecting == 0 {
			e.env = e.env[:cp.env]
		}
		e.frames, e.alloc = cp.frames, cp.alloc
		e.ctxs = e.ctxs[:cp.nctx]
		switch cp.kind {
		case cpClauses:
			if fr, pos, ok := e.resumeClauses(i); ok {
				return fr, pos, true
			}
		case cpAlts:
			alt := cp.alts[0]
			cp.alts = cp.alts[1:]
			fr, pos := cp.fr, cp.pos
			if len(cp.alts) == 0 {
				e.cps = e.cps[:i]
			}
			for _, b := range alt {
				e.bind(int64(b.idx), b.val, 0)
			}
			nf, np := next(fr, pos)
			return nf, np, true
		}
	}
	return nil, 0, false
}

// step runs the goal at fr.goals[pos]. It returns the continuation, or
// ok == false when the goal fails.
func (e *engine) step(fr *frame, pos int32) (*frame, int32, bool, error) {
	g, gb := e.deref(fr.goals[pos], fr.base)
	switch g.k {
	case kRef:
		return nil, 0, false, &RuntimeError{Err: ErrBadCall, Term: e.r.printer().String(g), Msg: "a variable cannot be a goal"}
	case kInt, kFloat:
		return nil, 0, false, nil // a number evaluates to itself, which is not true
	}
	if g.sym == symCut {
		if int(fr.cutB) < len(e.cps) {
			e.cps = e.cps[:fr.cutB]
		}
		nf, np := next(fr, pos)
		return nf, np, true, nil
	}
	if b, ok := e.r.prog.builtins[g.sym]; ok {
		e.curFr, e.curPos = fr, pos
		ok, err := b(e, g, gb)
		if err != nil || !ok {
			return nil, 0, false, err
		}
		if e.pushed != nil {
			nf := e.pushed
			e.pushed = nil
			return nf, 0, true, nil
		}
		nf, np := next(fr, pos)
		return nf, np, true, nil
	}
	if g.sym == symTrue {
		nf, np := next(fr, pos)
		return nf, np, true, nil
	}
	if op := e.ev.opOf(g); op != opNone {
		return e.arithGoal(g, gb, op, fr, pos)
	}
	return e.callPredicate(g, gb, fr, pos)
}

func (e *engine) arithGoal(g term, gb int32, op arithOp, fr *frame, pos int32) (*frame, int32, bool, error) {
	switch op {
	case opBadCompare:
		return nil, 0, false, &RuntimeError{Err: ErrBadCall, Term: e.r.printer().String(e.resolve(g, gb)), Msg: "use =< and >= for comparisons"}
	case opLess, opGreater, opLessEq, opGreaterEq:
	default:
		return nil, 0, false, nil // an arithmetic value is not true
	}
	v, err := e.ev.eval(g, gb)
	if err != nil {
		if err == errUnbound || err == errNonNumeric {
			return nil, 0, false, nil
		}
		return nil, 0, false, e.domainErr(err, g, gb, "")
	}
	if v.k == kAtom && v.sym == symTrue {
		nf, np := next(fr, pos)
		return nf, np, true, nil
	}
	return nil, 0, false, nil
}

func (e *engine) domainErr(err error, t term, base int32, msg string) error {
	return &RuntimeError{Err: err, Term: e.r.printer().String(e.resolve(t, base)), Msg: msg}
}

func (e *engine) callPredicate(g term, gb int32, fr *frame, pos int32) (*frame, int32, bool, error) {
	k := headKey(g)
	pd := e.r.prog.predByKey[k]
	adds := e.r.st.predAdds[k]
	if pd == nil && len(adds) == 0 {
		return nil, 0, false, nil
	}
	cp := choicepoint{
		kind: cpClauses, nctx: int32(len(e.ctxs)), goal: g, gbase: gb, fr: fr, pos: pos,
		trail: int32(len(e.trail)), env: int32(len(e.env)), frames: e.frames, alloc: e.alloc,
		pred: pd, adds: adds,
	}
	if len(g.args) > 0 {
		f, _ := e.deref(g.args[0], gb)
		if f.k != kRef {
			cp.first, cp.hasFirst = f, true
		}
	}
	if pd != nil {
		cp.cands = pd.candidates(cp.first, cp.hasFirst && !e.r.prog.noIndex)
	}
	e.cps = append(e.cps, cp)
	nf, np, ok := e.resumeClauses(len(e.cps) - 1)
	return nf, np, ok, nil
}

// resumeClauses tries the remaining clauses of choicepoint i until one
// unifies. The choicepoint is dropped once no clause is left, so a call
// whose last candidate matched leaves nothing to backtrack into.
func (e *engine) resumeClauses(i int) (*frame, int32, bool) {
	cp := &e.cps[i]
	st := e.r.st
	for int(cp.ci) < len(cp.cands) {
		c := cp.pred.clauses[cp.cands[cp.ci]]
		cp.ci++
		if c.factID >= 0 && st.baseDel[c.factID] {
			continue
		}
		base := e.newVars(c.vars)
		if !e.unify(c.head, base, cp.goal, cp.gbase) {
			e.undoTrail(cp.trail)
			e.env = e.env[:cp.env]
			continue
		}
		return e.enter(i, c.body, base)
	}
	for int(cp.ai) < len(cp.adds) {
		a := &st.adds[cp.adds[cp.ai]]
		cp.ai++
		if !a.alive {
			continue
		}
		if cp.hasFirst {
			if f := a.t.args[0]; f.k != kCompound && cp.first.k != kCompound && !sameAtomic(f, cp.first) {
				continue
			}
		}
		if !e.unify(a.t, 0, cp.goal, cp.gbase) {
			e.undoTrail(cp.trail)
			continue
		}
		return e.enter(i, nil, 0)
	}
	e.cps = e.cps[:i]
	return nil, 0, false
}

// enter continues with the body of the clause that matched for
// choicepoint i (which it drops if nothing else can match).
func (e *engine) enter(i int, body []term, base int32) (*frame, int32, bool) {
	cp := &e.cps[i]
	fr, pos := next(cp.fr, cp.pos)
	if !e.moreClauses(cp) {
		e.cps = e.cps[:i]
	}
	if len(body) == 0 {
		return fr, pos, true
	}
	e.frames++
	return &frame{goals: body, base: base, cutB: int32(i), ret: fr, retPos: pos, rootIdx: e.rootIndex(cp.fr, cp.pos)}, 0, true
}

func (e *engine) moreClauses(cp *choicepoint) bool {
	st := e.r.st
	for j := int(cp.ci); j < len(cp.cands); j++ {
		c := cp.pred.clauses[cp.cands[j]]
		if c.factID >= 0 && st.baseDel[c.factID] {
			continue
		}
		if cp.hasFirst && c.head.args[0].k != kVar {
			if f := c.head.args[0]; f.k != kCompound && cp.first.k != kCompound && !sameAtomic(f, cp.first) {
				continue
			}
		}
		return true
	}
	for j := int(cp.ai); j < len(cp.adds); j++ {
		a := &st.adds[cp.adds[j]]
		if !a.alive {
			continue
		}
		if cp.hasFirst {
			if f := a.t.args[0]; f.k != kCompound && cp.first.k != kCompound && !sameAtomic(f, cp.first) {
				continue
			}
		}
		return true
	}
	return false
}

package htn

import (
	"io"
	"strings"
)

// builtin runs one call of a builtin predicate. It reports whether the
// goal succeeded; it may bind variables and, for builtins with several
// answers, push a choicepoint.
type builtin func(e *engine, g term, gb int32) (bool, error)

func registerBuiltins(syms *symtab) map[symbol]builtin {
	table := map[string]builtin{
		"=":              biUnify,
		"==":             biIdentical,
		`\==`:            biNotIdentical,
		"is":             biIs,
		"not":            biNot,
		"first":          biFirst,
		"count":          biCount,
		"sum":            biAggregate,
		"min":            biAggregate,
		"max":            biAggregate,
		"distinct":       biDistinct,
		"sortBy":         biSortBy,
		"findall":        biFindall,
		"forall":         biForall,
		"assert":         biAssert,
		"retract":        biRetract,
		"retractall":     biRetractAll,
		"atomic":         biAtomic,
		"atom_concat":    biAtomConcat,
		"atom_chars":     biAtomChars,
		"downcase_atom":  biDowncase,
		"write":          biWrite,
		"writeln":        biWrite,
		"nl":             biNl,
		"print":          biTrue,
		"failureContext": biFailureContext,
		"showTraces":     biShowTraces,
	}
	out := make(map[symbol]builtin, len(table))
	for name, fn := range table {
		out[syms.intern(name)] = fn
	}
	// Make sure the names arithmetic and the planner look up exist too.
	syms.intern("false")
	return out
}

func (e *engine) badCall(g term, gb int32, msg string) error {
	return &RuntimeError{Err: ErrBadCall, Term: e.r.printer().String(e.resolve(g, gb)), Msg: msg}
}

func (e *engine) name(t term) string {
	switch t.k {
	case kAtom, kCompound:
		return e.r.syms.name(t.sym)
	}
	return e.r.printer().String(t)
}

func (e *engine) isUnboundVar(t term, base int32) bool {
	d, _ := e.deref(t, base)
	return d.k == kRef
}

func biTrue(*engine, term, int32) (bool, error) { return true, nil }

func biUnify(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 {
		return false, e.badCall(g, gb, "=() takes two terms")
	}
	return e.unify(g.args[0], gb, g.args[1], gb), nil
}

func biIdentical(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 {
		return false, e.badCall(g, gb, "==() takes two terms")
	}
	return e.identical(g.args[0], gb, g.args[1], gb), nil
}

func biNotIdentical(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 {
		return false, e.badCall(g, gb, `\==() takes two terms`)
	}
	return !e.identical(g.args[0], gb, g.args[1], gb), nil
}

func biIs(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 {
		return false, e.badCall(g, gb, "is() takes a variable or value and an arithmetic expression")
	}
	rhs := g.args[1]
	if !e.ev.isArithmetic(rhs, gb) {
		if e.isUnboundVar(rhs, gb) {
			return false, e.domainErr(ErrNotGround, g, gb, "the right side of is() must be ground")
		}
		d, _ := e.deref(rhs, gb)
		if d.k == kCompound {
			return false, e.domainErr(ErrUnknownFunction, rhs, gb, "in "+e.r.printer().String(e.resolve(g, gb)))
		}
		return false, e.badCall(g, gb, "the right side of is() must be an arithmetic expression")
	}
	v, err := e.ev.eval(rhs, gb)
	switch err {
	case nil:
	case errUnbound, errNonNumeric:
		// Like the reference, an expression that cannot be evaluated yet
		// fails the goal (Game.htn relies on this); only a bare unbound
		// right side is an error.
		return false, nil
	default:
		return false, e.domainErr(err, rhs, gb, "in "+e.r.printer().String(e.resolve(g, gb)))
	}
	lhs, lb := e.deref(g.args[0], gb)
	if lhs.k == kRef {
		e.bind(lhs.n, v, 0)
		return true, nil
	}
	if !e.ev.isArithmetic(lhs, lb) {
		return false, nil
	}
	lv, err := e.ev.eval(lhs, lb)
	if err != nil {
		if err == errUnbound || err == errNonNumeric {
			return false, nil
		}
		return false, e.domainErr(err, lhs, lb, "")
	}
	return e.ev.compare(lv, v) == 0, nil
}

func biNot(e *engine, g term, gb int32) (bool, error) {
	mark := int32(len(e.trail))
	found := false
	err := e.solveAt(g.args, gb, func() (bool, error) { found = true; return false, nil })
	e.undoTrail(mark)
	return !found && err == nil, err
}

func biFirst(e *engine, g term, gb int32) (bool, error) {
	mark := int32(len(e.trail))
	found := false
	err := e.solveAt(g.args, gb, func() (bool, error) { found = true; return false, nil })
	if err != nil || !found {
		e.undoTrail(mark)
	}
	return found, err
}

func biCount(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) < 2 || !e.isUnboundVar(g.args[0], gb) {
		return false, e.badCall(g, gb, "count(?Var, goals...) needs an unbound variable and at least one goal")
	}
	mark := int32(len(e.trail))
	n := int64(0)
	err := e.solveAt(g.args[1:], gb, func() (bool, error) { n++; return true, nil })
	e.undoTrail(mark)
	if err != nil {
		return false, err
	}
	v, _ := e.deref(g.args[0], gb)
	e.bind(v.n, intTerm(n), 0)
	return true, nil
}

func biAggregate(e *engine, g term, gb int32) (bool, error) {
	name := e.r.syms.name(g.sym)
	if len(g.args) < 3 || !e.isUnboundVar(g.args[0], gb) || !e.isUnboundVar(g.args[1], gb) {
		return false, e.badCall(g, gb, name+"(?Result, ?Var, goals...) needs two unbound variables and at least one goal")
	}
	mark := int32(len(e.trail))
	var acc term
	have, ok := false, true
	err := e.solveAt(g.args[2:], gb, func() (bool, error) {
		v, err := e.ev.eval(g.args[1], gb)
		if err != nil {
			if err == errUnbound || err == errNonNumeric {
				ok = false
				return false, nil
			}
			return false, e.domainErr(err, g.args[1], gb, "in "+name+"()")
		}
		if !have {
			acc, have = v, true
			return true, nil
		}
		op := term{k: kCompound, args: []term{acc, v}}
		switch name {
		case "sum":
			op.sym = e.r.syms.intern("+")
		case "min":
			op.sym = e.r.syms.intern("min")
		default:
			op.sym = e.r.syms.intern("max")
		}
		r, err := e.ev.eval(op, 0)
		if err != nil {
			return false, e.domainErr(err, op, 0, "in "+name+"()")
		}
		acc = r
		return true, nil
	})
	e.undoTrail(mark)
	if err != nil || !ok || !have {
		return false, err
	}
	v, _ := e.deref(g.args[0], gb)
	e.bind(v.n, acc, 0)
	return true, nil
}

// answer is one answer of a sub-resolution kept for later: the bindings it
// made to variables that existed before, in the order they were made.
type answer struct {
	binds []bindRec
	key   term
}

// collect runs goals and records every answer.
func (e *engine) collect(goals []term, base int32, key term, keyBase int32, hasKey bool) ([]answer, error) {
	mark := int32(len(e.trail))
	envStart := int32(len(e.env))
	e.collecting++
	var out []answer
	start, kept := e.alloc, int64(0)
	err := e.solveAt(goals, base, func() (bool, error) {
		var a answer
		before := e.alloc
		for _, idx := range e.trail[mark:] {
			if idx < envStart {
				c := &e.env[idx]
				a.binds = append(a.binds, bindRec{idx: idx, val: e.resolve(c.val, c.base)})
			}
		}
		if hasKey {
			a.key = e.resolve(key, keyBase)
		}
		// Backtracking to the next answer takes this one's terms out of
		// e.alloc, but the answer keeps them.
		n := e.alloc - before + sliceBytes(cap(a.binds), sizeBindRec) + sizeAnswerRec
		kept += n
		e.extraMem += n
		out = append(out, a)
		return true, nil
	})
	e.collecting--
	e.undoTrail(mark)
	e.extraMem -= kept
	e.alloc = start + kept + sliceBytes(cap(out), sizeAnswerRec)
	return out, err
}

// offer makes the collected answers the alternatives of the current goal:
// the first is bound now, the others on backtracking.
func (e *engine) offer(fr *frame, pos int32, answers []answer) bool {
	if len(answers) == 0 {
		return false
	}
	if len(answers) > 1 {
		alts := make([][]bindRec, len(answers)-1)
		for i, a := range answers[1:] {
			alts[i] = a.binds
		}
		e.cps = append(e.cps, choicepoint{
			kind: cpAlts, nctx: int32(len(e.ctxs)), fr: fr, pos: pos,
			trail: int32(len(e.trail)), env: int32(len(e.env)), frames: e.frames, alloc: e.alloc,
			alts: alts,
		})
	}
	for _, b := range answers[0].binds {
		e.bind(int64(b.idx), b.val, 0)
	}
	return true
}

func biDistinct(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) < 2 || !e.isUnboundVar(g.args[0], gb) {
		return false, e.badCall(g, gb, "distinct(?Key, goals...) needs an unbound variable and at least one goal")
	}
	fr, pos := e.curFr, e.curPos // the sub-resolution below moves them
	kv, _ := e.deref(g.args[0], gb)
	anonKey := e.env[kv.n].anon
	answers, err := e.collect(g.args[1:], gb, g.args[0], gb, true)
	if err != nil || len(answers) == 0 {
		return false, err
	}
	var unique []answer
	if anonKey {
		// Without a key, answers are compared on all named variables.
		var seen [][]bindRec
	next:
		for _, a := range answers {
			named := a.binds[:0:0]
			for _, b := range a.binds {
				if !e.env[b.idx].anon {
					named = append(named, b)
				}
			}
			for _, s := range seen {
				if e.sameBinds(s, named) {
					continue next
				}
			}
			seen = append(seen, named)
			unique = append(unique, a)
		}
	} else {
	nextKey:
		for _, a := range answers {
			for _, u := range unique {
				if e.ev.compare(u.key, a.key) == 0 {
					continue nextKey
				}
			}
			unique = append(unique, a)
		}
	}
	return e.offer(fr, pos, unique), nil
}

func (e *engine) sameBinds(a, b []bindRec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].idx != b[i].idx || e.ev.compare(a[i].val, b[i].val) != 0 {
			return false
		}
	}
	return true
}

func biSortBy(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 || !e.isUnboundVar(g.args[0], gb) {
		return false, e.badCall(g, gb, "sortBy(?Key, <(goals...)) needs an unbound variable and a comparison term")
	}
	fr, pos := e.curFr, e.curPos // the sub-resolution below moves them
	cmpT, cb := e.deref(g.args[1], gb)
	if cmpT.k != kCompound || (cmpT.sym != symLess && cmpT.sym != symGreater) {
		return false, e.badCall(g, gb, "sortBy() orders with <(goals...) or >(goals...)")
	}
	answers, err := e.collect(cmpT.args, cb, g.args[0], gb, true)
	if err != nil || len(answers) == 0 {
		return false, err
	}
	want := -1
	if cmpT.sym == symGreater {
		want = 1
	}
	cppSort(answers, func(a, b *answer) bool { return e.ev.compare(a.key, b.key) == want })
	return e.offer(fr, pos, answers), nil
}

func biFindall(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) < 3 {
		return false, e.badCall(g, gb, "findall(Template, Goal, Bag) takes three terms")
	}
	mark := int32(len(e.trail))
	e.collecting++
	var items []term
	start, kept := e.alloc, int64(0)
	err := e.solveAt(g.args[1:len(g.args)-1], gb, func() (bool, error) {
		before := e.alloc
		items = append(items, e.resolve(g.args[0], gb))
		n := e.alloc - before + 2*sizeTerm
		kept += n
		e.extraMem += n
		return true, nil
	})
	e.collecting--
	e.undoTrail(mark)
	e.extraMem -= kept
	e.alloc = start + kept
	if err != nil {
		return false, err
	}
	list := atomTerm(symNil)
	for i := len(items) - 1; i >= 0; i-- {
		list = compound(symDot, []term{items[i], list})
	}
	e.alloc += int64(len(items)) * termsBytes(2)
	return e.unify(g.args[len(g.args)-1], gb, list, 0), nil
}

func biForall(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 {
		return false, e.badCall(g, gb, "forall(Condition, Action) takes two terms")
	}
	mark := int32(len(e.trail))
	holds := true
	err := e.solveAt(g.args[:1], gb, func() (bool, error) {
		inner := int32(len(e.trail))
		found := false
		err := e.solveAt(g.args[1:2], gb, func() (bool, error) { found = true; return false, nil })
		e.undoTrail(inner)
		if err != nil {
			return false, err
		}
		if !found {
			holds = false
			return false, nil
		}
		return true, nil
	})
	e.undoTrail(mark)
	return holds && err == nil, err
}

func biAssert(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 1 {
		return false, e.badCall(g, gb, "assert() takes one term")
	}
	before := e.alloc
	t := e.resolve(g.args[0], gb)
	if !isGround(t) {
		return false, e.domainErr(ErrNotGround, t, 0, "assert() needs a ground fact")
	}
	if t.k != kAtom && t.k != kCompound {
		return false, e.badCall(g, gb, "assert() needs a fact")
	}
	if !e.r.st.insert(t, e.alloc-before) {
		return false, e.domainErr(ErrFactExists, t, 0, "assert()")
	}
	return true, nil
}

func biRetract(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 1 {
		return false, e.badCall(g, gb, "retract() takes one term")
	}
	t := e.resolve(g.args[0], gb)
	if !isGround(t) {
		return false, e.domainErr(ErrNotGround, t, 0, "retract() needs a ground fact")
	}
	return e.r.st.remove(t), nil
}

func biRetractAll(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 1 {
		return false, e.badCall(g, gb, "retractall() takes one term")
	}
	pat, pb := e.deref(g.args[0], gb)
	if pat.k != kAtom && pat.k != kCompound {
		return true, nil
	}
	k := headKey(pat)
	st := e.r.st
	var victims []term
	matches := func(f term) bool {
		mark := int32(len(e.trail))
		ok := e.unify(f, 0, pat, pb)
		e.undoTrail(mark)
		return ok
	}
	if pd := e.r.prog.predByKey[k]; pd != nil {
		for _, c := range pd.clauses {
			if c.factID >= 0 && c.ground && !st.baseDel[c.factID] && matches(c.head) {
				victims = append(victims, c.head)
			}
		}
	}
	for _, idx := range st.predAdds[k] {
		if a := &st.adds[idx]; a.alive && matches(a.t) {
			victims = append(victims, a.t)
		}
	}
	for _, v := range victims {
		st.remove(v)
	}
	return true, nil
}

func biAtomic(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 1 {
		return false, e.badCall(g, gb, "atomic() takes one term")
	}
	t, _ := e.deref(g.args[0], gb)
	return t.isAtomic(), nil
}

func biAtomConcat(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 3 {
		return false, e.badCall(g, gb, "atom_concat(A, B, ?AB) takes three terms")
	}
	a, _ := e.deref(g.args[0], gb)
	b, _ := e.deref(g.args[1], gb)
	if !a.isAtomic() || !b.isAtomic() || !e.isUnboundVar(g.args[2], gb) {
		return false, e.badCall(g, gb, "atom_concat() needs two atoms and an unbound variable")
	}
	r := e.r.syms.atom(e.name(a) + e.name(b))
	return e.unify(g.args[2], gb, r, 0), nil
}

func biDowncase(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 {
		return false, e.badCall(g, gb, "downcase_atom(Atom, ?Lower) takes two terms")
	}
	a, _ := e.deref(g.args[0], gb)
	if !a.isAtomic() || !e.isUnboundVar(g.args[1], gb) {
		return false, e.badCall(g, gb, "downcase_atom() needs an atom and an unbound variable")
	}
	lower := []byte(e.name(a))
	for i, c := range lower {
		if c >= 'A' && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	return e.unify(g.args[1], gb, e.r.syms.atom(string(lower)), 0), nil
}

func biAtomChars(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 2 || (e.isUnboundVar(g.args[0], gb) && e.isUnboundVar(g.args[1], gb)) {
		return false, e.badCall(g, gb, "atom_chars(Atom, List) takes two terms that are not both unbound")
	}
	if e.isUnboundVar(g.args[0], gb) {
		var b strings.Builder
		l, lb := e.deref(g.args[1], gb)
		for l.k == kCompound && l.sym == symDot && len(l.args) == 2 {
			h, _ := e.deref(l.args[0], lb)
			if h.k == kRef {
				break
			}
			s := e.name(h)
			if len(s) != 1 {
				break
			}
			b.WriteString(s)
			l, lb = e.deref(l.args[1], lb)
		}
		if b.Len() == 0 {
			return false, nil
		}
		return e.unify(g.args[0], gb, e.r.syms.atom(b.String()), 0), nil
	}
	a, _ := e.deref(g.args[0], gb)
	s := e.name(a)
	list := atomTerm(symNil)
	for i := len(s) - 1; i >= 0; i-- {
		list = compound(symDot, []term{e.r.syms.atom(s[i : i+1]), list})
	}
	e.alloc += int64(len(s)) * termsBytes(2)
	return e.unify(g.args[1], gb, list, 0), nil
}

func (e *engine) out() io.Writer {
	if e.r.opts.Output == nil {
		return io.Discard
	}
	return e.r.opts.Output
}

func biWrite(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 1 {
		return false, e.badCall(g, gb, "write() takes one term")
	}
	s := e.r.printer().String(e.resolve(g.args[0], gb))
	if e.r.syms.name(g.sym) == "writeln" {
		s += "\n"
	}
	_, _ = io.WriteString(e.out(), s)
	return true, nil
}

func biNl(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) != 0 {
		return false, e.badCall(g, gb, "nl takes no arguments")
	}
	_, _ = io.WriteString(e.out(), "\n")
	return true, nil
}

func biFailureContext(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) == 0 || e.isUnboundVar(g.args[0], gb) {
		return false, e.badCall(g, gb, "failureContext(Tag, terms...) needs a tag")
	}
	if e.track {
		// In force for the rest of the branch: a failure further along
		// reports it (see noteFail).
		e.ctxs = append(e.ctxs, ctxEntry{args: g.args, base: gb})
	}
	return true, nil
}

// biShowTraces runs its arguments as goals in place; tracing itself is a
// debugging aid of the reference with no effect on answers.
func biShowTraces(e *engine, g term, gb int32) (bool, error) {
	if len(g.args) == 0 {
		return true, nil
	}
	fr, pos := next(e.curFr, e.curPos)
	e.frames++
	e.pushed = &frame{goals: g.args, base: gb, cutB: int32(len(e.cps)), ret: fr, retPos: pos, rootIdx: e.rootIndex(e.curFr, e.curPos)}
	return true, nil
}

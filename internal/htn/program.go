package htn

import (
	"fmt"
)

// predKey identifies a predicate, method group or fact group: name and arity.
type predKey struct {
	sym   symbol
	arity int32
}

// argKey is what first-argument indexing compares: an atomic value, or a
// functor and arity for compound arguments.
type argKey struct {
	k   kind
	sym symbol
	n   int64
}

func keyOf(t term) (argKey, bool) {
	switch t.k {
	case kAtom, kInt, kFloat:
		return argKey{k: t.k, sym: t.sym, n: t.n}, true
	case kCompound:
		return argKey{k: kCompound, sym: t.sym, n: int64(len(t.args))}, true
	}
	return argKey{}, false
}

// clause is a fact or axiom of the rule set. Variables are kVar terms
// numbered 0..len(vars)-1.
type clause struct {
	head   term
	body   []term
	vars   []varInfo
	factID int32 // index in Program.facts when the body is empty, else -1
	ground bool
	shown  term // the head with its variables named, as facts are listed
	line   int
}

// predicate groups the clauses with one name and arity, in document order,
// with a first-argument index.
type predicate struct {
	key     predKey
	clauses []*clause
	byFirst map[argKey][]int32 // clauses whose first argument is the key or a variable
	varOnly []int32            // clauses whose first argument is a variable
	all     []int32
	id      int32
}

func (p *predicate) candidates(first term, hasFirst bool) []int32 {
	if !hasFirst || p.key.arity <= 0 {
		return p.all
	}
	k, ok := keyOf(first)
	if !ok {
		return p.all
	}
	if c, ok := p.byFirst[k]; ok {
		return c
	}
	return p.varOnly
}

func (p *predicate) buildIndex() {
	p.all = make([]int32, len(p.clauses))
	for i := range p.clauses {
		p.all[i] = int32(i)
	}
	if p.key.arity <= 0 {
		return
	}
	p.byFirst = map[argKey][]int32{}
	var keys []argKey
	for _, c := range p.clauses {
		if k, ok := keyOf(c.head.args[0]); ok {
			if _, seen := p.byFirst[k]; !seen {
				p.byFirst[k] = nil
				keys = append(keys, k)
			}
		}
	}
	for i, c := range p.clauses {
		k, ok := keyOf(c.head.args[0])
		if !ok {
			p.varOnly = append(p.varOnly, int32(i))
			for _, kk := range keys {
				p.byFirst[kk] = append(p.byFirst[kk], int32(i))
			}
			continue
		}
		p.byFirst[k] = append(p.byFirst[k], int32(i))
	}
}

type methodKind uint8

const (
	methodNormal methodKind = iota
	methodAllOf
	methodAnyOf
)

// method is "head :- [else,] [allOf|anyOf,] if(cond...), do(tasks...)".
type method struct {
	head   term
	cond   []term
	tasks  []term
	vars   []varInfo
	kind   methodKind
	isElse bool
	order  int
	line   int
	text   string // head as written, for traces
}

// operator is "head :- [hidden,] del(facts...), add(facts...)".
type operator struct {
	head   term
	del    []term
	add    []term
	vars   []varInfo
	hidden bool
	line   int
	text   string // head as written, for failures and traces
}

// Program is a parsed and compiled InductorHtn program: the initial facts
// and axioms, the methods and the operators. It is immutable after Parse
// and safe for concurrent use by any number of Plan and Query calls.
type Program struct {
	syms      *symtab
	preds     []*predicate
	predByKey map[predKey]*predicate
	facts     []*clause          // clauses with an empty body, document order
	factIndex map[uint64][]int32 // ground facts by hash, index into facts
	methods   map[predKey][]*method
	nMethods  int
	ops       map[symbol]*operator
	builtins  map[symbol]builtin
	goals     []term
	goalVars  []varInfo
	hasGoals  bool
	noIndex   bool // tests: scan every clause instead of using the index
}

// Parse compiles a program written in the InductorHtn language. A syntax
// error is returned as a *ParseError (wrapping ErrSyntax) with the line and
// column where parsing stopped; a badly formed method or operator, or a
// ground fact written twice, is reported the same way at its statement.
func Parse(src string) (*Program, error) {
	syms := newSymtab()
	p := &Program{
		syms:      syms,
		predByKey: map[predKey]*predicate{},
		factIndex: map[uint64][]int32{},
		methods:   map[predKey][]*method{},
		ops:       map[symbol]*operator{},
	}
	p.builtins = registerBuiltins(syms)
	ps := newParser(src, syms)
	stmts, err := ps.parseProgram()
	if err != nil {
		return nil, err
	}
	pr := printer{syms: syms}
	for i := range stmts {
		if err := p.compile(&stmts[i], pr, src); err != nil {
			return nil, err
		}
	}
	for _, pd := range p.preds {
		pd.buildIndex()
	}
	return p, nil
}

func headKey(t term) predKey {
	switch t.k {
	case kAtom:
		return predKey{sym: t.sym}
	case kCompound:
		return predKey{sym: t.sym, arity: int32(len(t.args))}
	}
	return predKey{sym: -1, arity: -1}
}

func (p *Program) compileErr(st *statement, format string, args ...any) error {
	return &ParseError{Line: st.line, Column: st.col, Msg: fmt.Sprintf(format, args...)}
}

func (p *Program) compile(st *statement, pr printer, src string) error {
	pr.vars = st.vars
	head := st.head
	if !st.hasBody {
		if (head.k == kAtom || head.k == kCompound) && head.sym == symGoals {
			p.goals = head.args
			p.goalVars = st.vars
			p.hasGoals = true
			return nil
		}
		return p.addClause(st, head, nil, pr)
	}
	kind := methodNormal
	isElse, hidden := false, false
	var cond, del *term
	for i := range st.body {
		item := &st.body[i]
		if item.k == kAtom {
			switch item.sym {
			case symElse:
				isElse = true
				continue
			case symAllOf:
				kind = methodAllOf
				continue
			case symAnyOf:
				kind = methodAnyOf
				continue
			case symHidden:
				hidden = true
				continue
			}
		}
		if item.k != kAtom && item.k != kCompound {
			continue
		}
		switch item.sym {
		case symIf:
			if cond != nil {
				return p.compileErr(st, "method %s has two if() clauses", pr.String(head))
			}
			cond = item
		case symDo:
			if cond == nil {
				return p.compileErr(st, "method %s: do() must follow if()", pr.String(head))
			}
			if head.k != kAtom && head.k != kCompound {
				return p.compileErr(st, "method head %s must be a name or compound term", pr.String(head))
			}
			m := &method{
				head: head, cond: cond.args, tasks: item.args, vars: st.vars,
				kind: kind, isElse: isElse, order: p.nMethods, line: st.line,
				text: pr.String(head),
			}
			p.nMethods++
			k := headKey(head)
			p.methods[k] = append(p.methods[k], m)
			return nil
		case symDel:
			if del != nil || kind != methodNormal || isElse || cond != nil {
				return p.compileErr(st, "operator %s: del() must come first and only once, without else, allOf, anyOf or if()", pr.String(head))
			}
			del = item
		case symAdd:
			if del == nil || kind != methodNormal || isElse || cond != nil {
				return p.compileErr(st, "operator %s: add() must follow del()", pr.String(head))
			}
			if head.k != kAtom && head.k != kCompound {
				return p.compileErr(st, "operator head %s must be a name or compound term", pr.String(head))
			}
			if _, dup := p.ops[head.sym]; !dup {
				// Operators are looked up by name only; like the reference, the
				// first definition of a name wins.
				p.ops[head.sym] = &operator{head: head, del: del.args, add: item.args, vars: st.vars, hidden: hidden, line: st.line, text: pr.String(head)}
			}
			return nil
		}
	}
	return p.addClause(st, head, st.body, pr)
}

func (p *Program) addClause(st *statement, head term, body []term, pr printer) error {
	c := &clause{head: head, body: body, vars: st.vars, factID: -1, line: st.line}
	if len(body) == 0 {
		c.body = nil
		c.ground = isGround(head)
		c.factID = int32(len(p.facts))
		c.shown = nameVars(head, st.vars)
		if c.ground {
			h := hashTerm(head)
			for _, id := range p.factIndex[h] {
				if equalGround(p.facts[id].head, head) {
					return p.compileErr(st, "duplicate fact %s", pr.String(head))
				}
			}
			p.factIndex[h] = append(p.factIndex[h], c.factID)
		}
		p.facts = append(p.facts, c)
	}
	k := headKey(head)
	pd := p.predByKey[k]
	if pd == nil {
		pd = &predicate{key: k, id: int32(len(p.preds))}
		p.predByKey[k] = pd
		p.preds = append(p.preds, pd)
	}
	pd.clauses = append(pd.clauses, c)
	return nil
}

// Goals returns the goal list of the program's goals(...) statement, as
// text in the reference's format, and whether the program had one.
func (p *Program) Goals() (string, bool) {
	if !p.hasGoals {
		return "", false
	}
	pr := printer{syms: p.syms, vars: p.goalVars}
	s := ""
	for i, g := range p.goals {
		if i > 0 {
			s += ", "
		}
		s += pr.String(g)
	}
	return s, true
}

// nameVars replaces clause-local variables with named free variables, so a
// fact with variables can be listed outside its clause.
func nameVars(t term, vars []varInfo) term {
	switch t.k {
	case kVar:
		return term{k: kFree, sym: vars[t.n].name, n: -1 - t.n}
	case kCompound:
		args := make([]term, len(t.args))
		for i, a := range t.args {
			args[i] = nameVars(a, vars)
		}
		return compound(t.sym, args)
	}
	return t
}

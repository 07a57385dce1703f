package htn

import (
	"strconv"
	"strings"
)

// TermKind tells how a Term's fields are read.
type TermKind uint8

const (
	// Atom is a name such as downtown, 'Hi there' (printed without quotes)
	// or "a string" (printed with its quotes). Name is its text.
	Atom TermKind = iota
	// Integer and Float are numbers; Name is their text as printed.
	Integer
	Float
	// Variable is an unbound variable; Name is its name without the '?'.
	Variable
	// Compound is Name(Args...). Lists are compounds named "." with two
	// arguments, ending in the atom [].
	Compound
)

// Term is a term detached from the engine, as found in plans, facts and
// query answers. Its String method prints it exactly as the reference
// engine does (no spaces inside terms, lists as [a,b]).
type Term struct {
	Kind TermKind
	Name string
	Args []Term
}

// String prints the term in the reference's format.
func (t Term) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t Term) write(b *strings.Builder) {
	switch t.Kind {
	case Variable:
		b.WriteByte('?')
		b.WriteString(t.Name)
	case Compound:
		if t.Name == "." && len(t.Args) == 2 {
			b.WriteByte('[')
			for {
				t.Args[0].write(b)
				tail := t.Args[1]
				if tail.Kind == Atom && tail.Name == "[]" {
					b.WriteByte(']')
					return
				}
				b.WriteByte(',')
				if tail.Kind == Compound && tail.Name == "." && len(tail.Args) == 2 {
					t = tail
					continue
				}
				tail.write(b)
				return
			}
		}
		b.WriteString(t.Name)
		b.WriteByte('(')
		for i, a := range t.Args {
			if i > 0 {
				b.WriteByte(',')
			}
			a.write(b)
		}
		b.WriteByte(')')
	default:
		b.WriteString(t.Name)
	}
}

// publicTerm converts an engine term that holds no store references.
func publicTerm(t term, syms *symtab) Term {
	switch t.k {
	case kAtom:
		return Term{Kind: Atom, Name: syms.name(t.sym)}
	case kInt:
		return Term{Kind: Integer, Name: strconv.FormatInt(t.n, 10)}
	case kFloat:
		return Term{Kind: Float, Name: formatFloat(t.float())}
	case kFree:
		return Term{Kind: Variable, Name: syms.name(t.sym)}
	case kCompound:
		args := make([]Term, len(t.args))
		for i, a := range t.args {
			args[i] = publicTerm(a, syms)
		}
		return Term{Kind: Compound, Name: syms.name(t.sym), Args: args}
	}
	return Term{Kind: Variable, Name: "_G" + strconv.FormatInt(t.n, 10)}
}

// Operator is one step of a plan: a ground operator head.
type Operator struct {
	Name string
	Args []Term
	// Hidden operators change the state but are left out of printed plans.
	Hidden bool

	ctx  *decomp
	syms *symtab
}

// Term returns the operator as a term.
func (o Operator) Term() Term {
	if len(o.Args) == 0 {
		return Term{Kind: Atom, Name: o.Name}
	}
	return Term{Kind: Compound, Name: o.Name, Args: o.Args}
}

// String prints the operator as the reference does, e.g. walk(downtown,park).
func (o Operator) String() string { return o.Term().String() }

// Step is one decomposition on the way from a goal to an operator: the
// task, the method that decomposed it and the values its variables took.
type Step struct {
	Task     Term
	Method   string // the method's head as written, e.g. travel-to(?q)
	Line     int    // where the method is defined
	Bindings []Binding
}

// Trace returns the decompositions that produced the operator, from the
// top-level goal down to the method whose do() listed it. It is empty for
// an operator that was itself a goal.
func (o Operator) Trace() []Step {
	var steps []Step
	for d := o.ctx; d != nil; d = d.parent {
		s := Step{Task: publicTerm(d.task, o.syms), Method: d.m.text, Line: d.m.line}
		for i, v := range d.m.vars {
			if v.anon {
				continue
			}
			s.Bindings = append(s.Bindings, Binding{Var: o.syms.name(v.name), Value: publicTerm(d.vals[i], o.syms)})
		}
		steps = append(steps, s)
	}
	for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
		steps[i], steps[j] = steps[j], steps[i]
	}
	return steps
}

// Binding is a variable and its value.
type Binding struct {
	Var   string // without the '?'
	Value Term
}

// Plan is one solution of a planning problem. It keeps the engine's
// compact form; Operators and Facts convert on demand, because a search
// can return tens of thousands of plans.
type Plan struct {
	last    *opCell // the plan's operators, newest first, shared with other plans
	prog    *Program
	deleted []int32 // program facts deleted by the plan
	added   []term  // facts added by the plan, in order
	syms    *symtab
}

// Len returns the number of operators, hidden ones included.
func (p *Plan) Len() int {
	if p.last == nil {
		return 0
	}
	return p.last.n
}

// opCells lists the operator cells in plan order.
func (p *Plan) opCells() []*opCell {
	out := make([]*opCell, p.Len())
	for o, i := p.last, p.Len()-1; o != nil; o, i = o.prev, i-1 {
		out[i] = o
	}
	return out
}

// Operators returns the plan's operators in order, hidden ones included
// (marked Hidden).
func (p *Plan) Operators() []Operator {
	cells := p.opCells()
	out := make([]Operator, len(cells))
	for i, o := range cells {
		out[i] = Operator{Name: p.syms.name(o.op.sym), Args: publicArgs(o.op, p.syms), Hidden: o.hidden, ctx: o.ctx, syms: p.syms}
	}
	return out
}

// Facts returns the world state after the plan, in the reference's order:
// the program's facts that were not deleted, in document order, then the
// added facts in the order they were added.
func (p *Plan) Facts() []Term {
	facts := p.factTerms()
	out := make([]Term, len(facts))
	for i, f := range facts {
		out[i] = publicTerm(f, p.syms)
	}
	return out
}

func (p *Plan) factTerms() []term {
	out := make([]term, 0, len(p.prog.facts)-len(p.deleted)+len(p.added))
	d := 0
	for id, c := range p.prog.facts {
		if d < len(p.deleted) && p.deleted[d] == int32(id) {
			d++
			continue
		}
		out = append(out, c.shown)
	}
	return append(out, p.added...)
}

// Result is the outcome of Plan.
type Result struct {
	// Plans found, in depth-first order. Empty when there is no plan.
	Plans []Plan
	// Partial is set only together with ErrBudgetExceeded: the operators
	// applied, and the state reached, on the branch where the budget ran
	// out. The reference engine prints this as if it were a plan.
	Partial *Plan
	Stats   Stats
	// Failure, when the search ended without a plan (and without an
	// error), is the furthest point it reached: the task deepest in the
	// search that could not be solved, and for a method's condition, the
	// goal of its if() it failed at (see Failure).
	Failure *Failure
	// Trace is the search as Options.Trace records it, and TraceDropped
	// the events past Options.TraceLimit that were not kept.
	Trace        []TraceEvent
	TraceDropped int64
}

// Answer is the outcome of Query.
type Answer struct {
	// Solutions in the reference's order; nil when the query failed.
	Solutions []Solution
	Stats     Stats
}

// Solution lists the query variables bound by one answer, in the order the
// reference engine prints them (the order in which they were bound).
type Solution []Binding

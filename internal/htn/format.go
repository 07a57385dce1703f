package htn

import "strings"

// FormatPlans prints plans as the reference's ToStringSolutions:
// "[ { (op1, op2) } { (op3) } ]", or "null" when there are none. Hidden
// operators are left out.
func FormatPlans(plans []Plan) string {
	if len(plans) == 0 {
		return "null"
	}
	var b strings.Builder
	b.WriteString("[ ")
	for i := range plans {
		b.WriteString("{ ")
		writePlan(&b, &plans[i])
		b.WriteString(" } ")
	}
	b.WriteString("]")
	return b.String()
}

// FormatPlan prints one plan as the reference's ToStringSolution:
// "(op1, op2)", or "null" for a nil plan.
func FormatPlan(p *Plan) string {
	if p == nil {
		return "null"
	}
	var b strings.Builder
	writePlan(&b, p)
	return b.String()
}

func writePlan(b *strings.Builder, p *Plan) {
	b.WriteByte('(')
	first := true
	pr := printer{syms: p.syms}
	for _, o := range p.opCells() {
		if o.hidden {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		pr.write(b, o.op)
	}
	b.WriteByte(')')
}

// FormatFacts prints the final state of each plan as the reference's
// ToStringFacts over all solutions: "[ { f1 => ,f2 =>  } ]", or "null".
func FormatFacts(plans []Plan) string {
	if len(plans) == 0 {
		return "null"
	}
	var b strings.Builder
	b.WriteString("[ ")
	for i := range plans {
		b.WriteString("{ ")
		b.WriteString(FormatPlanFacts(&plans[i]))
		b.WriteString(" } ")
	}
	b.WriteString("]")
	return b.String()
}

// FormatPlanFacts prints one plan's final state: "f1 => ,f2 => ", or
// "null" for a nil plan.
func FormatPlanFacts(p *Plan) string {
	if p == nil {
		return "null"
	}
	var b strings.Builder
	pr := printer{syms: p.syms}
	for i, f := range p.factTerms() {
		if i > 0 {
			b.WriteByte(',')
		}
		pr.write(&b, f)
		b.WriteString(" => ")
	}
	return b.String()
}

// FormatQuery prints query answers as the reference's resolver does:
// "((?X = a, ?Y = b), (?X = c, ?Y = d))", "(())" for a single answer that
// binds nothing, and "null" when there is no answer.
func FormatQuery(a *Answer) string {
	if a == nil || len(a.Solutions) == 0 {
		return "null"
	}
	var b strings.Builder
	b.WriteByte('(')
	for i, s := range a.Solutions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j, bd := range s {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			b.WriteString(bd.Var)
			b.WriteString(" = ")
			b.WriteString(bd.Value.String())
		}
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

package goap

import "fmt"

// Op is the comparison of a Condition.
type Op string

// The comparisons, in the order a fact's comparisons are checked.
const (
	Equals    Op = "equals"
	NotEquals Op = "ne"
	Less      Op = "lt"
	LessEq    Op = "lte"
	Greater   Op = "gt"
	GreaterEq Op = "gte"
	Exists    Op = "exists"
)

var ops = []Op{Equals, NotEquals, Less, LessEq, Greater, GreaterEq, Exists}

// Condition tests one fact: a precondition of an action or a condition of
// a goal. An absent fact (one without a default that the state lacks)
// satisfies only "ne" and "exists": false.
type Condition struct {
	Fact  string
	Op    Op
	Value any // bool, float64 or string; a bool for Exists

	fact int   // index in Domain.Facts
	val  value // Value, converted
}

// String formats the condition as "wood gte 4".
func (c Condition) String() string {
	return fmt.Sprintf("%s %s %s", c.Fact, c.Op, c.val)
}

// holds reports whether the condition is true of v.
func (c *Condition) holds(v value) bool {
	switch c.Op {
	case Exists:
		return (v.k != absent) == (c.val.num != 0)
	case Equals:
		return v == c.val
	case NotEquals:
		return v != c.val
	}
	if v.k != kNumber {
		return false
	}
	switch c.Op {
	case Less:
		return v.num < c.val.num
	case LessEq:
		return v.num <= c.val.num
	case Greater:
		return v.num > c.val.num
	default: // GreaterEq
		return v.num >= c.val.num
	}
}

// allHold reports whether every condition holds in state s.
func allHold(cs []Condition, s []value) bool {
	for i := range cs {
		if !cs[i].holds(s[cs[i].fact]) {
			return false
		}
	}
	return true
}

// unsatisfied lists the conditions that fail in s as "wood gte 4 (is 0)".
func unsatisfied(cs []Condition, s []value) []string {
	var out []string
	for i := range cs {
		if v := s[cs[i].fact]; !cs[i].holds(v) {
			out = append(out, fmt.Sprintf("%s (is %s)", cs[i], v))
		}
	}
	return out
}

// unmetPreconditions lists what keeps action a from applying in state
// vector s: its failing preconditions as unsatisfied formats them, and
// its requires expression when it is false. Errors: *EvalError when the
// expression fails.
func unmetPreconditions(ev *evaluator, a *Action, s []value) ([]string, error) {
	out := unsatisfied(a.Preconditions, s)
	if a.requires != nil {
		ok, err := ev.boolean(a.requires, s, "action "+a.Name+": requires")
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, fmt.Sprintf("requires %s (is false)", a.Requires))
		}
	}
	return out, nil
}

// EffectOp is what an Effect does to its fact.
type EffectOp string

// The effect operations.
const (
	Set EffectOp = "set"
	Inc EffectOp = "inc"
	Dec EffectOp = "dec"
)

// Effect is one predicted change of an action. Inc and Dec treat an
// absent number as 0.
type Effect struct {
	Fact  string
	Op    EffectOp
	Value any // the value set, or the amount added or taken (float64)

	fact int
	val  value
}

// String formats the effect as "wood inc 1".
func (e Effect) String() string { return fmt.Sprintf("%s %s %s", e.Fact, e.Op, e.val) }

// apply changes s in place.
func (e *Effect) apply(s []value) {
	switch e.Op {
	case Set:
		s[e.fact] = e.val
	case Inc:
		s[e.fact] = numValue(s[e.fact].num + e.val.num)
	case Dec:
		s[e.fact] = numValue(s[e.fact].num - e.val.num)
	}
}

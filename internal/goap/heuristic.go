package goap

import "math"

// heuristic estimates the cost still needed to satisfy a goal. It is
// admissible (it never overestimates) and consistent (it drops by at most
// an action's cost along any edge), so A* with a closed set returns the
// cheapest plan. It is the larger of two lower bounds, over the goal's
// unsatisfied facts (facts with at least one failing condition):
//
//   - per fact: an unsatisfied fact needs at least one action that changes
//     it, so the cheapest such action's cost. When no usable action sets
//     the fact but some increment or decrement it, a numeric condition
//     needs at least distance/largest-step of them (the seed's
//     "(64-4)/4 × cost"), each costing at least that much.
//   - together: one action changes at most k of the goal's facts (k is the
//     most any usable action changes), so ⌈unsatisfied/k⌉ actions, each
//     costing at least the cheapest action that changes a goal fact.
//
// A fact no usable action changes makes the estimate +Inf: the goal is
// unreachable from any state where that fact is unsatisfied.
type heuristic struct {
	facts []goalFact
	k     int
	cmin  float64
}

type goalFact struct {
	fact  int
	conds []*Condition
	cheap float64 // cheapest usable action changing the fact; +Inf if none
	step  float64 // largest |inc or dec| among usable actions
	set   bool    // some usable action sets the fact
}

func newHeuristic(g *Goal, usable []*Action) *heuristic {
	h := &heuristic{cmin: math.Inf(1)}
	at := map[int]int{}
	for i := range g.Conditions {
		c := &g.Conditions[i]
		j, ok := at[c.fact]
		if !ok {
			j = len(h.facts)
			at[c.fact] = j
			h.facts = append(h.facts, goalFact{fact: c.fact, cheap: math.Inf(1)})
		}
		h.facts[j].conds = append(h.facts[j].conds, c)
	}
	for _, a := range usable {
		touched := 0
		for i := range a.Effects {
			e := &a.Effects[i]
			j, ok := at[e.fact]
			if !ok {
				continue
			}
			touched++
			gf := &h.facts[j]
			gf.cheap = min(gf.cheap, a.MinCost)
			if e.Op == Set {
				gf.set = true
			} else {
				gf.step = max(gf.step, math.Abs(e.val.num))
			}
		}
		if touched > 0 {
			h.k = max(h.k, touched)
			h.cmin = min(h.cmin, a.MinCost)
		}
	}
	return h
}

// estimate returns the lower bound for state s; 0 exactly when the goal
// holds.
func (h *heuristic) estimate(s []value) float64 {
	unsat := 0
	per := 0.0
	for i := range h.facts {
		gf := &h.facts[i]
		v := s[gf.fact]
		steps := 0.0
		for _, c := range gf.conds {
			if !c.holds(v) {
				steps = max(steps, gf.steps(c, v))
			}
		}
		if steps == 0 {
			continue
		}
		unsat++
		if math.IsInf(gf.cheap, 1) {
			return math.Inf(1)
		}
		per = max(per, steps*gf.cheap)
	}
	if unsat == 0 {
		return 0
	}
	together := math.Ceil(float64(unsat)/float64(h.k)) * h.cmin
	return max(per, together)
}

// steps is a lower bound of the actions changing gf needed to make the
// failing condition c hold, from value v.
func (gf *goalFact) steps(c *Condition, v value) float64 {
	if gf.set || gf.step == 0 || c.val.k != kNumber {
		return 1
	}
	var d float64 // how far v must move
	strict := false
	switch c.Op {
	case GreaterEq:
		d = c.val.num - v.num
	case Greater:
		d, strict = c.val.num-v.num, true
	case LessEq:
		d = v.num - c.val.num
	case Less:
		d, strict = v.num-c.val.num, true
	case Equals:
		d = math.Abs(c.val.num - v.num)
	default:
		return 1
	}
	x := d / gf.step
	x -= 1e-9 * max(1, math.Abs(x)) // round down near integers: never overestimate
	n := math.Ceil(x)
	if strict {
		n = math.Floor(x) + 1
	}
	return max(1, n)
}

package goap

import (
	"fmt"
	"math"
	"strings"
)

// heuristic estimates the cost still needed to satisfy a goal. It is
// admissible (it never overestimates) and consistent (along any action it
// drops by at most the action's cost), so A* with a closed set returns the
// cheapest plan. It is the larger of two lower bounds:
//
//   - per condition: an unsatisfied condition needs an action that can
//     make it hold (one that sets the fact to a satisfying value, or
//     moves a number in a direction that can help), so at least the
//     cheapest such action's cost. When no usable action sets the fact but
//     some increment or decrement it, a numeric condition needs at least
//     distance / largest step of them (the seed's "(64-4)/4 × cost").
//   - together: an action changes at most k of the goal's facts (k is the
//     most any usable action changes), so the unsatisfied facts need
//     ⌈unsatisfied / k⌉ actions, each costing at least the cheapest action
//     that changes a goal fact.
//
// A condition no usable action can make hold makes the estimate +Inf: the
// goal is unreachable from any state where it fails.
type heuristic struct {
	facts []goalFact
	k     int
	cmin  float64
}

type goalFact struct {
	fact    int
	conds   []goalCond
	set     bool    // some usable action sets the fact
	touched bool    // some usable action changes the fact
	up      float64 // largest increase by one usable action
	down    float64 // largest decrease by one usable action
}

type goalCond struct {
	c     *Condition
	cheap float64 // cheapest usable action that can make c hold; +Inf if none
}

// helps reports whether effect e can make c hold in some state.
func helps(c *Condition, e *Effect) bool {
	if e.Op == Set {
		return c.holds(e.val)
	}
	delta := e.val.num
	if e.Op == Dec {
		delta = -delta
	}
	switch c.Op {
	case Exists:
		return c.val.num != 0 // inc or dec makes an absent number present
	case Greater, GreaterEq:
		return delta > 0
	case Less, LessEq:
		return delta < 0
	}
	return delta != 0 // equals, ne
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
			h.facts = append(h.facts, goalFact{fact: c.fact})
		}
		h.facts[j].conds = append(h.facts[j].conds, goalCond{c: c, cheap: math.Inf(1)})
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
			gf.touched = true
			switch {
			case e.Op == Set:
				gf.set = true
			case (e.Op == Inc) == (e.val.num > 0):
				gf.up = max(gf.up, math.Abs(e.val.num))
			default:
				gf.down = max(gf.down, math.Abs(e.val.num))
			}
			for k := range gf.conds {
				if gc := &gf.conds[k]; helps(gc.c, e) {
					gc.cheap = min(gc.cheap, a.MinCost)
				}
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
		failing := false
		for k := range gf.conds {
			gc := &gf.conds[k]
			if gc.c.holds(v) {
				continue
			}
			failing = true
			n := gf.steps(gc.c, v)
			if math.IsInf(n, 1) || math.IsInf(gc.cheap, 1) {
				return math.Inf(1) // and not Inf × 0
			}
			per = max(per, n*gc.cheap)
		}
		if failing {
			unsat++
		}
	}
	if unsat == 0 {
		return 0
	}
	together := math.Ceil(float64(unsat)/float64(max(h.k, 1))) * h.cmin
	return max(per, together)
}

// steps is a lower bound of the actions changing gf needed to make the
// failing condition c hold, from value v; +Inf when increments and
// decrements are all there is and none goes the needed way.
func (gf *goalFact) steps(c *Condition, v value) float64 {
	if gf.set || c.val.k != kNumber || c.Op == NotEquals || c.Op == Exists {
		return 1
	}
	var d float64 // how far v must move, up (> 0) or down (< 0)
	switch c.Op {
	case GreaterEq, Greater:
		d = c.val.num - v.num
	case LessEq, Less:
		d = c.val.num - v.num
	case Equals:
		d = c.val.num - v.num
	}
	step := gf.up
	if d < 0 || (d == 0 && (c.Op == Less || c.Op == LessEq)) {
		d, step = -d, gf.down
	}
	if step == 0 {
		return math.Inf(1)
	}
	x := d / step
	x -= 1e-9 * max(1, math.Abs(x)) // round down near integers: never overestimate
	n := math.Ceil(x)
	if c.Op == Greater || c.Op == Less {
		n = math.Floor(x) + 1
	}
	return max(1, n)
}

// explain says, for each goal condition failing in s that no usable action
// can make hold, why, naming the disabled actions that could.
func (h *heuristic) explain(d *Domain, s []value, disabled []*Action) []string {
	var out []string
	for i := range h.facts {
		gf := &h.facts[i]
		name := d.Facts[gf.fact].Name
		for k := range gf.conds {
			gc := &gf.conds[k]
			if gc.c.holds(s[gf.fact]) || !math.IsInf(gf.steps(gc.c, s[gf.fact]), 1) && !math.IsInf(gc.cheap, 1) {
				continue
			}
			msg := "no usable action can make " + gc.c.String()
			switch {
			case !gf.touched:
				msg = "no usable action changes " + name
			case !math.IsInf(gc.cheap, 1) && gc.c.val.num > s[gf.fact].num:
				msg = fmt.Sprintf("no usable action increases %s, as %s needs", name, gc.c)
			case !math.IsInf(gc.cheap, 1):
				msg = fmt.Sprintf("no usable action decreases %s, as %s needs", name, gc.c)
			}
			var off []string
			for _, a := range disabled {
				for e := range a.Effects {
					if a.Effects[e].fact == gf.fact && helps(gc.c, &a.Effects[e]) {
						off = append(off, fmt.Sprintf("%s (skill %s)", a.Name, a.Skill))
						break
					}
				}
			}
			if len(off) > 0 {
				msg += "; disabled: " + strings.Join(off, ", ")
			}
			out = append(out, msg)
			if !gf.touched {
				break
			}
		}
	}
	return out
}

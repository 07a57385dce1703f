package goap

import (
	"fmt"
	"math"
	"strings"
)

// heuristic estimates the cost still needed to satisfy a goal. It is
// admissible (it never overestimates) and consistent (along any action it
// drops by at most the action's cost), so A* with a closed set returns the
// cheapest plan; docs/goap.md gives the argument. It is the larger of two
// lower bounds over the goal's items, an item being a fact or a derived
// fact that goal conditions test:
//
//   - per condition: an unsatisfied condition needs an action that can
//     make it hold (one that sets the fact to a satisfying value, or
//     moves a number in a direction that can help; for a derived fact,
//     one that changes a fact it reads), so at least the cheapest such
//     action's cost. When no usable action sets the fact but some
//     increment or decrement it, a numeric condition needs at least
//     distance / largest step of them (the seed's "(64-4)/4 × cost").
//   - together: an action changes at most k of the goal's items (k is the
//     most any usable action changes; it changes a derived item when it
//     changes a fact the item reads), so the unsatisfied items need
//     ⌈unsatisfied / k⌉ actions, each costing at least the cheapest action
//     that changes a goal item.
//
// Preconditions, requires expressions and costs above MinCost only make
// plans dearer, so leaving them out keeps both bounds below the true
// cost. A condition no usable action can make hold makes the estimate
// +Inf: the goal is unreachable from any state where it fails.
type heuristic struct {
	facts   []goalFact
	k       int
	cmin    float64
	derived bool // some item is a derived fact
	// single is the only goal item when it is a bool that is always
	// present or a number, whose bound the search reads off byBool or
	// memo; the together bound is then cmin.
	single *goalFact
}

// goalFact is a goal item: the conditions on one fact or derived fact.
type goalFact struct {
	fact    int // slot: a fact, or len(Facts) + a derived fact
	conds   []goalCond
	derived bool
	reads   []bool  // for a derived item: the facts its expression reads
	set     bool    // some usable action sets the fact
	touched bool    // some usable action changes the fact (or one it reads)
	up      float64 // largest increase by one usable action
	down    float64 // largest decrease by one usable action

	// Where the fact is in the search's packed states, and for a bool
	// fact that is always present, bound's answers for false and true
	// (per < 0: no condition fails), so the search reads them off.
	at     loc
	byBool [2]float64
	// memo remembers bound's answers for recent values of a number fact,
	// by the value's bits (a search meets the same few values often).
	memo *[memoSize]memoEntry
}

const memoSize = 64

type memoEntry struct {
	bits uint64 // absentNum: empty
	per  float64
}

// numBound is bound for a present number of bits x, remembered; per < 0
// means no condition fails.
func (gf *goalFact) numBound(x uint64) float64 {
	m := &gf.memo[(x^x>>29^x>>47)%memoSize]
	if m.bits == x {
		return m.per
	}
	failing, per := gf.bound(value{k: kNumber, num: math.Float64frombits(x)})
	if !failing {
		per = -1
	}
	m.bits, m.per = x, per
	return per
}

// place tells the heuristic where its facts are in packed states.
func (h *heuristic) place(l *layout) {
	defer func() {
		if len(h.facts) == 1 && (h.facts[0].memo != nil || h.facts[0].at.kind == bitLoc && !l.presence) {
			h.single = &h.facts[0]
		}
	}()
	for i := range h.facts {
		gf := &h.facts[i]
		if gf.derived {
			continue
		}
		gf.at = l.locs[gf.fact]
		if gf.at.kind == numLoc {
			gf.memo = new([memoSize]memoEntry)
			for i := range gf.memo {
				gf.memo[i].bits = absentNum
			}
		}
		if gf.at.kind == bitLoc && !l.presence {
			for b := range 2 {
				failing, per := gf.bound(boolValue(b == 1))
				if !failing {
					per = -1
				}
				gf.byBool[b] = per
			}
		}
	}
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

func newHeuristic(d *Domain, g *Goal, usable []*Action) *heuristic {
	h := &heuristic{cmin: math.Inf(1)}
	at := map[int]int{}
	for i := range g.Conditions {
		c := &g.Conditions[i]
		j, ok := at[c.fact]
		if !ok {
			j = len(h.facts)
			at[c.fact] = j
			gf := goalFact{fact: c.fact}
			if c.fact >= len(d.Facts) {
				gf.derived, h.derived = true, true
				gf.reads = make([]bool, len(d.Facts))
				for _, r := range d.Derived[c.fact-len(d.Facts)].x.reads {
					if r < len(d.Facts) {
						gf.reads[r] = true
					}
				}
			}
			h.facts = append(h.facts, gf)
		}
		h.facts[j].conds = append(h.facts[j].conds, goalCond{c: c, cheap: math.Inf(1)})
	}
	for _, a := range usable {
		touched := 0
		for j := range h.facts {
			gf := &h.facts[j]
			hit := false
			for i := range a.Effects {
				e := &a.Effects[i]
				if gf.derived {
					hit = hit || gf.reads[e.fact]
					continue
				}
				if e.fact != gf.fact {
					continue
				}
				hit = true
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
			if !hit {
				continue
			}
			touched++
			gf.touched = true
			if gf.derived {
				for k := range gf.conds {
					gf.conds[k].cheap = min(gf.conds[k].cheap, a.MinCost)
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

// bound returns whether a condition of gf fails at value v, and the
// largest per-condition lower bound of the failing ones (+Inf when one
// cannot be made to hold).
func (gf *goalFact) bound(v value) (failing bool, per float64) {
	for k := range gf.conds {
		gc := &gf.conds[k]
		if gc.c.holds(v) {
			continue
		}
		failing = true
		n := gf.steps(gc.c, v)
		if math.IsInf(n, 1) || math.IsInf(gc.cheap, 1) {
			return true, math.Inf(1) // and not Inf × 0
		}
		if b := n * gc.cheap; b > per {
			per = b
		}
	}
	return failing, per
}

// combine is the estimate from the count of failing items and the largest
// per-condition bound.
func (h *heuristic) combine(unsat int, per float64) float64 {
	if unsat == 0 {
		return 0
	}
	together := h.cmin // ⌈unsat / k⌉ is 1 when unsat <= k
	if unsat > h.k {
		together = math.Ceil(float64(unsat)/float64(h.k)) * h.cmin
	}
	if per > together {
		return per
	}
	return together
}

// estimate returns the lower bound for state vector s; 0 exactly when the
// goal's conditions hold.
func (h *heuristic) estimate(s []value) float64 {
	unsat, per := 0, 0.0
	for i := range h.facts {
		failing, p := h.facts[i].bound(s[h.facts[i].fact])
		if math.IsInf(p, 1) {
			return p
		}
		if failing {
			unsat++
			per = max(per, p)
		}
	}
	return h.combine(unsat, per)
}

// steps is a lower bound of the actions changing gf needed to make the
// failing condition c hold, from value v; +Inf when increments and
// decrements are all there is and none goes the needed way.
func (gf *goalFact) steps(c *Condition, v value) float64 {
	if gf.set || gf.derived || c.val.k != kNumber || c.Op == NotEquals || c.Op == Exists {
		return 1
	}
	d := c.val.num - v.num // how far v must move, up (> 0) or down (< 0)
	step := gf.up
	if d < 0 || (d == 0 && (c.Op == Less || c.Op == LessEq)) {
		d, step = -d, gf.down
	}
	if step == 0 {
		return math.Inf(1)
	}
	if small(d) && small(step) && small(c.val.num) {
		// Whole numbers: the increments add up exactly, so count exactly.
		dd, ss := int64(d), int64(step)
		n := (dd + ss - 1) / ss // ⌈d / step⌉
		if (c.Op == Greater || c.Op == Less) && dd%ss == 0 {
			n++ // reaching the bound is not enough
		}
		return float64(max(1, n))
	}
	x := d / step
	x -= 1e-9 * max(1, math.Abs(x)) // round down near integers: never overestimate
	n := math.Ceil(x)
	if c.Op == Greater || c.Op == Less {
		n = math.Floor(x) + 1
	}
	return max(1, n)
}

// small reports whether f is a whole number of magnitude below 2^26,
// whose sums and quotients in float64 are exact.
func small(f float64) bool { return f == math.Trunc(f) && math.Abs(f) < 1<<26 }

// explain says, for each goal condition failing in s that no usable action
// can make hold, why, naming the disabled actions that could.
func (h *heuristic) explain(d *Domain, s []value, disabled []*Action) []string {
	var out []string
	for i := range h.facts {
		gf := &h.facts[i]
		name := d.slotName(gf.fact)
		for k := range gf.conds {
			gc := &gf.conds[k]
			if gc.c.holds(s[gf.fact]) || !math.IsInf(gf.steps(gc.c, s[gf.fact]), 1) && !math.IsInf(gc.cheap, 1) {
				continue
			}
			msg := "no usable action can make " + gc.c.String()
			switch {
			case gf.derived:
				var reads []string
				for f, r := range gf.reads {
					if r {
						reads = append(reads, d.Facts[f].Name)
					}
				}
				msg = fmt.Sprintf("no usable action changes a fact derived fact %s reads (%s)", name, strings.Join(reads, ", "))
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
					ef := &a.Effects[e]
					if gf.derived && gf.reads[ef.fact] || !gf.derived && ef.fact == gf.fact && helps(gc.c, ef) {
						off = append(off, fmt.Sprintf("%s (skill %s)", a.Name, a.Skill))
						break
					}
				}
			}
			if len(off) > 0 {
				msg += "; disabled: " + strings.Join(off, ", ")
			}
			out = append(out, msg)
			if !gf.touched || gf.derived {
				break
			}
		}
	}
	return out
}

package goap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The A* planner is checked against a naive uniform-cost search on small
// random domains: same optimal cost, or both find no plan. The naive search
// has its own condition, effect and cost code, written from the domain
// format's rules, and explores every reachable state.

// naive domain, as generated.
type nCond struct {
	fact string
	op   string
	val  any
}

type nEffect struct {
	fact string
	op   string // set, inc, dec
	val  any
}

type nAction struct {
	name   string
	pre    []nCond
	req    []nCond // requires: one of them must hold (an or)
	eff    []nEffect
	cost   float64
	coef   float64 // cost is coef*|costOf| + cost when costOf != ""
	costOf string  // a number fact or a derived number
	min    float64
}

// nDerived is a derived fact: the sum of number facts, or a bool that is
// the or (any) or the and of conditions on facts.
type nDerived struct {
	name  string
	sum   []string
	any   bool
	conds []nCond
}

type nDomain struct {
	defaults map[string]any // facts with defaults; "opt" has none
	derived  []nDerived
	actions  []nAction
	goal     []nCond // none: a goal without conditions
}

var (
	boolFacts = []string{"b0", "b1", "b2"}
	numFacts  = []string{"n0", "n1"}
	strValues = []string{"x", "y", "z"}
)

func genCond(t *rapid.T, label string) nCond {
	switch rapid.IntRange(0, 3).Draw(t, label+"-kind") {
	case 0:
		return nCond{fact: rapid.SampledFrom(boolFacts).Draw(t, label+"-fact"), op: rapid.SampledFrom([]string{"equals", "ne"}).Draw(t, label+"-op"),
			val: rapid.Bool().Draw(t, label+"-val")}
	case 1:
		return nCond{fact: rapid.SampledFrom(numFacts).Draw(t, label+"-fact"), op: rapid.SampledFrom([]string{"equals", "ne", "lt", "lte", "gt", "gte"}).Draw(t, label+"-op"),
			val: float64(rapid.IntRange(-1, 4).Draw(t, label+"-val"))}
	case 2:
		return nCond{fact: "s", op: rapid.SampledFrom([]string{"equals", "ne"}).Draw(t, label+"-op"), val: rapid.SampledFrom(strValues).Draw(t, label+"-val")}
	default:
		if rapid.Bool().Draw(t, label+"-exists") {
			return nCond{fact: "opt", op: "exists", val: rapid.Bool().Draw(t, label+"-val")}
		}
		return nCond{fact: "opt", op: rapid.SampledFrom([]string{"gte", "equals", "ne"}).Draw(t, label+"-op"), val: float64(rapid.IntRange(0, 3).Draw(t, label+"-val"))}
	}
}

func genConds(t *rapid.T, label string, lo, hi int) []nCond {
	var out []nCond
	seen := map[string]bool{}
	for i := range rapid.IntRange(lo, hi).Draw(t, label+"-n") {
		c := genCond(t, fmt.Sprintf("%s%d", label, i))
		if seen[c.fact+c.op] {
			continue
		}
		seen[c.fact+c.op] = true
		out = append(out, c)
	}
	return out
}

func genEffect(t *rapid.T, label string) nEffect {
	switch rapid.IntRange(0, 3).Draw(t, label+"-kind") {
	case 0:
		return nEffect{fact: rapid.SampledFrom(boolFacts).Draw(t, label+"-fact"), op: "set", val: rapid.Bool().Draw(t, label+"-val")}
	case 1:
		f := rapid.SampledFrom(append(slices.Clone(numFacts), "opt")).Draw(t, label+"-fact")
		op := rapid.SampledFrom([]string{"set", "inc", "dec"}).Draw(t, label+"-op")
		if op == "set" {
			return nEffect{fact: f, op: op, val: float64(rapid.IntRange(0, 3).Draw(t, label+"-val"))}
		}
		return nEffect{fact: f, op: op, val: float64(rapid.IntRange(1, 2).Draw(t, label+"-val"))}
	default:
		return nEffect{fact: "s", op: "set", val: rapid.SampledFrom(strValues).Draw(t, label+"-val")}
	}
}

func genDomain(t *rapid.T) nDomain {
	d := nDomain{defaults: map[string]any{"s": rapid.SampledFrom(strValues).Draw(t, "s0")}}
	for _, f := range boolFacts {
		d.defaults[f] = rapid.Bool().Draw(t, f)
	}
	for _, f := range numFacts {
		d.defaults[f] = float64(rapid.IntRange(0, 3).Draw(t, f))
	}
	for i := range rapid.IntRange(1, 7).Draw(t, "actions") {
		label := fmt.Sprintf("a%d", i)
		a := nAction{name: label, pre: genConds(t, label+"pre", 0, 2), cost: float64(rapid.IntRange(0, 5).Draw(t, label+"-cost"))}
		seen := map[string]bool{}
		for j := range rapid.IntRange(1, 3).Draw(t, label+"-effects") {
			e := genEffect(t, fmt.Sprintf("%se%d", label, j))
			if seen[e.fact] {
				continue
			}
			seen[e.fact] = true
			a.eff = append(a.eff, e)
			// Keep the state space finite: numbers only move within a band.
			if e.op == "inc" && !hasCond(a.pre, e.fact, "lt") {
				a.pre = append(a.pre, nCond{fact: e.fact, op: "lt", val: 4.0})
			}
			if e.op == "dec" && !hasCond(a.pre, e.fact, "gt") {
				a.pre = append(a.pre, nCond{fact: e.fact, op: "gt", val: -2.0})
			}
		}
		if rapid.Bool().Draw(t, label+"-dynamic") {
			a.costOf = rapid.SampledFrom(numFacts).Draw(t, label+"-costOf")
			a.coef = float64(rapid.IntRange(0, 2).Draw(t, label+"-coef"))
			// cost = coef*|n| + cost >= cost, whatever n is.
			a.min = float64(rapid.IntRange(0, int(a.cost)).Draw(t, label+"-min"))
		}
		d.actions = append(d.actions, a)
	}
	d.goal = genConds(t, "goal", 1, 3)
	return d
}

func hasCond(cs []nCond, fact, op string) bool {
	for _, c := range cs {
		if c.fact == fact && c.op == op {
			return true
		}
	}
	return false
}

// doc renders the domain in the JSON format.
func (d nDomain) doc() []byte {
	conds := func(cs []nCond) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, c := range cs {
			if out[c.fact] == nil {
				out[c.fact] = map[string]any{}
			}
			out[c.fact][c.op] = c.val
		}
		return out
	}
	facts := map[string]any{"opt": map[string]any{"type": "number"}}
	for f, v := range d.defaults {
		facts[f] = v
	}
	var actions []map[string]any
	for _, a := range d.actions {
		eff := map[string]any{}
		for _, e := range a.eff {
			eff[e.fact] = map[string]any{e.op: e.val}
		}
		m := map[string]any{"name": a.name, "preconditions": conds(a.pre), "effects": eff, "cost": a.cost}
		if a.costOf != "" {
			m["cost"] = fmt.Sprintf("%v * abs(%s) + %v", a.coef, a.costOf, a.cost)
			m["minCost"] = a.min
		}
		if len(a.req) > 0 {
			m["requires"] = exprOf(a.req, " || ")
		}
		actions = append(actions, m)
	}
	doc := map[string]any{"name": "random", "facts": facts, "actions": actions,
		"goals": []any{map[string]any{"name": "g", "conditions": conds(d.goal)}}}
	if len(d.derived) > 0 {
		derived := map[string]any{}
		for _, df := range d.derived {
			switch {
			case df.sum != nil:
				derived[df.name] = strings.Join(df.sum, " + ")
			case df.any:
				derived[df.name] = exprOf(df.conds, " || ")
			default:
				derived[df.name] = exprOf(df.conds, " && ")
			}
		}
		doc["derived"] = derived
	}
	b, _ := json.Marshal(doc)
	return b
}

// exprOf writes conditions as an expression joined by op.
func exprOf(cs []nCond, op string) string {
	sym := map[string]string{"equals": "==", "ne": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
	var parts []string
	for _, c := range cs {
		v := fmt.Sprintf("%v", c.val)
		switch x := c.val.(type) {
		case string:
			v = fmt.Sprintf("%q", x)
		case float64:
			v = fmt.Sprintf("%.1f", x)
		}
		parts = append(parts, fmt.Sprintf("(%s %s %s)", c.fact, sym[c.op], v))
	}
	return strings.Join(parts, op)
}

// ext is state s with the derived facts computed.
func (d nDomain) ext(s map[string]any) map[string]any {
	if len(d.derived) == 0 {
		return s
	}
	out := maps.Clone(s)
	for _, df := range d.derived {
		switch {
		case df.sum != nil:
			sum := 0.0
			for _, f := range df.sum {
				sum += s[f].(float64)
			}
			out[df.name] = sum
		case df.any:
			v := false
			for _, c := range df.conds {
				v = v || naiveHolds(c, s)
			}
			out[df.name] = v
		default:
			v := true
			for _, c := range df.conds {
				v = v && naiveHolds(c, s)
			}
			out[df.name] = v
		}
	}
	return out
}

// applies reports whether a applies in s (derived facts computed).
func (d nDomain) applies(a nAction, s map[string]any) bool {
	x := d.ext(s)
	if !naiveAll(a.pre, x) {
		return false
	}
	if len(a.req) == 0 {
		return true
	}
	for _, c := range a.req {
		if naiveHolds(c, x) {
			return true
		}
	}
	return false
}

func naiveHolds(c nCond, s map[string]any) bool {
	v, ok := s[c.fact]
	switch {
	case c.op == "exists":
		return ok == c.val.(bool)
	case !ok:
		return c.op == "ne"
	case c.op == "equals":
		return v == c.val
	case c.op == "ne":
		return v != c.val
	}
	x, y := v.(float64), c.val.(float64)
	switch c.op {
	case "lt":
		return x < y
	case "lte":
		return x <= y
	case "gt":
		return x > y
	}
	return x >= y
}

func naiveAll(cs []nCond, s map[string]any) bool {
	for _, c := range cs {
		if !naiveHolds(c, s) {
			return false
		}
	}
	return true
}

func naiveApply(a nAction, s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		out[k] = v
	}
	for _, e := range a.eff {
		switch e.op {
		case "set":
			out[e.fact] = e.val
		case "inc":
			n, _ := out[e.fact].(float64)
			out[e.fact] = n + e.val.(float64)
		case "dec":
			n, _ := out[e.fact].(float64)
			out[e.fact] = n - e.val.(float64)
		}
	}
	return out
}

func (d nDomain) cost(a nAction, s map[string]any) float64 {
	if a.costOf == "" {
		return a.cost
	}
	return a.coef*math.Abs(d.ext(s)[a.costOf].(float64)) + a.cost
}

func naiveKey(s map[string]any) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%v;", k, s[k])
	}
	return b.String()
}

// naiveCheapest is uniform-cost search with a linear scan for the minimum:
// the cost of the cheapest plan, or false. A goal without conditions
// needs one action, any.
func naiveCheapest(d nDomain, start map[string]any) (float64, bool) {
	if len(d.goal) == 0 {
		best, ok := 0.0, false
		for _, a := range d.actions {
			if c := d.cost(a, start); d.applies(a, start) && (!ok || c < best) {
				best, ok = c, true
			}
		}
		return best, ok
	}
	type item struct {
		s map[string]any
		g float64
	}
	best := map[string]float64{naiveKey(start): 0}
	done := map[string]bool{}
	open := []item{{start, 0}}
	for len(open) > 0 {
		mi := 0
		for i := range open {
			if open[i].g < open[mi].g {
				mi = i
			}
		}
		it := open[mi]
		open = slices.Delete(open, mi, mi+1)
		k := naiveKey(it.s)
		if done[k] {
			continue
		}
		done[k] = true
		if naiveAll(d.goal, d.ext(it.s)) {
			return it.g, true
		}
		for _, a := range d.actions {
			if !d.applies(a, it.s) {
				continue
			}
			next := naiveApply(a, it.s)
			g := it.g + d.cost(a, it.s)
			nk := naiveKey(next)
			if b, ok := best[nk]; ok && b <= g {
				continue
			}
			best[nk] = g
			open = append(open, item{next, g})
		}
	}
	return 0, false
}

func TestPropertyPlanIsOptimal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { checkOptimal(t, genDomain(t)) })
}

// TestPropertyExpressiveIsOptimal is the same check on domains with
// derived facts (in conditions, requires and costs), requires
// expressions (preconditions with or) and goals without conditions.
func TestPropertyExpressiveIsOptimal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { checkOptimal(t, genExpressive(t)) })
}

func checkOptimal(t *rapid.T, nd nDomain) {
	{
		doc := nd.doc()
		d, err := Decode(doc)
		if err != nil {
			t.Fatalf("generated domain does not decode: %v\n%s", err, doc)
		}
		start := map[string]any{}
		for f, v := range nd.defaults {
			start[f] = v
		}
		if rapid.Bool().Draw(t, "opt-present") {
			start["opt"] = float64(rapid.IntRange(0, 2).Draw(t, "opt"))
		}
		want, reachable := naiveCheapest(nd, start)
		r, err := Plan(context.Background(), d, State(start), "g", Options{MaxNodes: -1})
		if !reachable {
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("naive search finds no plan; Plan: %v, %v\n%s", r, err, doc)
			}
			return
		}
		if err != nil {
			t.Fatalf("naive search finds a plan of cost %v; Plan: %v\n%s", want, err, doc)
		}
		if math.Abs(r.Cost-want) > 1e-9 {
			t.Fatalf("Plan cost %v %v, naive cheapest %v\n%s", r.Cost, actionNames(r), want, doc)
		}
		// The plan is executable step by step and reaches the goal.
		s := start
		total := 0.0
		for i, step := range r.Steps {
			var a nAction
			for _, x := range nd.actions {
				if x.name == step.Action {
					a = x
				}
			}
			if !nd.applies(a, s) {
				t.Fatalf("step %d %s: preconditions fail in %v\n%s", i+1, a.name, s, doc)
			}
			if c := nd.cost(a, s); c != step.Cost {
				t.Fatalf("step %d %s: cost %v, naive %v", i+1, a.name, step.Cost, c)
			}
			total += step.Cost
			s = naiveApply(a, s)
			if naiveKey(s) != naiveKey(step.State) {
				t.Fatalf("step %d %s: state %v, naive %v", i+1, a.name, step.State, s)
			}
		}
		if !naiveAll(nd.goal, nd.ext(s)) || len(nd.goal) == 0 && len(r.Steps) != 1 {
			t.Fatalf("plan %v ends in %v, which misses the goal\n%s", actionNames(r), s, doc)
		}
	}
}

// genExpressive adds to genDomain's domains derived facts (a sum of
// numbers, an or and an and of conditions), requires expressions, costs
// over derived numbers, conditions on derived facts, and sometimes a goal
// without conditions.
func genExpressive(t *rapid.T) nDomain {
	d := genDomain(t)
	exprCond := func(label string) nCond {
		for {
			c := genCond(t, label)
			if c.fact != "opt" { // expressions read facts that are never absent
				return c
			}
		}
	}
	conds := func(label string) []nCond {
		var out []nCond
		for i := range rapid.IntRange(1, 3).Draw(t, label+"-n") {
			out = append(out, exprCond(fmt.Sprintf("%s%d", label, i)))
		}
		return out
	}
	d.derived = []nDerived{
		{name: "dsum", sum: slices.Clone(numFacts)},
		{name: "dany", any: true, conds: conds("dany")},
		{name: "dall", conds: conds("dall")},
	}
	derivedCond := func(label string) nCond {
		switch rapid.IntRange(0, 2).Draw(t, label+"-which") {
		case 0:
			return nCond{fact: "dsum", op: rapid.SampledFrom([]string{"gte", "lt", "equals"}).Draw(t, label+"-op"), val: float64(rapid.IntRange(0, 6).Draw(t, label+"-val"))}
		case 1:
			return nCond{fact: "dany", op: "equals", val: rapid.Bool().Draw(t, label+"-val")}
		}
		return nCond{fact: "dall", op: rapid.SampledFrom([]string{"equals", "ne"}).Draw(t, label+"-op"), val: rapid.Bool().Draw(t, label+"-val")}
	}
	for i := range d.actions {
		a := &d.actions[i]
		label := fmt.Sprintf("x%d", i)
		if rapid.Bool().Draw(t, label+"-req") {
			a.req = conds(label + "req")
		}
		if rapid.IntRange(0, 3).Draw(t, label+"-dpre") == 0 {
			c := derivedCond(label + "dpre")
			if !hasCond(a.pre, c.fact, c.op) {
				a.pre = append(a.pre, c)
			}
		}
		if a.costOf != "" && rapid.Bool().Draw(t, label+"-dcost") {
			a.costOf = "dsum"
		}
	}
	switch rapid.IntRange(0, 4).Draw(t, "goal-kind") {
	case 0:
		d.goal = nil
	case 1, 2:
		if c := derivedCond("gd"); !hasCond(d.goal, c.fact, c.op) {
			d.goal = append(d.goal, c)
		}
	}
	return d
}

// TestPropertyHeuristic checks the heuristic in every state reachable
// from the start of random domains, plain and expressive: admissible (at
// most the cheapest plan's cost from the state, by the naive search) and
// consistent (along every action it drops by at most the action's cost);
// the search's packed-state estimate gives the same number as the
// estimate on state vectors.
func TestPropertyHeuristic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nd := genDomain(t)
		if rapid.Bool().Draw(t, "expressive") {
			nd = genExpressive(t)
		}
		if len(nd.goal) == 0 {
			return // planned without the heuristic
		}
		doc := nd.doc()
		d, err := Decode(doc)
		if err != nil {
			t.Fatalf("generated domain does not decode: %v\n%s", err, doc)
		}
		start := maps.Clone(nd.defaults)
		if rapid.Bool().Draw(t, "opt-present") {
			start["opt"] = float64(rapid.IntRange(0, 2).Draw(t, "opt"))
		}
		p := NewPlanner(d)
		p.prob = p.problemFor(d.Goal("g"), Options{})
		estimate := func(s map[string]any) float64 {
			v, err := d.vector(State(s))
			if err != nil {
				t.Fatal(err)
			}
			h := p.prob.h.estimate(v)
			copy(p.start, v)
			p.reset(Options{})
			w := make([]uint64, p.prob.lay.words)
			p.pack(v, w)
			if hp, err := p.estimate(w); err != nil || hp != h && !(math.IsInf(hp, 1) && math.IsInf(h, 1)) {
				t.Fatalf("state %v: packed estimate %v (%v), vector estimate %v\n%s", s, hp, err, h, doc)
			}
			return h
		}
		seen := map[string]bool{naiveKey(start): true}
		queue := []map[string]any{start}
		for len(queue) > 0 && len(seen) < 300 {
			s := queue[0]
			queue = queue[1:]
			h := estimate(s)
			if want, ok := naiveCheapest(nd, s); ok && h > want+1e-9 {
				t.Fatalf("state %v: estimate %v, but a plan costs %v\n%s", s, h, want, doc)
			} else if !ok && !math.IsInf(h, 1) && naiveAll(nd.goal, nd.ext(s)) {
				t.Fatalf("state %v satisfies the goal but the naive search finds no plan", s)
			}
			for _, a := range nd.actions {
				if !nd.applies(a, s) {
					continue
				}
				next := naiveApply(a, s)
				if hn := estimate(next); !math.IsInf(h, 1) && h > nd.cost(a, s)+hn+1e-9 {
					t.Fatalf("action %s from %v (estimate %v) to %v (estimate %v) costs %v: not consistent\n%s",
						a.name, s, h, next, hn, nd.cost(a, s), doc)
				}
				if k := naiveKey(next); !seen[k] {
					seen[k] = true
					queue = append(queue, next)
				}
			}
		}
	})
}

// genMonotone makes domains where direction pruning bites: n0 is only
// ever wanted high (gt, gte) and n1 only low (lt, lte), and actions move
// them both ways, so some actions only move them the wrong way. Counters
// have no bounds, so costs are at least 1 and plans are sought up to
// monotoneMaxCost.
func genMonotone(t *rapid.T) nDomain {
	d := nDomain{defaults: map[string]any{"b0": rapid.Bool().Draw(t, "b0"), "b1": rapid.Bool().Draw(t, "b1"),
		"n0": float64(rapid.IntRange(0, 3).Draw(t, "n0")), "n1": float64(rapid.IntRange(0, 3).Draw(t, "n1"))}}
	cond := func(label string) nCond {
		switch rapid.IntRange(0, 2).Draw(t, label+"-kind") {
		case 0:
			return nCond{fact: "n0", op: rapid.SampledFrom([]string{"gt", "gte"}).Draw(t, label+"-op"), val: float64(rapid.IntRange(-1, 5).Draw(t, label+"-val"))}
		case 1:
			return nCond{fact: "n1", op: rapid.SampledFrom([]string{"lt", "lte"}).Draw(t, label+"-op"), val: float64(rapid.IntRange(-2, 4).Draw(t, label+"-val"))}
		}
		return nCond{fact: rapid.SampledFrom([]string{"b0", "b1"}).Draw(t, label+"-fact"), op: "equals", val: rapid.Bool().Draw(t, label+"-val")}
	}
	conds := func(label string, lo, hi int) []nCond {
		var out []nCond
		for i := range rapid.IntRange(lo, hi).Draw(t, label+"-n") {
			c := cond(fmt.Sprintf("%s%d", label, i))
			if !hasCond(out, c.fact, c.op) {
				out = append(out, c)
			}
		}
		return out
	}
	for i := range rapid.IntRange(1, 6).Draw(t, "actions") {
		label := fmt.Sprintf("m%d", i)
		a := nAction{name: label, pre: conds(label+"pre", 0, 2), cost: float64(rapid.IntRange(1, 3).Draw(t, label+"-cost"))}
		seen := map[string]bool{}
		for j := range rapid.IntRange(1, 3).Draw(t, label+"-effects") {
			el := fmt.Sprintf("%se%d", label, j)
			var e nEffect
			switch f := rapid.SampledFrom([]string{"n0", "n1", "b0", "b1"}).Draw(t, el+"-fact"); f {
			case "b0", "b1":
				e = nEffect{fact: f, op: "set", val: rapid.Bool().Draw(t, el+"-val")}
			default:
				op := rapid.SampledFrom([]string{"inc", "dec", "dec", "set"}).Draw(t, el+"-op")
				e = nEffect{fact: f, op: op, val: float64(rapid.IntRange(1, 2).Draw(t, el+"-val"))}
			}
			if !seen[e.fact] {
				seen[e.fact] = true
				a.eff = append(a.eff, e)
			}
		}
		d.actions = append(d.actions, a)
	}
	d.goal = conds("goal", 1, 2)
	return d
}

const monotoneMaxCost = 12

// TestPropertyDirectionPruning checks plans on genMonotone's domains
// against the naive search over all their actions, so the actions that
// direction pruning drops are shown never to be needed.
func TestPropertyDirectionPruning(t *testing.T) {
	dropped := 0
	rapid.Check(t, func(t *rapid.T) {
		nd := genMonotone(t)
		doc := nd.doc()
		d, err := Decode(doc)
		if err != nil {
			t.Fatalf("generated domain does not decode: %v\n%s", err, doc)
		}
		g := d.Goal("g")
		if _, kept := relevance(d, g, d.Actions); func() bool { out, _ := relevant(d, g, d.Actions); return len(out) < len(kept) }() {
			dropped++
		}
		want, reachable := naiveWithin(nd, maps.Clone(nd.defaults), monotoneMaxCost)
		r, err := Plan(context.Background(), d, nil, "g", Options{MaxNodes: -1, MaxCost: monotoneMaxCost})
		switch {
		case !reachable && !errors.Is(err, ErrUnreachable):
			t.Fatalf("no plan within %d by the naive search; Plan: %v, %v\n%s", monotoneMaxCost, r, err, doc)
		case reachable && err != nil:
			t.Fatalf("the naive search finds a plan of cost %v; Plan: %v\n%s", want, err, doc)
		case reachable && math.Abs(r.Cost-want) > 1e-9:
			t.Fatalf("Plan cost %v %v, naive cheapest %v\n%s", r.Cost, actionNames(r), want, doc)
		}
	})
	t.Logf("direction pruning dropped actions in %d domains", dropped)
	if dropped == 0 {
		t.Error("no domain had an action dropped: the generator does not test the pruning")
	}
}

// naiveWithin is naiveCheapest for spaces without bounds: plans costing
// at most maxCost, with every action costing at least 1.
func naiveWithin(d nDomain, start map[string]any, maxCost float64) (float64, bool) {
	type item struct {
		s map[string]any
		g float64
	}
	best := map[string]float64{naiveKey(start): 0}
	done := map[string]bool{}
	open := []item{{start, 0}}
	for len(open) > 0 {
		mi := 0
		for i := range open {
			if open[i].g < open[mi].g {
				mi = i
			}
		}
		it := open[mi]
		open = slices.Delete(open, mi, mi+1)
		k := naiveKey(it.s)
		if done[k] {
			continue
		}
		done[k] = true
		if naiveAll(d.goal, it.s) {
			return it.g, true
		}
		for _, a := range d.actions {
			if !d.applies(a, it.s) {
				continue
			}
			next := naiveApply(a, it.s)
			g := it.g + d.cost(a, it.s)
			if g > maxCost {
				continue
			}
			if b, ok := best[naiveKey(next)]; ok && b <= g {
				continue
			}
			best[naiveKey(next)] = g
			open = append(open, item{next, g})
		}
	}
	return 0, false
}

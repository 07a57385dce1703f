package goap

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"
)

// DefaultMaxNodes is the node budget when Options.MaxNodes is 0.
const DefaultMaxNodes = 100_000

// DefaultMaxMemory is the memory budget when Options.MaxMemory is 0.
const DefaultMaxMemory int64 = 256 << 20

// Options configure one Plan call. The zero value plans with every action
// and the default node budget.
type Options struct {
	// MaxNodes caps the states the search expands (takes off its open
	// list). 0 means DefaultMaxNodes; negative means no limit, which only
	// terminates on finite state spaces.
	MaxNodes int
	// MaxMemory caps the bytes the search holds: every state generated
	// (each expansion may generate one per action, so this bounds what
	// MaxNodes alone does not), its node, its open-list entry and its key.
	// 0 means DefaultMaxMemory; negative means no limit.
	MaxMemory int64
	// MaxCost, if positive, is the most a plan may cost. States that
	// cannot lead to a cheaper plan are not expanded.
	MaxCost float64
	// Disabled, if set, is asked once per action with the action's skill;
	// actions whose skill it rejects are not used. The planner service
	// passes the request's disabled skills and the skills no worker serves.
	Disabled func(skill string) bool
}

// Result is a plan: the cheapest sequence of actions that reaches the goal.
type Result struct {
	Domain string
	Goal   string
	// Start is the state planned from, as Domain.Normalize gives it.
	Start State
	Steps []Step
	Cost  float64 // the sum of the steps' costs
	Stats Stats
}

// Step is one action of a plan.
type Step struct {
	Action string
	Skill  string
	// Description is the action's description, or its name.
	Description string
	// Input is the action's input with its templates expanded in the state
	// the step starts from.
	Input json.RawMessage
	Cost  float64
	// State is the predicted state after the step.
	State State
}

// Stats describe the work of one search.
type Stats struct {
	Actions   int // actions searched with: not disabled and relevant to the goal
	Expanded  int // states taken off the open list and expanded
	Generated int // successor states created
}

// node is one state reached in the search.
type node struct {
	parent int32   // index in search.nodes; -1 for the start
	action int32   // index in search.usable
	seen   int32   // index in search.seen of the node's state key
	g      float64 // cost from the start
	cost   float64 // the action's cost
	state  []value
}

// entry is the open list's element. Ties on f go to the smaller h (the
// state that looks closer to the goal), then to the node created first:
// actions are tried in document order, so among equally cheap plans the
// one whose first differing action comes earlier in the domain wins,
// unless the heuristic tells them apart.
type entry struct {
	f, h float64
	node int32
}

// openList is a binary min-heap of entries (typed, so pushing does not
// allocate as container/heap's interface would).
type openList []entry

func (a entry) less(b entry) bool {
	if a.f != b.f {
		return a.f < b.f
	}
	if a.h != b.h {
		return a.h < b.h
	}
	return a.node < b.node
}

func (o *openList) push(e entry) {
	*o = append(*o, e)
	h := *o
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (o *openList) pop() entry {
	h := *o
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].less(h[m]) {
			m = l
		}
		if r < len(h) && h[r].less(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*o = h
	return top
}

// seen is what the search knows of a state key: the cheapest cost found to
// reach it, and whether it was expanded (closed).
type seen struct {
	g      float64
	closed bool
}

// Plan finds the cheapest sequence of the domain's usable actions that
// takes state s to one where every condition of the named goal holds.
// It runs A* over world states: successors are the actions whose
// preconditions hold, costs are the actions' costs in the state they start
// from, the heuristic is described in docs/goap.md, and states are merged
// by a key of the facts that can change and matter (see relevant), which
// includes every incremented counter the goal depends on. Actions that
// cannot matter to the goal are left out. If the goal already holds the
// plan is empty.
//
// Errors: ErrUnknownGoal; ErrInvalidState for a mistyped fact in s;
// *UnreachableError (ErrUnreachable) when no plan exists, or none within
// MaxCost; *BudgetError (ErrBudgetExceeded) after MaxNodes expansions or
// once the search holds more than MaxMemory bytes; ErrCanceled
// wrapping ctx.Err() when ctx ends; *EvalError (ErrEval) when a cost
// expression fails or gives less than its action's MinCost.
//
// Plan is pure and deterministic: the same domain, state, goal and
// options give the same result. It may run concurrently with other calls
// on the same domain.
func Plan(ctx context.Context, d *Domain, s State, goal string, opts Options) (*Result, error) {
	g := d.goals[goal]
	if g == nil {
		return nil, fmt.Errorf("%w: %q (the domain has %s)", ErrUnknownGoal, goal, goalNames(d))
	}
	start, err := d.vector(s)
	if err != nil {
		return nil, err
	}
	sr := &search{ctx: ctx, d: d, goal: g, opts: opts, ev: newEvaluator(d), keys: map[string]int32{}, scratch: make([]value, len(d.Facts))}
	var usable []*Action
	for _, a := range d.Actions {
		if opts.Disabled != nil && opts.Disabled(a.Skill) {
			sr.disabled = append(sr.disabled, a)
			continue
		}
		usable = append(usable, a)
	}
	sr.usable, sr.keyFacts = relevant(d, g, usable)
	sr.h = newHeuristic(g, sr.usable)
	sr.stats.Actions = len(sr.usable)
	return sr.run(start)
}

// relevant drops the actions that cannot matter to goal g: an action
// matters if it changes a relevant fact, and a fact is relevant if a goal
// condition tests it, or an action that matters tests it in a
// precondition or reads it in its cost. The actions dropped change no
// relevant fact, so removing them from any plan leaves a plan that still
// works and costs no more: the cheapest plan survives, and the search
// skips the noise. It also returns the state key's facts, in Facts order:
// the relevant facts the remaining actions change. Other facts either keep
// their start values or change without consequence, so states that agree
// on the key have the same futures at the same costs.
func relevant(d *Domain, g *Goal, usable []*Action) ([]*Action, []int) {
	rel := make([]bool, len(d.Facts))
	for _, c := range g.Conditions {
		rel[c.fact] = true
	}
	keep := make([]bool, len(usable))
	for grown := true; grown; {
		grown = false
		for i, a := range usable {
			if keep[i] {
				continue
			}
			for _, e := range a.Effects {
				if rel[e.fact] {
					keep[i], grown = true, true
					break
				}
			}
			if !keep[i] {
				continue
			}
			for _, c := range a.Preconditions {
				rel[c.fact] = true
			}
			if a.cost != nil {
				for _, f := range a.cost.reads {
					rel[f] = true
				}
			}
		}
	}
	var out []*Action
	changed := make([]bool, len(d.Facts))
	for i, a := range usable {
		if keep[i] {
			out = append(out, a)
			for _, e := range a.Effects {
				changed[e.fact] = true
			}
		}
	}
	var key []int
	for i, c := range changed {
		if c && rel[i] {
			key = append(key, i)
		}
	}
	return out, key
}

type search struct {
	ctx      context.Context
	d        *Domain
	goal     *Goal
	opts     Options
	ev       *evaluator
	usable   []*Action // the actions not disabled that matter to the goal
	disabled []*Action
	keyFacts []int // the relevant facts usable actions change
	h        *heuristic
	nodes    []node
	open     openList
	keys     map[string]int32 // state key → index in seen
	seen     []seen
	arena    []value // where successor states are carved from
	scratch  []value
	stats    Stats
	pruned   bool // a state was dropped for MaxCost
	keyBuf   []byte
	held     int64 // arena blocks and state keys allocated, in bytes
}

var (
	sizeNode  = int64(unsafe.Sizeof(node{}))
	sizeEntry = int64(unsafe.Sizeof(entry{}))
	sizeSeen  = int64(unsafe.Sizeof(seen{}))
	sizeValue = int64(unsafe.Sizeof(value{}))
)

// keyBytes is what one state key costs the keys map besides its text: a
// string header and an index in a slot, with the map's spare room.
const keyBytes = 2 * (16 + 4)

// memBytes estimates what the search holds: its slices at their capacity,
// the arena blocks states are carved from and the keys of the states seen.
func (sr *search) memBytes() int64 {
	return int64(cap(sr.nodes))*sizeNode + int64(cap(sr.open))*sizeEntry + int64(cap(sr.seen))*sizeSeen + sr.held
}

func (sr *search) run(start []value) (*Result, error) {
	limit := sr.opts.MaxNodes
	if limit == 0 {
		limit = DefaultMaxNodes
	}
	memLimit := sr.opts.MaxMemory
	if memLimit == 0 {
		memLimit = DefaultMaxMemory
	}
	if err := sr.ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	h0 := sr.h.estimate(start)
	if math.IsInf(h0, 1) {
		return nil, sr.unreachable(start)
	}
	sr.add(-1, -1, 0, 0, h0, start)
	for len(sr.open) > 0 {
		e := sr.open.pop()
		n := &sr.nodes[e.node]
		st := &sr.seen[n.seen]
		if st.closed || n.g > st.g {
			continue // a cheaper path to this state was expanded or queued
		}
		if e.h == 0 && allHold(sr.goal.Conditions, n.state) {
			return sr.result(start, e.node), nil
		}
		st.closed = true
		if limit > 0 && sr.stats.Expanded >= limit {
			return nil, &BudgetError{Limit: BudgetNodes, Goal: sr.goal.Name, Used: int64(sr.stats.Expanded),
				Budget: int64(limit), Expanded: sr.stats.Expanded}
		}
		if mem := sr.memBytes(); memLimit > 0 && mem > memLimit {
			return nil, &BudgetError{Limit: BudgetMemory, Goal: sr.goal.Name, Used: mem, Budget: memLimit, Expanded: sr.stats.Expanded}
		}
		sr.stats.Expanded++
		if sr.stats.Expanded&255 == 0 {
			if err := sr.ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCanceled, err)
			}
		}
		if err := sr.expand(e.node); err != nil {
			return nil, err
		}
	}
	return nil, sr.unreachable(start)
}

// expand generates the successors of node i.
func (sr *search) expand(i int32) error {
	parent := sr.nodes[i].state
	g0 := sr.nodes[i].g
	for ai, a := range sr.usable {
		if !allHold(a.Preconditions, parent) {
			continue
		}
		cost, err := sr.cost(a, parent)
		if err != nil {
			return err
		}
		next := sr.scratch
		copy(next, parent)
		for k := range a.Effects {
			a.Effects[k].apply(next)
		}
		g := g0 + cost
		sr.keyBuf = key(sr.keyBuf, sr.keyFacts, next)
		if si, ok := sr.keys[string(sr.keyBuf)]; ok && (sr.seen[si].closed || sr.seen[si].g <= g) {
			continue
		}
		h := sr.h.estimate(next)
		if math.IsInf(h, 1) {
			continue
		}
		if sr.opts.MaxCost > 0 && g+h > sr.opts.MaxCost {
			sr.pruned = true
			continue
		}
		sr.add(i, int32(ai), g, cost, h, sr.keep(next))
	}
	return nil
}

// keep copies a successor state out of the scratch buffer. States are
// carved from large blocks: one allocation per few hundred states.
func (sr *search) keep(s []value) []value {
	n := len(s)
	if len(sr.arena) < n {
		sr.arena = make([]value, n*min(max(len(sr.nodes), 16), 4096))
		sr.held += int64(len(sr.arena)) * sizeValue
	}
	out := sr.arena[:n:n]
	sr.arena = sr.arena[n:]
	copy(out, s)
	return out
}

// add records a node for state s (which it now owns) and queues it.
func (sr *search) add(parent, action int32, g, cost, h float64, s []value) {
	sr.keyBuf = key(sr.keyBuf, sr.keyFacts, s)
	si, ok := sr.keys[string(sr.keyBuf)]
	if ok {
		sr.seen[si].g = g
	} else {
		si = int32(len(sr.seen))
		sr.keys[string(sr.keyBuf)] = si
		sr.held += int64(len(sr.keyBuf)) + keyBytes
		sr.seen = append(sr.seen, seen{g: g})
	}
	idx := int32(len(sr.nodes))
	sr.nodes = append(sr.nodes, node{parent: parent, action: action, seen: si, g: g, cost: cost, state: s})
	sr.open.push(entry{f: g + h, h: h, node: idx})
	if parent >= 0 {
		sr.stats.Generated++
	}
}

// cost is a's cost in state s.
func (sr *search) cost(a *Action, s []value) (float64, error) {
	if a.cost == nil {
		return a.Cost, nil
	}
	c, err := sr.ev.number(a.cost, s, "action "+a.Name+": cost")
	if err != nil {
		return 0, err
	}
	if c < a.MinCost {
		return 0, &EvalError{Where: "action " + a.Name + ": cost", Err: fmt.Errorf("%q gave %s in state %s, below the action's minCost %s",
			a.CostExpr, formatNumber(c), sr.d.state(s), formatNumber(a.MinCost))}
	}
	return c, nil
}

func (sr *search) result(start []value, last int32) *Result {
	var path []int32
	for i := last; sr.nodes[i].parent >= 0; i = sr.nodes[i].parent {
		path = append(path, i)
	}
	slices.Reverse(path)
	r := &Result{Domain: sr.d.Name, Goal: sr.goal.Name, Start: sr.d.state(start), Steps: []Step{}, Stats: sr.stats}
	for _, i := range path {
		n := &sr.nodes[i]
		p := &sr.nodes[n.parent]
		a := sr.usable[n.action]
		desc := a.Description
		if desc == "" {
			desc = a.Name
		}
		r.Steps = append(r.Steps, Step{Action: a.Name, Skill: a.Skill, Description: desc, Input: a.render(sr.d, p.state),
			Cost: n.cost, State: sr.d.state(n.state)})
	}
	r.Cost = sr.nodes[last].g
	return r
}

// unreachable explains why the goal cannot be reached from start.
func (sr *search) unreachable(start []value) error {
	e := &UnreachableError{Goal: sr.goal.Name, Unsatisfied: unsatisfied(sr.goal.Conditions, start)}
	why := sr.h.explain(sr.d, start, sr.disabled)
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("no sequence of usable actions reaches it; searched %d states", sr.stats.Expanded))
		if sr.pruned {
			why[0] = fmt.Sprintf("no plan costs at most %s (Options.MaxCost); searched %d states", formatNumber(sr.opts.MaxCost), sr.stats.Expanded)
		}
	}
	e.Why = strings.Join(why, "; ")
	return e
}

func goalNames(d *Domain) string {
	if len(d.Goals) == 0 {
		return "no goals"
	}
	names := make([]string, len(d.Goals))
	for i, g := range d.Goals {
		names[i] = g.Name
	}
	return "goals " + strings.Join(names, ", ")
}

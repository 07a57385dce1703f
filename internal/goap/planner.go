package goap

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
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
	// MaxNodes alone does not) with its record, its open-list entry and
	// its slot in the table of states, counted at 1.5 times the capacity
	// of the structures that hold them (one that grows leaves its previous
	// array to the collector). 0 means DefaultMaxMemory; negative means no
	// limit.
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

// Plan finds the cheapest sequence of the domain's usable actions that
// takes state s to one where every condition of the named goal holds.
// It runs A* over world states: successors are the actions whose
// preconditions (and requires expressions) hold, costs are the actions'
// costs in the state they start from, the heuristic is described in
// docs/goap.md, and states are merged by the facts that can change and
// matter (see relevant), which include every incremented counter the goal
// depends on. Actions that cannot matter to the goal are left out. If the
// goal already holds the plan is empty; a goal without conditions is
// reached by the cheapest single action that applies.
//
// Errors: ErrUnknownGoal; ErrInvalidState for a mistyped fact in s;
// *UnreachableError (ErrUnreachable) when no plan exists, or none within
// MaxCost; *BudgetError (ErrBudgetExceeded) after MaxNodes expansions or
// once the search holds more than MaxMemory bytes; ErrCanceled
// wrapping ctx.Err() when ctx ends; *EvalError (ErrEval) when an
// expression (a cost, a requires, a derived fact) fails, or a cost gives
// less than its action's MinCost.
//
// Plan is pure and deterministic: the same domain, state, goal and
// options give the same result. It may run concurrently with other calls
// on the same domain. It borrows a Planner the domain keeps for reuse; a
// caller that plans often on one goroutine can keep its own.
func Plan(ctx context.Context, d *Domain, s State, goal string, opts Options) (*Result, error) {
	var r *Result
	err := d.withPlanner(func(p *Planner) error {
		var err error
		r, err = p.Plan(ctx, s, goal, opts)
		return err
	})
	return r, err
}

// withPlanner runs f with a Planner of the domain's pool, and gives it
// back unless its search structures grew large.
func (d *Domain) withPlanner(f func(p *Planner) error) error {
	p, _ := d.planners.Get().(*Planner)
	if p == nil {
		p = NewPlanner(d)
	}
	err := f(p)
	if p.memBytes() <= keepBytes {
		d.planners.Put(p)
	}
	return err
}

// keepBytes is the most a Planner may hold to go back to its domain's
// pool after Plan: larger searches' structures are left to the collector.
const keepBytes = 1 << 20

// Planner plans on one domain and keeps what it builds for reuse: per
// goal and set of usable actions, the relevant actions compiled against a
// packed state layout and the heuristic; and the search's records, open
// list, table of states and state words, which the next search reuses,
// so a search in a warm Planner allocates nothing. It holds the largest
// search's structures until a search with a MaxMemory below them drops
// them.
//
// A Planner is not safe for concurrent use; any number of Planners may
// share a Domain.
type Planner struct {
	d        *Domain
	ev       *evaluator
	problems map[*Goal][]*problem
	prob     *problem // the current search's
	mask     []bool   // usable actions, by index in d.Actions

	start        []value // the start state vector
	fullA, fullB []value // state vectors for expressions and derived facts
	xstrID       map[string]uint64
	xstrs        []string

	enabled   []uint64 // set of prob.acts: the conditions outside the key hold
	cand      []uint64 // set of prob.acts to try in a state
	recs      []rec
	open      openList
	table     []slot
	gen       uint64
	arena     []uint64 // the records' packed states, words apiece
	words     int
	cur, next []uint64
	seq       int32
	stats     Stats
	pruned    bool // a state was dropped for MaxCost
	path      []int32
	sol       Solution
	// Solution.ToPlan's replay of the plan: the state vector, the
	// length of each fact's member in the state last written (0: not
	// present) and the facts a step changes.
	replay  []value
	memb    []int32
	changed []int32
	bufs    buffers // the plan's scratch space
}

// NewPlanner returns a Planner for domain d.
func NewPlanner(d *Domain) *Planner {
	n := d.slots()
	return &Planner{d: d, ev: newEvaluator(d), problems: map[*Goal][]*problem{}, mask: make([]bool, len(d.Actions)),
		start: make([]value, n), fullA: make([]value, n), fullB: make([]value, n), xstrID: map[string]uint64{}}
}

// Plan is Search followed by Solution.Result: the plan with each step's
// expanded input and predicted state. Errors are Search's.
func (p *Planner) Plan(ctx context.Context, s State, goal string, opts Options) (*Result, error) {
	sol, err := p.Search(ctx, s, goal, opts)
	if err != nil {
		return nil, err
	}
	return sol.Result(), nil
}

// Search finds the plan Plan finds and returns it as a Solution: the
// actions and their costs, without building the steps' states and inputs
// (Solution.Result does, on demand). The Solution belongs to the Planner
// and is valid until its next Search or Plan. Errors are Plan's.
func (p *Planner) Search(ctx context.Context, s State, goal string, opts Options) (*Solution, error) {
	g := p.d.goals[goal]
	if g == nil {
		return nil, fmt.Errorf("%w: %q (the domain has %s)", ErrUnknownGoal, goal, goalNames(p.d))
	}
	if err := p.d.vectorInto(p.start, s, p.ev); err != nil {
		return nil, err
	}
	p.prob = p.problemFor(g, opts)
	p.reset(opts)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	if len(g.Conditions) == 0 {
		return p.anyAction(opts)
	}
	return p.search(ctx, opts)
}

// Solution is a plan as Planner.Search found it. It belongs to the
// Planner and is valid until its next Search or Plan.
type Solution struct {
	p     *Planner
	prob  *problem
	path  []int32 // records, start excluded
	cost  float64
	stats Stats
}

// Cost is the plan's cost, the sum of its steps'.
func (s *Solution) Cost() float64 { return s.cost }

// Len is the number of steps.
func (s *Solution) Len() int { return len(s.path) }

// Action is step i's action.
func (s *Solution) Action(i int) *Action { return s.prob.acts[s.p.recs[s.path[i]].act].a }

// StepCost is step i's cost.
func (s *Solution) StepCost(i int) float64 { return s.p.recs[s.path[i]].cost }

// Stats describe the search's work.
func (s *Solution) Stats() Stats { return s.stats }

// Result builds the plan's Result: the start state, and per step the
// action's expanded input and the state predicted after it, replaying
// every effect of the steps from the start state.
func (s *Solution) Result() *Result {
	d := s.p.d
	n := len(d.Facts)
	r := &Result{Domain: d.Name, Goal: s.prob.goal.Name, Start: d.state(s.p.start), Steps: make([]Step, 0, s.Len()),
		Cost: s.cost, Stats: s.stats}
	v := slices.Clone(s.p.start[:n])
	prev := r.Start
	for i := range s.Len() {
		a := s.Action(i)
		desc := a.Description
		if desc == "" {
			desc = a.Name
		}
		input := a.render(d, v)
		// The state after the step is the one before with the effects'
		// facts changed: a copy of the map, not a new one.
		st := maps.Clone(prev)
		for k := range a.Effects {
			e := &a.Effects[k]
			e.apply(v)
			st[e.Fact] = v[e.fact].any()
		}
		r.Steps = append(r.Steps, Step{Action: a.Name, Skill: a.Skill, Description: desc, Input: input, Cost: s.StepCost(i), State: st})
		prev = st
	}
	return r
}

// problem is what a Planner compiles for a goal and a set of usable
// actions: the relevant actions, the key facts and their layout, the
// actions' tests and effects on packed states, and the heuristic.
type problem struct {
	goal     *Goal
	mask     []bool    // usable actions, by index in Domain.Actions
	all      bool      // every action is usable
	usable   []*Action // the usable actions that matter to the goal
	disabled []*Action
	key      []int // facts, in Facts order
	lay      layout
	acts     []cact
	goalT    tests
	h        *heuristic
	// An index of the actions by precondition: an action that needs a
	// bool fact true is tried only in states where its bit is set. aw is
	// the words of a set of actions; trig holds one set per bit of the
	// value words, untrig the actions without such a precondition. trig
	// is nil when the index would be large (many facts and actions).
	aw     int
	trig   []uint64
	untrig []uint64
	// The facts outside the key that actions' conditions read, and the
	// last search's enabled actions with those facts' values then.
	constFacts []int
	enabled    []uint64
	enabledFor []value
	enabledOK  bool
}

// cact is an action compiled against a problem's layout.
type cact struct {
	a   *Action
	pre tests
	eff effects
	// simple: the preconditions are one word test (w[tw] & tm == twant),
	// the effects one word change (w[ew] = w[ew] &^ eclr | eset) and the
	// cost a constant, the common case the search takes inline.
	simple     bool
	tw, ew     int32
	tm, twant  uint64
	eclr, eset uint64
	// plain: the preconditions are word tests on bools and intervals on
	// numbers, the effects on bools and numbers, the cost a constant.
	plain bool
	cost  float64   // the constant cost, for simple and plain actions
	memo  *costMemo // for an expression cost
}

// maxIndex bounds the words of a problem's action index.
const maxIndex = 1 << 16

func (c *cact) simplify(l *layout) {
	t, e := &c.pre, &c.eff
	c.cost = c.a.Cost
	c.plain = c.a.cost == nil && len(t.nums)+len(t.strs)+len(t.gen)+len(t.slow) == 0 && t.req == nil && len(e.strs) == 0
	if !c.plain || l.words == 0 || len(t.bits) > 1 || len(t.ivs) > 0 || len(e.bits) > 1 || len(e.nums) > 0 {
		return
	}
	c.simple = true
	if len(t.bits) == 1 {
		c.tw, c.tm, c.twant = t.bits[0].word, t.bits[0].mask, t.bits[0].want
	}
	if len(e.bits) == 1 {
		c.ew, c.eclr, c.eset = e.bits[0].word, e.bits[0].clr, e.bits[0].set
	}
}

// index builds the problem's action index.
func (pr *problem) index() {
	pr.aw = (len(pr.acts) + 63) / 64
	pr.untrig = make([]uint64, pr.aw)
	if pr.lay.bools*64*pr.aw > maxIndex {
		for i := range pr.acts {
			pr.untrig[i/64] |= 1 << (i % 64)
		}
		return
	}
	pr.trig = make([]uint64, pr.lay.bools*64*pr.aw)
	for i := range pr.acts {
		at := -1
		for _, b := range pr.acts[i].pre.bits {
			if int(b.word) < pr.lay.bools && b.want != 0 {
				at = int(b.word)*64 + bits.TrailingZeros64(b.want)
				break
			}
		}
		if at < 0 {
			pr.untrig[i/64] |= 1 << (i % 64)
		} else {
			pr.trig[at*pr.aw+i/64] |= 1 << (i % 64)
		}
	}
}

// problemsPerGoal bounds the sets of usable actions a Planner keeps
// compiled per goal.
const problemsPerGoal = 4

func (p *Planner) problemFor(g *Goal, opts Options) *problem {
	d := p.d
	if opts.Disabled == nil && p.prob != nil && p.prob.goal == g && p.prob.all {
		return p.prob // the common case: the same goal again, nothing disabled
	}
	for i, a := range d.Actions {
		p.mask[i] = opts.Disabled == nil || !opts.Disabled(a.Skill)
	}
	for _, pr := range p.problems[g] {
		if slices.Equal(pr.mask, p.mask) {
			return pr
		}
	}
	pr := &problem{goal: g, mask: slices.Clone(p.mask), all: !slices.Contains(p.mask, false)}
	var usable []*Action
	for i, a := range d.Actions {
		if p.mask[i] {
			usable = append(usable, a)
		} else {
			pr.disabled = append(pr.disabled, a)
		}
	}
	if len(g.Conditions) == 0 {
		pr.usable = usable // any action reaches the goal; the state never matters
	} else {
		pr.usable, pr.key = relevant(d, g, usable)
	}
	pr.lay = newLayout(d, pr.key)
	for _, a := range pr.usable {
		c := cact{a: a, pre: compileTests(d, &pr.lay, a.Preconditions, a.requires), eff: compileEffects(d, &pr.lay, a.Effects)}
		c.simplify(&pr.lay)
		if a.cost != nil {
			c.memo = newCostMemo(d, &pr.lay, a.cost)
		}
		pr.acts = append(pr.acts, c)
	}
	pr.index()
	for i := range pr.acts {
		for _, c := range pr.acts[i].pre.consts {
			if !slices.Contains(pr.constFacts, c.fact) {
				pr.constFacts = append(pr.constFacts, c.fact)
			}
		}
	}
	pr.goalT = compileTests(d, &pr.lay, g.Conditions, nil)
	pr.h = newHeuristic(d, g, pr.usable)
	pr.h.place(&pr.lay)
	list := p.problems[g]
	if len(list) == problemsPerGoal {
		list = list[1:]
	}
	p.problems[g] = append(list, pr)
	return pr
}

// relevant drops the actions that cannot matter to goal g, and returns
// the rest in document order with the state key's facts.
//
// First relevance: an action matters if it changes a relevant fact, and
// a fact is relevant if a goal condition tests it, or an action that
// matters tests it in a precondition or reads it in its requires or cost
// expression, or a relevant derived fact reads it. The actions dropped
// change no relevant fact, so removing them from any plan leaves a plan
// that still works and costs no more: the cheapest plan survives, and the
// search skips the noise.
//
// Then direction: a number fact (one with a default, so never absent)
// that every condition reading it wants high (gt, gte) or every one wants
// low (lt, lte), and that no expression reads, only ever helps by moving
// that way. An action whose every effect on a relevant fact moves such a
// fact the other way (an eat that only lowers the food the goal wants
// high) cannot help: removing it from a plan leaves every state at least
// as good on those facts and equal on the others, so every later
// condition still holds and the plan costs no more. Dropping actions can
// make more facts irrelevant or one-directional, so both steps repeat
// until nothing changes.
//
// The key's facts, in Facts order, are the relevant facts the remaining
// actions change. Other facts either keep their start values or change
// without consequence, so states that agree on the key have the same
// futures at the same costs.
func relevant(d *Domain, g *Goal, usable []*Action) ([]*Action, []int) {
	for {
		rel, kept := relevance(d, g, usable)
		dir := directions(d, g, kept)
		var out []*Action
		for _, a := range kept {
			if !harmful(a, rel, dir) {
				out = append(out, a)
			}
		}
		if len(out) == len(kept) {
			changed := make([]bool, len(d.Facts))
			for _, a := range out {
				for _, e := range a.Effects {
					changed[e.fact] = true
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
		usable = out
	}
}

// relevance is relevant's first step: the relevant slots and the actions
// that change a relevant fact.
func relevance(d *Domain, g *Goal, usable []*Action) ([]bool, []*Action) {
	rel := make([]bool, d.slots())
	var mark func(i int)
	mark = func(i int) {
		if rel[i] {
			return
		}
		rel[i] = true
		if i >= len(d.Facts) {
			for _, r := range d.Derived[i-len(d.Facts)].x.reads {
				if r < len(d.Facts) {
					mark(r)
				}
			}
		}
	}
	for _, c := range g.Conditions {
		mark(c.fact)
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
				mark(c.fact)
			}
			for _, x := range []*expression{a.cost, a.requires} {
				if x != nil {
					for _, f := range x.reads {
						mark(f)
					}
				}
			}
		}
	}
	var out []*Action
	for i, a := range usable {
		if keep[i] {
			out = append(out, a)
		}
	}
	return rel, out
}

// The directions a number fact can be wanted in.
const (
	dirNone int8 = iota // no condition reads it yet
	dirUp               // every condition on it is gt or gte
	dirDown             // every condition on it is lt or lte
	dirBoth             // anything else: no direction
)

// directions is the direction each fact is wanted in by goal g's
// conditions and the preconditions of actions.
func directions(d *Domain, g *Goal, actions []*Action) []int8 {
	dir := make([]int8, len(d.Facts))
	for i, f := range d.Facts {
		if f.Type != Number || f.Default == nil {
			dir[i] = dirBoth
		}
	}
	want := func(f int, w int8) {
		if dir[f] == dirNone {
			dir[f] = w
		} else if dir[f] != w {
			dir[f] = dirBoth
		}
	}
	reads := func(x *expression) {
		if x != nil {
			for _, f := range x.reads {
				if f < len(d.Facts) {
					dir[f] = dirBoth
				} else {
					for _, r := range d.Derived[f-len(d.Facts)].x.reads {
						if r < len(d.Facts) {
							dir[r] = dirBoth
						}
					}
				}
			}
		}
	}
	conds := func(cs []Condition) {
		for i := range cs {
			c := &cs[i]
			switch {
			case c.fact >= len(d.Facts):
				reads(d.Derived[c.fact-len(d.Facts)].x)
			case c.Op == Greater || c.Op == GreaterEq:
				want(c.fact, dirUp)
			case c.Op == Less || c.Op == LessEq:
				want(c.fact, dirDown)
			default:
				want(c.fact, dirBoth)
			}
		}
	}
	conds(g.Conditions)
	for _, a := range actions {
		conds(a.Preconditions)
		reads(a.cost)
		reads(a.requires)
	}
	return dir
}

// harmful reports whether every effect of a on a relevant fact moves a
// number the way no condition wants it.
func harmful(a *Action, rel []bool, dir []int8) bool {
	for _, e := range a.Effects {
		if !rel[e.fact] {
			continue
		}
		delta := e.val.num
		if e.Op == Dec {
			delta = -delta
		}
		switch {
		case e.Op == Set:
			return false
		case dir[e.fact] == dirUp && delta <= 0, dir[e.fact] == dirDown && delta >= 0:
		default:
			return false
		}
	}
	return true
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

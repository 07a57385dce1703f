package goap

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unsafe"
)

// rec is one state the search reached: its cheapest known cost and how.
type rec struct {
	g      float64 // cost from the start
	cost   float64 // the last action's cost
	parent int32   // record; -1 for the start
	act    int32   // index in problem.acts
	seq    int32   // the open-list entry that stands for the state now
	hash   uint32
	closed bool // expanded
}

// entry is the open list's element. Ties on f go to the smaller h (the
// state that looks closer to the goal), then to the entry queued first:
// actions are tried in document order, so among equally cheap plans the
// one whose first differing action comes earlier in the domain wins,
// unless the heuristic tells them apart.
type entry struct {
	f, h float64
	seq  int32
	rec  int32
}

// openList is a binary min-heap of entries (typed, so pushing does not
// allocate as container/heap's interface would).
type openList []entry

func (a *entry) less(f, h float64, seq int32) bool {
	if a.f != f {
		return a.f < f
	}
	if a.h != h {
		return a.h < h
	}
	return a.seq < seq
}

// push queues an entry. Entries move into the hole the new one leaves,
// and the new one is written field by field: a struct built on the stack
// and copied whole stalls on the narrow stores that built it.
func (o *openList) push(f, hv float64, seq, r int32) {
	if len(*o) < cap(*o) {
		*o = (*o)[:len(*o)+1]
	} else {
		*o = append(*o, entry{})
	}
	h := *o
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if q := &h[p]; q.f < f || q.f == f && (q.h < hv || q.h == hv && q.seq < seq) {
			break
		}
		h[i] = h[p]
		i = p
	}
	e := &h[i]
	e.f, e.h, e.seq, e.rec = f, hv, seq, r
}

// pop takes the least entry off the list.
func (o *openList) pop() entry {
	h := *o
	top := h[0]
	n := len(h) - 1
	lf, lh, lseq, lrec := h[n].f, h[n].h, h[n].seq, h[n].rec
	h = h[:n]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].less(h[c].f, h[c].h, h[c].seq) {
			c++
		}
		if !h[c].less(lf, lh, lseq) {
			break
		}
		h[i] = h[c]
		i = c
	}
	if n > 0 {
		e := &h[i]
		e.f, e.h, e.seq, e.rec = lf, lh, lseq, lrec
	}
	*o = h
	return top
}

var (
	sizeRec   = int64(unsafe.Sizeof(rec{}))
	sizeEntry = int64(unsafe.Sizeof(entry{}))
	sizeSlot  = int64(unsafe.Sizeof(slot{}))
)

// memBytes is what the Planner's search structures hold: records, open
// list, table of states and state words, at 1.5 times their capacity, as
// a structure that doubles leaves its previous array, half its size, to
// the collector.
func (p *Planner) memBytes() int64 {
	b := int64(cap(p.recs))*sizeRec + int64(cap(p.open))*sizeEntry + int64(cap(p.table))*sizeSlot + int64(cap(p.arena))*8
	return b + b/2
}

// reset prepares the search structures for a search of p.prob: emptied,
// or dropped when they alone hold half the memory budget.
func (p *Planner) reset(opts Options) {
	if limit := memLimit(opts); limit > 0 && p.memBytes() > limit/2 {
		p.recs, p.open, p.table, p.arena = nil, nil, nil, nil
	}
	p.recs, p.open, p.arena = p.recs[:0], p.open[:0], p.arena[:0]
	p.gen++
	if p.gen == 1<<32 {
		clear(p.table)
		p.gen = 1
	}
	if len(p.table) == 0 {
		p.table = make([]slot, 64)
	}
	p.words = p.prob.lay.words
	if cap(p.cur) < p.words {
		p.cur, p.next = make([]uint64, p.words), make([]uint64, p.words)
	}
	p.cur, p.next = p.cur[:p.words], p.next[:p.words]
	if aw := p.prob.aw; cap(p.enabled) < aw {
		p.enabled, p.cand = make([]uint64, aw), make([]uint64, aw)
	}
	p.enabled, p.cand = p.enabled[:p.prob.aw], p.cand[:p.prob.aw]
	if len(p.xstrs) > 0 {
		clear(p.xstrID)
		p.xstrs = p.xstrs[:0]
	}
	p.seq, p.stats, p.pruned = 0, Stats{Actions: len(p.prob.usable)}, false
}

func memLimit(opts Options) int64 {
	if opts.MaxMemory == 0 {
		return DefaultMaxMemory
	}
	return opts.MaxMemory
}

// stateWords is record r's packed state.
func (p *Planner) stateWords(r int32) []uint64 {
	i := int(r) * p.words
	return p.arena[i : i+p.words : i+p.words]
}

func hashWords(w []uint64) uint32 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, x := range w {
		h ^= x
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 31
	}
	return uint32(h ^ h>>32)
}

// slot is an entry of the table of states: the search's generation and
// the state's hash (so a probe rarely reads a record that is not the
// state's), and the record. Slots of other generations are empty.
type slot struct {
	tag uint64 // gen<<32 | hash
	rec int32
}

// lookup finds packed state w in the table: its record, or the slot where
// it goes.
func (p *Planner) lookup(w []uint64, hash uint32) (r int32, at int, found bool) {
	mask := len(p.table) - 1
	tag := p.gen<<32 | uint64(hash)
	for i := int(hash) & mask; ; i = (i + 1) & mask {
		t := &p.table[i]
		if t.tag>>32 != p.gen {
			return -1, i, false
		}
		if t.tag == tag && p.equal(t.rec, w) {
			return t.rec, i, true
		}
	}
}

// grow doubles the table and puts every record back.
func (p *Planner) grow() {
	p.table = make([]slot, 2*len(p.table))
	mask := len(p.table) - 1
	for r := range p.recs {
		h := p.recs[r].hash
		i := int(h) & mask
		for p.table[i].tag>>32 == p.gen {
			i = (i + 1) & mask
		}
		p.table[i] = slot{tag: p.gen<<32 | uint64(h), rec: int32(r)}
	}
}

// copyWords copies a packed state, short ones without calling memmove.
func copyWords(dst, src []uint64) {
	switch len(src) {
	case 1:
		dst[0] = src[0]
	case 2:
		dst[0], dst[1] = src[0], src[1]
	default:
		copy(dst, src)
	}
}

// equal reports whether record r's state is w.
func (p *Planner) equal(r int32, w []uint64) bool {
	s := p.arena[int(r)*len(w):]
	s = s[:len(w)]
	for i := range w {
		if s[i] != w[i] {
			return false
		}
	}
	return true
}

// add records that packed state w is reached at cost g by action act from
// record parent, and queues it: a new record (in slot), or record r
// reached more cheaply.
func (p *Planner) add(r int32, at int, found bool, parent, act int32, g, cost, h float64, w []uint64, hash uint32) {
	if !found {
		r = int32(len(p.recs))
		if len(p.recs) < cap(p.recs) {
			p.recs = p.recs[:r+1]
		} else {
			p.recs = append(p.recs, rec{})
		}
		p.arena = append(p.arena, w...)
	}
	// Field by field: a struct literal is built on the stack and copied
	// with wide moves that stall on the narrow stores that built it.
	rc := &p.recs[r]
	rc.g, rc.cost, rc.parent, rc.act, rc.seq, rc.hash, rc.closed = g, cost, parent, act, p.seq, hash, false
	if !found {
		p.table[at] = slot{tag: p.gen<<32 | uint64(hash), rec: r}
		if 2*len(p.recs) > len(p.table) {
			p.grow() // after the record has its hash
		}
	}
	p.open.push(g+h, h, p.seq, r)
	p.seq++
	if parent >= 0 {
		p.stats.Generated++
	}
}

// search is A* from p.start over packed states.
func (p *Planner) search(ctx context.Context, opts Options) (*Solution, error) {
	pr := p.prob
	limit := opts.MaxNodes
	if limit == 0 {
		limit = DefaultMaxNodes
	}
	memLimit := memLimit(opts)
	p.enable()
	p.pack(p.start, p.next)
	h0, err := p.estimate(p.next)
	if err != nil {
		return nil, err
	}
	if math.IsInf(h0, 1) {
		return nil, p.unreachable(opts)
	}
	hash := hashWords(p.next)
	_, at, _ := p.lookup(p.next, hash)
	p.add(-1, at, false, -1, -1, 0, 0, h0, p.next, hash)
	for len(p.open) > 0 {
		e := p.open.pop()
		r := &p.recs[e.rec]
		if r.closed || e.seq != r.seq {
			continue // a cheaper path to this state was expanded or queued
		}
		if e.h == 0 {
			ok, err := p.goalHolds(e.rec)
			if err != nil {
				return nil, err
			}
			if ok {
				return p.solution(e.rec), nil
			}
		}
		r.closed = true
		if limit > 0 && p.stats.Expanded >= limit {
			return nil, &BudgetError{Limit: BudgetNodes, Goal: pr.goal.Name, Used: int64(p.stats.Expanded),
				Budget: int64(limit), Expanded: p.stats.Expanded}
		}
		if mem := p.memBytes(); memLimit > 0 && mem > memLimit {
			return nil, &BudgetError{Limit: BudgetMemory, Goal: pr.goal.Name, Used: mem, Budget: memLimit, Expanded: p.stats.Expanded}
		}
		p.stats.Expanded++
		if p.stats.Expanded&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCanceled, err)
			}
		}
		if err := p.expand(e.rec, opts); err != nil {
			return nil, err
		}
	}
	return nil, p.unreachable(opts)
}

// enable sets p.enabled: the actions whose conditions on facts outside
// the key hold in the start state. Those facts keep their start values,
// so when they are what the problem's last search started from, the
// last answer stands.
func (p *Planner) enable() {
	pr := p.prob
	if pr.enabledOK {
		same := true
		for i, f := range pr.constFacts {
			if p.start[f] != pr.enabledFor[i] {
				same = false
				break
			}
		}
		if same {
			copy(p.enabled, pr.enabled)
			return
		}
	}
	clear(p.enabled)
	for i := range pr.acts {
		if c := &pr.acts[i]; !c.pre.never && allHold2(c.pre.consts, p.start) {
			p.enabled[uint(i)/64] |= 1 << (uint(i) % 64)
		}
	}
	pr.enabled = append(pr.enabled[:0], p.enabled...)
	pr.enabledFor = pr.enabledFor[:0]
	for _, f := range pr.constFacts {
		pr.enabledFor = append(pr.enabledFor, p.start[f])
	}
	pr.enabledOK = true
}

// allHold2 is allHold over pointers to conditions.
func allHold2(cs []*Condition, s []value) bool {
	for _, c := range cs {
		if !c.holds(s[c.fact]) {
			return false
		}
	}
	return true
}

// expand generates the successors of record i.
func (p *Planner) expand(i int32, opts Options) error {
	pr := p.prob
	cur, next := p.cur, p.next
	copyWords(cur, p.stateWords(i))
	var err error
	g0 := p.recs[i].g
	unpacked := false
	cand := p.cand
	if len(cand) == 1 {
		cand[0] = pr.untrig[0]
	} else {
		copy(cand, pr.untrig)
	}
	if pr.trig != nil {
		for wi := range pr.lay.bools {
			for x := cur[wi]; x != 0; x &= x - 1 {
				t := pr.trig[(wi*64+bits.TrailingZeros64(x))*pr.aw:]
				for k := range cand {
					cand[k] |= t[k]
				}
			}
		}
	}
	for k := range cand {
		cw := cand[k] & p.enabled[k]
		for ; cw != 0; cw &= cw - 1 {
			ai := k*64 + bits.TrailingZeros64(cw)
			c := &pr.acts[ai]
			var cost float64
			if c.simple {
				if cur[c.tw]&c.tm != c.twant {
					continue
				}
				copyWords(next, cur)
				next[c.ew] = next[c.ew]&^c.eclr | c.eset
				cost = c.cost
			} else if c.plain {
				if !c.pre.plainHolds(cur) {
					continue
				}
				copyWords(next, cur)
				for _, b := range c.eff.bits {
					next[b.word] = next[b.word]&^b.clr | b.set
				}
				for _, n := range c.eff.nums {
					next[n.word] = n.apply(next[n.word])
				}
				cost = c.cost
			} else {
				ok, x, aerr := p.applies(c, cur, &unpacked)
				if aerr != nil {
					return aerr
				}
				if !ok {
					continue
				}
				copy(next, cur)
				c.eff.apply(next)
				cost = x
			}
			g := g0 + cost
			hash := hashWords(next)
			r, at, found := p.lookup(next, hash)
			if found && (p.recs[r].closed || p.recs[r].g <= g) {
				continue
			}
			var h float64
			if gf := pr.h.single; gf != nil {
				// One goal fact, a bool or a number: read its bound off.
				x := next[gf.at.word]
				switch {
				case gf.memo == nil && x&gf.at.bit != 0:
					h = gf.byBool[1]
				case gf.memo == nil:
					h = gf.byBool[0]
				case x != absentNum:
					h = gf.numBound(x)
				default:
					h = math.NaN()
				}
				switch {
				case h != h:
					h, _ = p.estimate(next) // an absent number
				case h < 0:
					h = 0
				case h < pr.h.cmin:
					h = pr.h.cmin
				}
			} else if h, err = p.estimate(next); err != nil {
				return err
			}
			if math.IsInf(h, 1) {
				continue
			}
			if opts.MaxCost > 0 && g+h > opts.MaxCost {
				p.pruned = true
				continue
			}
			p.add(r, at, found, i, int32(ai), g, cost, h, next, hash)
		}
	}
	return nil
}

// applies reports whether action c applies in packed state w, and its
// cost there. Conditions on derived facts, the requires expression and
// an expression cost need w's whole state vector, p.fullA, which applies
// builds once per state (*unpacked says it is built).
func (p *Planner) applies(c *cact, w []uint64, unpacked *bool) (bool, float64, error) {
	if !c.pre.fast(p, w) {
		return false, 0, nil
	}
	a := c.a
	if len(c.pre.slow) > 0 || c.pre.req != nil {
		if !*unpacked {
			if err := p.unpack(w, p.fullA); err != nil {
				return false, 0, err
			}
			*unpacked = true
		}
		if !allHold2(c.pre.slow, p.fullA) {
			return false, 0, nil
		}
		if c.pre.req != nil {
			ok, err := p.ev.boolean(c.pre.req, p.fullA, "action "+a.Name+": requires")
			if err != nil || !ok {
				return false, 0, err
			}
		}
	}
	if a.cost == nil {
		return true, a.Cost, nil
	}
	var slot *costEntry
	var key [costWords]uint64
	if c.memo != nil {
		if slot, key = c.memo.slot(w); slot.gen == p.gen && slot.w == key {
			return true, slot.cost, nil
		}
	}
	if !*unpacked {
		if err := p.unpack(w, p.fullA); err != nil {
			return false, 0, err
		}
		*unpacked = true
	}
	cost, err := p.cost(a, p.fullA)
	if err != nil {
		return false, 0, err
	}
	if slot != nil {
		slot.gen, slot.w, slot.cost = p.gen, key, cost
	}
	return true, cost, nil
}

// costMemo remembers an expression cost by the words of the packed
// state it reads: expressions are pure, so the same words give the same
// cost within a search (facts outside the key are the search's
// constants; gen tells searches apart).
type costMemo struct {
	words []int32 // at most costWords
	slots [memoSize]costEntry
}

const costWords = 4

type costEntry struct {
	gen  uint64 // the search that wrote it; 0: empty
	w    [costWords]uint64
	cost float64
}

// newCostMemo returns a memo for expression x in layout l, or nil when x
// reads more than costWords words.
func newCostMemo(d *Domain, l *layout, x *expression) *costMemo {
	var words []int32
	add := func(w int32) {
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	var read func(f int)
	read = func(f int) {
		if f >= len(d.Facts) {
			for _, r := range d.Derived[f-len(d.Facts)].x.reads {
				if r < len(d.Facts) {
					read(r)
				}
			}
			return
		}
		at := l.locs[f]
		switch at.kind {
		case notKey:
		case bitLoc:
			add(at.word)
			if l.presence {
				add(at.word + int32(l.bools))
			}
		default:
			add(at.word)
		}
	}
	for _, f := range x.reads {
		read(f)
	}
	if len(words) > costWords {
		return nil
	}
	return &costMemo{words: words}
}

func (m *costMemo) slot(w []uint64) (*costEntry, [costWords]uint64) {
	var k [costWords]uint64
	h := uint64(0)
	for i, wi := range m.words {
		k[i] = w[wi]
		h = (h ^ k[i]) * 0x9e3779b97f4a7c15
	}
	return &m.slots[h>>58], k
}

// cost is a's expression cost in state vector s.
func (p *Planner) cost(a *Action, s []value) (float64, error) {
	c, err := p.ev.number(a.cost, s, "action "+a.Name+": cost")
	if err != nil {
		return 0, err
	}
	if c < a.MinCost {
		return 0, &EvalError{Where: "action " + a.Name + ": cost", Err: fmt.Errorf("%q gave %s in state %s, below the action's minCost %s",
			a.CostExpr, formatNumber(c), p.d.state(s), formatNumber(a.MinCost))}
	}
	return c, nil
}

// estimate is the heuristic in packed state w.
func (p *Planner) estimate(w []uint64) (float64, error) {
	h := p.prob.h
	if h.derived {
		if err := p.unpack(w, p.fullB); err != nil {
			return 0, err
		}
	}
	unsat, per := 0, 0.0
	for i := range h.facts {
		gf := &h.facts[i]
		var failing bool
		var b float64
		switch {
		case gf.at.kind == bitLoc && !p.prob.lay.presence:
			if w[gf.at.word]&gf.at.bit != 0 {
				b = gf.byBool[1]
			} else {
				b = gf.byBool[0]
			}
			failing = b >= 0
		case gf.at.kind == numLoc && w[gf.at.word] != absentNum:
			b = gf.numBound(w[gf.at.word])
			failing = b >= 0
		case gf.derived:
			failing, b = gf.bound(p.fullB[gf.fact])
		default:
			failing, b = gf.bound(p.get(w, gf.fact))
		}
		if math.IsInf(b, 1) {
			return b, nil
		}
		if failing {
			unsat++
			if b > per {
				per = b
			}
		}
	}
	return h.combine(unsat, per), nil
}

// goalHolds reports whether the goal's conditions hold in record r's
// state.
func (p *Planner) goalHolds(r int32) (bool, error) {
	t := &p.prob.goalT
	w := p.stateWords(r)
	if t.never || !t.fast(p, w) || !allHold2(t.consts, p.start) {
		return false, nil
	}
	if len(t.slow) == 0 {
		return true, nil
	}
	if err := p.unpack(w, p.fullA); err != nil {
		return false, err
	}
	return allHold2(t.slow, p.fullA), nil
}

// solution is the plan that ends at record last.
func (p *Planner) solution(last int32) *Solution {
	p.path = p.path[:0]
	for i := last; p.recs[i].parent >= 0; i = p.recs[i].parent {
		p.path = append(p.path, i)
	}
	slices.Reverse(p.path)
	p.sol = Solution{p: p, prob: p.prob, path: p.path, cost: p.recs[last].g, stats: p.stats}
	return &p.sol
}

// anyAction plans for a goal without conditions: every state an action
// reaches satisfies it, so the cheapest plan is the cheapest action that
// applies in the start state (ties to the first in the domain).
func (p *Planner) anyAction(opts Options) (*Solution, error) {
	pr := p.prob
	p.add(-1, 0, false, -1, -1, 0, 0, 0, nil, 0)
	p.stats.Expanded = 1
	best, bestCost := -1, 0.0
	unpacked := false
	for ai := range pr.acts {
		c := &pr.acts[ai]
		if c.pre.never || !allHold2(c.pre.consts, p.start) {
			continue
		}
		ok, cost, err := p.applies(c, nil, &unpacked)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		p.stats.Generated++
		if opts.MaxCost > 0 && cost > opts.MaxCost {
			p.pruned = true
			continue
		}
		if best < 0 || cost < bestCost {
			best, bestCost = ai, cost
		}
	}
	if best < 0 {
		return nil, p.unreachable(opts)
	}
	p.recs = append(p.recs, rec{g: bestCost, cost: bestCost, parent: 0, act: int32(best)})
	return p.solution(1), nil
}

// unreachable explains why the goal cannot be reached from the start.
func (p *Planner) unreachable(opts Options) error {
	pr := p.prob
	e := &UnreachableError{Goal: pr.goal.Name, Unsatisfied: unsatisfied(pr.goal.Conditions, p.start)}
	var why []string
	if len(pr.goal.Conditions) == 0 {
		why = append(why, "the goal has no conditions, so any one action reaches it, but no usable action applies")
	} else {
		why = pr.h.explain(p.d, p.start, pr.disabled)
	}
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("no sequence of usable actions reaches it; searched %d states", p.stats.Expanded))
		if p.pruned {
			why[0] = fmt.Sprintf("no plan costs at most %s (Options.MaxCost); searched %d states", formatNumber(opts.MaxCost), p.stats.Expanded)
		}
	} else if len(pr.goal.Conditions) == 0 && p.pruned {
		why[0] = fmt.Sprintf("the goal has no conditions, so any one action reaches it, but none that applies costs at most %s (Options.MaxCost)", formatNumber(opts.MaxCost))
	}
	if len(pr.goal.Conditions) == 0 {
		var off []string
		for _, a := range pr.disabled {
			off = append(off, fmt.Sprintf("%s (skill %s)", a.Name, a.Skill))
		}
		if len(off) > 0 {
			why[0] += "; disabled: " + strings.Join(off, ", ")
		}
	}
	e.Why = strings.Join(why, "; ")
	return e
}

package goap

import "math"

// The search works on packed states: a few machine words per state that
// hold only the key facts (the relevant facts the usable actions change).
// A bool fact is a bit; a number a float64's bits; a string a number
// standing for it (the document's constants are numbered by Decode, other
// strings of the start state by the search). Preconditions and effects
// on key facts are compiled to word operations: a precondition on bool
// facts is one mask-and-compare per word, an effect one and-not-or. The
// facts outside the key keep their start values for the whole search, so
// conditions on them are checked once, on the start state.

// absentNum is an absent number in a packed state: a NaN that arithmetic
// never produces (numbers in states are finite, and effects add finite
// amounts).
const absentNum uint64 = 0x7ff4_0000_0000_0001

type locKind uint8

const (
	notKey locKind = iota // the fact keeps its start value
	bitLoc
	numLoc
	strLoc
)

// loc is where a fact lives in a packed state.
type loc struct {
	kind locKind
	word int32
	bit  uint64 // for bitLoc
}

// layout places a problem's key facts in a packed state: the bool facts'
// value words, then (when some bool fact has no default and so may be
// absent) as many presence words, then one word per number or string.
type layout struct {
	words    int // per state
	bools    int // value words
	presence bool
	locs     []loc // by fact index
}

func newLayout(d *Domain, key []int) layout {
	l := layout{locs: make([]loc, len(d.Facts))}
	nb := 0
	for _, f := range key {
		if d.Facts[f].Type == Bool {
			nb++
			l.presence = l.presence || d.Facts[f].Default == nil
		}
	}
	l.bools = (nb + 63) / 64
	next := l.bools
	if l.presence {
		next += l.bools
	}
	b := 0
	for _, f := range key {
		switch d.Facts[f].Type {
		case Bool:
			l.locs[f] = loc{kind: bitLoc, word: int32(b / 64), bit: 1 << (b % 64)}
			b++
		case Number:
			l.locs[f] = loc{kind: numLoc, word: int32(next)}
			next++
		default:
			l.locs[f] = loc{kind: strLoc, word: int32(next)}
			next++
		}
	}
	l.words = next
	return l
}

// btest holds when w[word] & mask == want.
type btest struct {
	word       int32
	mask, want uint64
}

// ivtest holds when the number in w[word] is within [lo, hi]: lt, lte,
// gt, gte and equals are all intervals (x > 3 is x >= the next float after
// 3), and an absent number, a NaN, is within none.
type ivtest struct {
	word   int32
	lo, hi float64
}

// ntest is a comparison of a number word that is no interval (ne,
// exists); val is 1 or 0 for Exists.
type ntest struct {
	word int32
	op   Op
	val  float64
}

// stest compares a string word with a string's number; for Exists, id is
// 1 (exists) or 0 (does not).
type stest struct {
	word int32
	op   Op
	id   uint64
}

// tests are conditions compiled against a layout.
type tests struct {
	bits []btest
	ivs  []ivtest
	nums []ntest
	strs []stest
	// gen are conditions on key facts with no word form (a bool "ne
	// false" when bools may be absent), checked on the fact's value.
	gen []*Condition
	// slow need the whole state vector: conditions on derived facts, and
	// the requires expression.
	slow []*Condition
	req  *expression
	// consts are conditions on facts outside the key, checked once on
	// the start state.
	consts []*Condition
	never  bool // two tests contradict each other
}

func (t *tests) addBit(word int32, mask, want uint64) {
	for i := range t.bits {
		b := &t.bits[i]
		if b.word != word {
			continue
		}
		if b.mask&mask != 0 && b.want&mask != want {
			t.never = true
		}
		b.mask |= mask
		b.want |= want
		return
	}
	t.bits = append(t.bits, btest{word: word, mask: mask, want: want})
}

// compileTests compiles conditions (and a requires expression) against
// layout l.
func compileTests(d *Domain, l *layout, cs []Condition, req *expression) tests {
	var t tests
	t.req = req
	for i := range cs {
		c := &cs[i]
		if c.fact >= len(d.Facts) {
			t.slow = append(t.slow, c)
			continue
		}
		at := l.locs[c.fact]
		switch at.kind {
		case notKey:
			t.consts = append(t.consts, c)
		case numLoc:
			v, lo, hi := c.val.num, math.Inf(-1), math.Inf(1)
			switch c.Op {
			case Equals:
				lo, hi = v, v
			case Less:
				hi = math.Nextafter(v, lo)
			case LessEq:
				hi = v
			case Greater:
				lo = math.Nextafter(v, hi)
			case GreaterEq:
				lo = v
			default:
				t.nums = append(t.nums, ntest{word: at.word, op: c.Op, val: v})
				continue
			}
			t.ivs = append(t.ivs, ivtest{word: at.word, lo: lo, hi: hi})
		case strLoc:
			id := d.strID[c.val.str]
			if c.Op == Exists {
				id = uint64(c.val.num)
			}
			t.strs = append(t.strs, stest{word: at.word, op: c.Op, id: id})
		case bitLoc:
			truth := c.val.num != 0
			pres := at.word + int32(l.bools)
			switch {
			case c.Op == Equals:
				t.addBit(at.word, at.bit, bitIf(truth, at.bit))
				if l.presence {
					t.addBit(pres, at.bit, at.bit)
				}
			case c.Op == NotEquals && truth: // false or absent: the value bit is 0
				t.addBit(at.word, at.bit, 0)
			case c.Op == NotEquals && !l.presence: // true
				t.addBit(at.word, at.bit, at.bit)
			case c.Op == NotEquals: // true or absent
				t.gen = append(t.gen, c)
			case !l.presence: // exists: every bool fact of the layout has a default
				t.never = t.never || !truth
			default:
				t.addBit(pres, at.bit, bitIf(truth, at.bit))
			}
		}
	}
	return t
}

func bitIf(b bool, bit uint64) uint64 {
	if b {
		return bit
	}
	return 0
}

// fast reports whether the tests on key facts hold in packed state w
// (gen through get); slow and consts are the caller's.
func (t *tests) fast(p *Planner, w []uint64) bool {
	for _, b := range t.bits {
		if w[b.word]&b.mask != b.want {
			return false
		}
	}
	for _, iv := range t.ivs {
		if x := math.Float64frombits(w[iv.word]); !(x >= iv.lo && x <= iv.hi) {
			return false
		}
	}
	for i := range t.nums {
		if !t.nums[i].holds(w[t.nums[i].word]) {
			return false
		}
	}
	for _, s := range t.strs {
		id := w[s.word]
		switch s.op {
		case Equals:
			if id != s.id {
				return false
			}
		case NotEquals:
			if id == s.id {
				return false
			}
		default: // Exists
			if (id != 0) != (s.id != 0) {
				return false
			}
		}
	}
	for _, c := range t.gen {
		if !c.holds(p.get(w, c.fact)) {
			return false
		}
	}
	return true
}

// plainHolds is fast for tests of bits and intervals only.
func (t *tests) plainHolds(w []uint64) bool {
	for _, b := range t.bits {
		if w[b.word]&b.mask != b.want {
			return false
		}
	}
	for _, iv := range t.ivs {
		if x := math.Float64frombits(w[iv.word]); !(x >= iv.lo && x <= iv.hi) {
			return false
		}
	}
	return true
}

func (n *ntest) holds(x uint64) bool {
	if x == absentNum {
		return n.op == NotEquals || n.op == Exists && n.val == 0
	}
	if n.op == NotEquals {
		return math.Float64frombits(x) != n.val
	}
	return n.val != 0 // Exists, and the number is present
}

// beff sets bits: w[word] = w[word] &^ clr | set.
type beff struct {
	word     int32
	clr, set uint64
}

// neff changes a number word: sets it to val, or adds val (an absent
// number counting as 0).
type neff struct {
	word int32
	set  bool
	val  float64
}

// seff sets a string word.
type seff struct {
	word int32
	id   uint64
}

// effects are an action's effects on key facts, compiled against a
// layout. Effects on other facts cannot matter to the goal (the facts are
// not relevant), so the search leaves them out; Solution.Result replays
// them all.
type effects struct {
	bits []beff
	nums []neff
	strs []seff
}

func (e *effects) addBit(word int32, clr, set uint64) {
	for i := range e.bits {
		if e.bits[i].word == word {
			e.bits[i].clr |= clr
			e.bits[i].set |= set
			return
		}
	}
	e.bits = append(e.bits, beff{word: word, clr: clr, set: set})
}

func compileEffects(d *Domain, l *layout, es []Effect) effects {
	var out effects
	for i := range es {
		e := &es[i]
		at := l.locs[e.fact]
		switch at.kind {
		case bitLoc:
			out.addBit(at.word, at.bit, bitIf(e.val.num != 0, at.bit))
			if l.presence {
				out.addBit(at.word+int32(l.bools), 0, at.bit)
			}
		case numLoc:
			n := neff{word: at.word, set: e.Op == Set, val: e.val.num}
			if e.Op == Dec {
				n.val = -n.val
			}
			out.nums = append(out.nums, n)
		case strLoc:
			out.strs = append(out.strs, seff{word: at.word, id: d.strID[e.val.str]})
		}
	}
	return out
}

func (n neff) apply(x uint64) uint64 {
	if n.set {
		return math.Float64bits(n.val)
	}
	f := n.val
	if x != absentNum {
		f += math.Float64frombits(x)
	}
	if f == 0 {
		f = 0 // -0 and 0 are one state
	}
	return math.Float64bits(f)
}

func (e *effects) apply(w []uint64) {
	for _, b := range e.bits {
		w[b.word] = w[b.word]&^b.clr | b.set
	}
	for _, n := range e.nums {
		w[n.word] = n.apply(w[n.word])
	}
	for _, s := range e.strs {
		w[s.word] = s.id
	}
}

// get is fact f's value in packed state w: from the word for a key fact,
// from the start state for any other.
func (p *Planner) get(w []uint64, f int) value {
	l := &p.prob.lay
	at := l.locs[f]
	switch at.kind {
	case bitLoc:
		if l.presence && w[int(at.word)+l.bools]&at.bit == 0 {
			return value{}
		}
		return boolValue(w[at.word]&at.bit != 0)
	case numLoc:
		if w[at.word] == absentNum {
			return value{}
		}
		return value{k: kNumber, num: math.Float64frombits(w[at.word])}
	case strLoc:
		if w[at.word] == 0 {
			return value{}
		}
		return value{k: kString, str: p.str(w[at.word])}
	}
	return p.start[f]
}

// pack writes the key facts of state vector v into w.
func (p *Planner) pack(v []value, w []uint64) {
	l := &p.prob.lay
	clear(w)
	for _, f := range p.prob.key {
		at := l.locs[f]
		x := v[f]
		switch at.kind {
		case bitLoc:
			if x.k != absent {
				w[at.word] |= bitIf(x.num != 0, at.bit)
				if l.presence {
					w[int(at.word)+l.bools] |= at.bit
				}
			}
		case numLoc:
			w[at.word] = absentNum
			if x.k != absent {
				w[at.word] = math.Float64bits(x.num)
			}
		case strLoc:
			if x.k != absent {
				w[at.word] = p.strNum(x.str)
			}
		}
	}
}

// unpack is the whole state vector of packed state w, derived facts
// included, in out.
func (p *Planner) unpack(w []uint64, out []value) error {
	n := len(p.d.Facts)
	copy(out[:n], p.start[:n])
	for _, f := range p.prob.key {
		out[f] = p.get(w, f)
	}
	if len(p.d.Derived) > 0 {
		return p.ev.derive(out)
	}
	return nil
}

// strNum is the number standing for string s: the document's, or one the
// search gives the strings of the start state the document lacks.
func (p *Planner) strNum(s string) uint64 {
	if id, ok := p.d.strID[s]; ok {
		return id
	}
	if id, ok := p.xstrID[s]; ok {
		return id
	}
	id := uint64(len(p.d.strs) + len(p.xstrs))
	p.xstrID[s] = id
	p.xstrs = append(p.xstrs, s)
	return id
}

func (p *Planner) str(id uint64) string {
	if id < uint64(len(p.d.strs)) {
		return p.d.strs[id]
	}
	return p.xstrs[id-uint64(len(p.d.strs))]
}

package htn

import "unsafe"

// state is the world state of one run: the program's facts, minus the
// ones deleted, plus the ones added, in the reference's order (document
// order, then additions in the order they happened; a deleted base fact
// that is added again moves to the end).
//
// All search nodes share one state. Every change is written to an undo
// log, and a node that is abandoned rolls the state back to the log length
// it started with, so the memory a branch needs grows with the number of
// changes on it, not with the size of the state times the depth.
type state struct {
	prog     *Program
	baseDel  []bool // by fact id
	adds     []added
	predAdds map[predKey][]int32 // indices into adds, in addition order
	addIndex map[uint64][]int32  // hash of the fact -> indices into adds
	log      []undoRec
	deleted  int   // base facts currently deleted
	alive    int   // additions currently alive
	addBytes int64 // what the terms of the additions hold, less those kept by plans
}

type added struct {
	t     term
	hash  uint64
	key   predKey
	alive bool
	kept  bool  // a collected plan holds the term, which now counts as the plan's
	bytes int64 // what building the term allocated
}

type undoOp uint8

const (
	undoBaseDel undoOp = iota
	undoAddDel
	undoAdd
)

type undoRec struct {
	op undoOp
	id int32
}

func newState(p *Program) *state {
	return &state{
		prog:     p,
		baseDel:  make([]bool, len(p.facts)),
		predAdds: map[predKey][]int32{},
		addIndex: map[uint64][]int32{},
	}
}

// find looks a ground fact up: a base fact id (>= 0) or -(add index)-1.
func (s *state) find(t term, h uint64) (int32, bool) {
	for _, id := range s.prog.factIndex[h] {
		if !s.baseDel[id] && equalGround(s.prog.facts[id].head, t) {
			return id, true
		}
	}
	for _, idx := range s.addIndex[h] {
		a := &s.adds[idx]
		if a.alive && equalGround(a.t, t) {
			return -idx - 1, true
		}
	}
	return 0, false
}

// remove deletes a ground fact; it reports false when the fact is absent.
func (s *state) remove(t term) bool {
	ref, ok := s.find(t, hashTerm(t))
	if !ok {
		return false
	}
	if ref >= 0 {
		s.baseDel[ref] = true
		s.deleted++
		s.log = append(s.log, undoRec{op: undoBaseDel, id: ref})
		return true
	}
	idx := -ref - 1
	s.adds[idx].alive = false
	s.alive--
	s.log = append(s.log, undoRec{op: undoAddDel, id: idx})
	return true
}

// insert adds a ground fact; it reports false when the fact is already
// there. bytes is what building t allocated, which the state now holds.
func (s *state) insert(t term, bytes int64) bool {
	h := hashTerm(t)
	if _, ok := s.find(t, h); ok {
		return false
	}
	idx := int32(len(s.adds))
	k := headKey(t)
	s.adds = append(s.adds, added{t: t, hash: h, key: k, alive: true, bytes: bytes})
	s.addBytes += bytes
	s.predAdds[k] = append(s.predAdds[k], idx)
	s.addIndex[h] = append(s.addIndex[h], idx)
	s.alive++
	s.log = append(s.log, undoRec{op: undoAdd, id: idx})
	return true
}

// mark returns a point the state can be rolled back to.
func (s *state) mark() int { return len(s.log) }

// undo rolls the state back to a mark. Marks must be undone in LIFO order,
// which the depth-first search guarantees.
func (s *state) undo(m int) {
	for len(s.log) > m {
		r := s.log[len(s.log)-1]
		s.log = s.log[:len(s.log)-1]
		switch r.op {
		case undoBaseDel:
			s.baseDel[r.id] = false
			s.deleted--
		case undoAddDel:
			s.adds[r.id].alive = true
			s.alive++
		case undoAdd:
			a := s.adds[r.id]
			pa := s.predAdds[a.key]
			s.predAdds[a.key] = pa[:len(pa)-1]
			ai := s.addIndex[a.hash]
			if len(ai) == 1 {
				delete(s.addIndex, a.hash)
			} else {
				s.addIndex[a.hash] = ai[:len(ai)-1]
			}
			if !a.kept {
				s.addBytes -= a.bytes
			}
			s.adds = s.adds[:len(s.adds)-1]
			s.alive--
		}
	}
}

// facts returns the current facts in the reference's order. Base facts
// that contain variables (rules with an empty body) are included, as
// ToStringFacts does.
func (s *state) facts() []term {
	out := make([]term, 0, len(s.prog.facts)-s.deleted+s.alive)
	for id, c := range s.prog.facts {
		if !s.baseDel[id] {
			out = append(out, c.shown)
		}
	}
	for i := range s.adds {
		if s.adds[i].alive {
			out = append(out, s.adds[i].t)
		}
	}
	return out
}

// keep marks the terms of the live additions as held by a collected plan
// and returns the bytes that moved from the state to the plans.
func (s *state) keep() int64 {
	var n int64
	for i := range s.adds {
		if a := &s.adds[i]; a.alive && !a.kept {
			a.kept = true
			n += a.bytes
		}
	}
	s.addBytes -= n
	return n
}

// memBytes estimates the memory the state holds for one run: the deleted
// marks, the undo log and the additions with their terms and indexes, at
// the capacity of their slices.
func (s *state) memBytes() int64 {
	return sliceBytes(len(s.baseDel), 1) + sliceBytes(cap(s.log), int64(unsafe.Sizeof(undoRec{}))) +
		sliceBytes(cap(s.adds), sizeAdded) + s.addBytes + int64(len(s.adds))*indexEntryBytes
}

package goap

import (
	"fmt"
	"slices"
	"strings"
)

// State is a world state: facts by name, each a bool, a number (any Go
// numeric type or json.Number) or a string. It is typically the session
// state document. Members the domain does not declare are ignored; a
// declared fact the state lacks takes its default, or is absent if it has
// none.
type State map[string]any

// vector converts s to one value per declared fact. It returns an error
// matching ErrInvalidState when a declared fact has a value of the wrong
// type.
func (d *Domain) vector(s State) ([]value, error) {
	out := make([]value, len(d.Facts))
	for i := range d.Facts {
		f := &d.Facts[i]
		x, ok := s[f.Name]
		if !ok || x == nil {
			out[i] = f.def
			continue
		}
		v, err := valueOf(x)
		if err != nil {
			return nil, fmt.Errorf("%w: fact %s: %v", ErrInvalidState, f.Name, err)
		}
		if v.k != f.Type.kind() {
			return nil, fmt.Errorf("%w: fact %s is a %s, got %s", ErrInvalidState, f.Name, f.Type, v)
		}
		out[i] = v
	}
	return out, nil
}

// state converts a vector back: every declared fact that is present.
func (d *Domain) state(v []value) State {
	s := make(State, len(v))
	for i := range v {
		if v[i].k != absent {
			s[d.Facts[i].Name] = v[i].any()
		}
	}
	return s
}

// key is the canonical state key: the values of facts, which Plan chooses
// as the relevant facts the usable actions change (the seed's "important
// facts"). Incremented facts are among them whenever they matter, or
// states that differ only in a counter would be merged and plans that
// repeat an action lost.
func key(buf []byte, facts []int, v []value) []byte {
	buf = buf[:0]
	for _, i := range facts {
		buf = v[i].appendKey(buf)
	}
	return buf
}

// Normalize returns the domain's view of s: every declared fact with its
// value (defaults filled in, numbers as float64), absent facts left out,
// undeclared members dropped. It fails like Plan on a mistyped fact.
func (d *Domain) Normalize(s State) (State, error) {
	v, err := d.vector(s)
	if err != nil {
		return nil, err
	}
	return d.state(v), nil
}

// Satisfied reports whether the named goal's conditions hold in s.
func (d *Domain) Satisfied(goal string, s State) (bool, error) {
	g := d.goals[goal]
	if g == nil {
		return false, fmt.Errorf("%w: %q", ErrUnknownGoal, goal)
	}
	v, err := d.vector(s)
	if err != nil {
		return false, err
	}
	return allHold(g.Conditions, v), nil
}

// String formats the state as "{a: true, wood: 3}" with sorted names, for
// messages and tests.
func (s State) String() string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		if v, err := valueOf(s[n]); err == nil {
			fmt.Fprintf(&b, "%s: %s", n, v)
		} else {
			fmt.Fprintf(&b, "%s: %v", n, s[n])
		}
	}
	b.WriteByte('}')
	return b.String()
}

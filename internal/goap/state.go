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

// vector converts s to a state vector: one value per declared fact, then
// the derived facts computed from them. It returns an error matching
// ErrInvalidState when a declared fact has a value of the wrong type, and
// an *EvalError when a derived fact's expression fails.
func (d *Domain) vector(s State) ([]value, error) {
	out := make([]value, d.slots())
	var ev *evaluator
	if len(d.Derived) > 0 {
		ev = newEvaluator(d)
	}
	if err := d.vectorInto(out, s, ev); err != nil {
		return nil, err
	}
	return out, nil
}

// vectorInto is vector into out, which has d.slots() values; ev computes
// the derived facts and may be nil when the domain has none.
func (d *Domain) vectorInto(out []value, s State, ev *evaluator) error {
	copy(out, d.defs)
	if len(s) < len(d.Facts) {
		// Fewer members than facts: look the members up. Errors name the
		// first bad fact in Facts order either way.
		bad := -1
		for name, x := range s {
			if i, ok := d.facts[name]; ok && i < len(d.Facts) && x != nil && (bad < 0 || i < bad) {
				if err := d.set(out, i, x); err != nil {
					bad = i
				}
			}
		}
		if bad >= 0 {
			return d.set(out, bad, s[d.Facts[bad].Name])
		}
	} else {
		for i := range d.Facts {
			if x := s[d.Facts[i].Name]; x != nil {
				if err := d.set(out, i, x); err != nil {
					return err
				}
			}
		}
	}
	if len(d.Derived) > 0 {
		return ev.derive(out)
	}
	return nil
}

// set converts x to fact i's value in out, or says what is wrong with it.
func (d *Domain) set(out []value, i int, x any) error {
	f := &d.Facts[i]
	v, err := valueOf(x)
	if err != nil {
		return fmt.Errorf("%w: fact %s: %v", ErrInvalidState, f.Name, err)
	}
	if v.k != f.Type.kind() {
		return fmt.Errorf("%w: fact %s is a %s, got %s", ErrInvalidState, f.Name, f.Type, v)
	}
	out[i] = v
	return nil
}

// state converts a vector back: every declared fact that is present.
// Derived facts are left out: they are not part of the world, only read
// from it.
func (d *Domain) state(v []value) State {
	s := make(State, len(d.Facts))
	for i := range d.Facts {
		if v[i].k != absent {
			s[d.Facts[i].Name] = v[i].any()
		}
	}
	return s
}

// Normalize returns the domain's view of s: every declared fact with its
// value (defaults filled in, numbers as float64), absent facts left out,
// undeclared members and derived facts dropped. It fails like Plan on a
// mistyped fact or a derived fact whose expression fails.
func (d *Domain) Normalize(s State) (State, error) {
	v, err := d.vector(s)
	if err != nil {
		return nil, err
	}
	return d.state(v), nil
}

// Satisfied reports whether the named goal's conditions hold in s; a goal
// without conditions is never satisfied. Errors: ErrUnknownGoal,
// ErrInvalidState, or *EvalError for a derived fact that fails.
func (d *Domain) Satisfied(goal string, s State) (bool, error) {
	g := d.goals[goal]
	if g == nil {
		return false, fmt.Errorf("%w: %q", ErrUnknownGoal, goal)
	}
	v, err := d.vector(s)
	if err != nil {
		return false, err
	}
	return satisfied(g, v), nil
}

// satisfied reports whether goal g holds in state vector v. A goal without
// conditions never does: it always has something to do.
func satisfied(g *Goal, v []value) bool {
	return len(g.Conditions) > 0 && allHold(g.Conditions, v)
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

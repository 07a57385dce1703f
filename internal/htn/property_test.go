package htn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The optimised routines below are checked against naive ones on random
// inputs.

// TestStateMatchesCopyModel checks the undo-logged state against a model
// that copies the whole fact list at every mark, as the reference does.
func TestStateMatchesCopyModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := []string{"f(0)", "f(1)", "g(a)", "g(b)", "h"}
		prog, err := Parse(strings.Join(base, ". ") + ".")
		if err != nil {
			t.Fatal(err)
		}
		r := newRun(context.Background(), prog, Options{})
		universe := []string{"f(0)", "f(1)", "f(2)", "g(a)", "g(b)", "g(c)", "h", "k(f(1))"}
		model := slices.Clone(base)
		type saved struct {
			mark  int
			facts []string
		}
		var marks []saved
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); op {
			case 0, 1:
				f := rapid.SampledFrom(universe).Draw(t, "fact")
				ft := parseTerm(t, r, f)
				i := slices.Index(model, f)
				if op == 0 {
					if got, want := r.st.insert(ft, 0), i < 0; got != want {
						t.Fatalf("insert(%s) = %v, want %v", f, got, want)
					}
					if i < 0 {
						model = append(model, f)
					}
				} else {
					if got, want := r.st.remove(ft), i >= 0; got != want {
						t.Fatalf("remove(%s) = %v, want %v", f, got, want)
					}
					if i >= 0 {
						model = slices.Delete(model, i, i+1)
					}
				}
			case 2:
				marks = append(marks, saved{r.st.mark(), slices.Clone(model)})
			case 3:
				if len(marks) == 0 {
					continue
				}
				m := marks[len(marks)-1]
				marks = marks[:len(marks)-1]
				r.st.undo(m.mark)
				model = m.facts
			}
			var got []string
			pr := printer{syms: r.syms}
			for _, f := range r.st.facts() {
				got = append(got, pr.String(f))
			}
			if !slices.Equal(got, model) {
				t.Fatalf("facts: got %v, want %v", got, model)
			}
		}
	})
}

func parseTerm(t *rapid.T, r *run, s string) term {
	ps := newParser(s, r.syms)
	goals, err := ps.parseGoalList()
	if err != nil || len(goals) != 1 {
		t.Fatalf("parse %q: %v", s, err)
	}
	return goals[0]
}

// TestIndexMatchesScan checks first-argument indexing against trying
// every clause.
func TestIndexMatchesScan(t *testing.T) {
	args := []string{"a", "b", "1", "2.5", "f(a)", "f(b)", "g(a, b)", "?X", "_"}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		for i := range rapid.IntRange(1, 12).Draw(t, "clauses") {
			a1 := rapid.SampledFrom(args).Draw(t, fmt.Sprint("a1-", i))
			a2 := rapid.SampledFrom(args).Draw(t, fmt.Sprint("a2-", i))
			if rapid.Bool().Draw(t, fmt.Sprint("rule-", i)) {
				fmt.Fprintf(&b, "p(%s, %s) :- q(%s).\n", a1, a2, a2)
			} else {
				fmt.Fprintf(&b, "p(%s, %s) :- .\n", a1, a2)
			}
		}
		b.WriteString("q(a). q(1). q(f(b)).\n")
		prog, err := Parse(b.String())
		if err != nil {
			t.Skip(err) // duplicate ground facts
		}
		goal := fmt.Sprintf("p(%s, ?Y)", rapid.SampledFrom(args).Draw(t, "goal"))
		indexed, err1 := prog.Query(context.Background(), goal, Options{})
		prog.noIndex = true
		scanned, err2 := prog.Query(context.Background(), goal, Options{})
		if err1 != nil || err2 != nil {
			t.Fatalf("errors: %v, %v", err1, err2)
		}
		if got, want := FormatQuery(indexed), FormatQuery(scanned); got != want {
			t.Fatalf("%s on\n%s\nindexed: %s\nscanned: %s", goal, b.String(), got, want)
		}
	})
}

// TestCppSortMatchesStableSort checks the std::sort emulation against a
// stable sort: with distinct keys every correct sort gives one order.
func TestCppSortMatchesStableSort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfDistinct(rapid.IntRange(-1000, 1000), rapid.ID[int]).Draw(t, "keys")
		got := slices.Clone(keys)
		cppSort(got, func(a, b *int) bool { return *a < *b })
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("cppSort(%v) = %v, want %v", keys, got, want)
		}
	})
}

// TestFloatCanonical checks that every computed float reads back from the
// 9-decimal text the reference stores it as.
func TestFloatCanonical(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Float64Range(-1e9, 1e9).Draw(t, "v")
		f := floatTerm(v)
		syms := newSymtab()
		back := syms.atom(formatFloat(f.float()))
		if back.k != kFloat || back.n != f.n {
			t.Fatalf("float %v: text %s reads back as %+v", v, formatFloat(f.float()), back)
		}
	})
}

package dag

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func nodes(spec string) []Node {
	// "A:;B:A;C:A,B" -> nodes in that order
	var out []Node
	for _, part := range strings.Split(spec, ";") {
		id, deps, _ := strings.Cut(part, ":")
		n := Node{ID: id}
		if deps != "" {
			n.Deps = strings.Split(deps, ",")
		}
		out = append(out, n)
	}
	return out
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		wantErr error
		wantMsg string
	}{
		{"empty id", "A:;:A", ErrEmptyID, "node #1 has an empty id"},
		{"duplicate", "A:;B:A;A:", ErrDuplicateID, `node #2: duplicate id "A"`},
		{"unknown dep", "A:;D:X", ErrUnknownDep, `"D" depends on unknown "X"`},
		{"self dep", "A:;B:B", ErrSelfDep, `"B" depends on itself`},
		{"duplicate dep", "A:;B:A,A", ErrDuplicateDep, `"B" lists dependency "A" more than once`},
		{"two cycle", "A:;B:A,C;C:B", ErrCycle, "cycle: B -> C -> B"},
		{"three cycle", "A:C;B:A;C:B", ErrCycle, "cycle: A -> C -> B -> A"},
		{"cycle after acyclic part", "X:;Y:X;A:Y,C;B:A;C:B;Z:C", ErrCycle, "cycle: A -> C -> B -> A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(nodes(tt.spec))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("message = %q, want %q", err.Error(), tt.wantMsg)
			}
		})
	}
}

func TestCycleErrorPath(t *testing.T) {
	_, err := New(nodes("A:;B:A,C;C:B"))
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *CycleError", err)
	}
	if diff := cmp.Diff([]string{"B", "C", "B"}, ce.Path); diff != "" {
		t.Errorf("path (-want +got):\n%s", diff)
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{"single", "A:", []string{"A"}},
		{"diamond", "A:;B:A;C:A;D:B,C", []string{"A", "B", "C", "D"}},
		{"document order among roots", "C:;A:;B:", []string{"C", "A", "B"}},
		{"declared out of order", "D:B,C;C:A;B:A;A:", []string{"A", "C", "B", "D"}},
		{"fifo not depth first", "A:;B:A;C:B;D:A", []string{"A", "B", "D", "C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(nodes(tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, g.OrderIDs()); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransitiveDependents(t *testing.T) {
	g, err := New(nodes("A:;B:A;C:A;D:B,C;E:;F:D"))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(xs []int) []string {
		var out []string
		for _, x := range xs {
			out = append(out, g.ID(x))
		}
		return out
	}
	b, _ := g.Index("B")
	if diff := cmp.Diff([]string{"D", "F"}, ids(g.TransitiveDependents(b))); diff != "" {
		t.Errorf("dependents of B (-want +got):\n%s", diff)
	}
	a, _ := g.Index("A")
	if diff := cmp.Diff([]string{"B", "C", "D", "F"}, ids(g.TransitiveDependents(a))); diff != "" {
		t.Errorf("dependents of A (-want +got):\n%s", diff)
	}
	e, _ := g.Index("E")
	if got := g.TransitiveDependents(e); len(got) != 0 {
		t.Errorf("dependents of E = %v, want none", ids(got))
	}
}

func TestTrackerDiamond(t *testing.T) {
	g, err := New(nodes("A:;B:A;C:A;D:B,C"))
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(g)
	pop := func() string {
		i, ok := tr.Pop()
		if !ok {
			return ""
		}
		return g.ID(i)
	}
	if got := pop(); got != "A" {
		t.Fatalf("first = %q, want A", got)
	}
	if got := pop(); got != "" {
		t.Fatalf("ready before A finished: %q", got)
	}
	tr.Satisfy(0)
	if got, want := pop()+pop(), "BC"; got != want {
		t.Fatalf("after A: %q, want %q", got, want)
	}
	tr.Satisfy(1)
	if got := pop(); got != "" {
		t.Fatalf("D ready with C unfinished: %q", got)
	}
	tr.Satisfy(1) // idempotent
	if got := tr.Remaining(3); got != 1 {
		t.Fatalf("remaining(D) = %d, want 1", got)
	}
	tr.Satisfy(2)
	if got := pop(); got != "D" {
		t.Fatalf("after B, C: %q, want D", got)
	}
}

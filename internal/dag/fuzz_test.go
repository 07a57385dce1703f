package dag

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzNew decodes bytes as a graph: byte 0 is the node count, then pairs of
// bytes (node, dep) add edges. New must never panic; an acyclic result must
// yield a valid topological order and a cycle must be a real one.
func FuzzNew(f *testing.F) {
	f.Add([]byte{4, 1, 0, 2, 0, 3, 1, 3, 2})
	f.Add([]byte{3, 0, 2, 1, 0, 2, 1})
	f.Add([]byte{2, 0, 0})
	f.Add([]byte{5, 4, 4, 4, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := int(data[0])%64 + 1
		ns := make([]Node, n)
		for i := range ns {
			ns[i].ID = fmt.Sprintf("t%d", i)
		}
		for k := 1; k+1 < len(data); k += 2 {
			i, j := int(data[k])%(n+1), int(data[k+1])%(n+1)
			if i == n {
				continue
			}
			dep := "missing"
			if j < n {
				dep = ns[j].ID
			}
			ns[i].Deps = append(ns[i].Deps, dep)
		}
		g, err := New(ns)
		var ce *CycleError
		var ne *NodeError
		switch {
		case err == nil:
			pos := map[int]int{}
			for k, i := range g.Order() {
				pos[i] = k
			}
			if len(pos) != n {
				t.Fatalf("order has %d nodes, want %d", len(pos), n)
			}
			for i := 0; i < n; i++ {
				for _, d := range g.Deps(i) {
					if pos[d] >= pos[i] {
						t.Fatalf("%s ordered before its dependency %s", g.ID(i), g.ID(d))
					}
				}
			}
		case errors.As(err, &ce):
			deps := map[string][]string{}
			for _, nd := range ns {
				deps[nd.ID] = nd.Deps
			}
			p := ce.Path
			if len(p) < 3 || p[0] != p[len(p)-1] {
				t.Fatalf("bad cycle path %v", p)
			}
			for k := 0; k+1 < len(p); k++ {
				found := false
				for _, d := range deps[p[k]] {
					found = found || d == p[k+1]
				}
				if !found {
					t.Fatalf("cycle %v: %s does not depend on %s", p, p[k], p[k+1])
				}
			}
		case errors.As(err, &ne):
		default:
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
	})
}

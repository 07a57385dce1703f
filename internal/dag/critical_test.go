package dag

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestCriticalPath(t *testing.T) {
	diamond := []Node{{ID: "A"}, {ID: "B", Deps: []string{"A"}}, {ID: "C", Deps: []string{"A"}}, {ID: "D", Deps: []string{"B", "C"}}}
	cases := []struct {
		name   string
		nodes  []Node
		weight map[string]int64
		want   []string
	}{
		{"empty", nil, nil, nil},
		{"single", []Node{{ID: "A"}}, nil, []string{"A"}},
		{"diamond, the slow branch", diamond, map[string]int64{"A": 1, "B": 5, "C": 9, "D": 1}, []string{"A", "C", "D"}},
		{"diamond, a tie takes Kahn order", diamond, map[string]int64{"A": 1, "B": 5, "C": 5, "D": 1}, []string{"A", "B", "D"}},
		{"nothing ran: the longest chain", []Node{{ID: "x"}, {ID: "a"}, {ID: "b", Deps: []string{"a"}}, {ID: "c", Deps: []string{"b"}}},
			nil, []string{"a", "b", "c"}},
		{"weight beats length", []Node{{ID: "slow"}, {ID: "a"}, {ID: "b", Deps: []string{"a"}}},
			map[string]int64{"slow": 10, "a": 1, "b": 1}, []string{"slow"}},
		{"a leaf in the middle of the document", []Node{{ID: "r"}, {ID: "l1", Deps: []string{"r"}}, {ID: "l2", Deps: []string{"r"}}},
			map[string]int64{"r": 1, "l1": 7, "l2": 3}, []string{"r", "l1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range g.CriticalPath(func(i int) int64 { return tc.weight[g.ID(i)] }) {
				got = append(got, g.ID(i))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// naiveCritical enumerates every root-to-leaf chain.
func naiveCritical(g *Graph, w []int64) (best int64, length int) {
	var walk func(i int, sum int64, n int)
	walk = func(i int, sum int64, n int) {
		sum += w[i]
		n++
		if len(g.Dependents(i)) == 0 && (sum > best || (sum == best && n > length)) {
			best, length = sum, n
		}
		for _, d := range g.Dependents(i) {
			walk(d, sum, n)
		}
	}
	for i := 0; i < g.Len(); i++ {
		if len(g.Deps(i)) == 0 {
			walk(i, 0, 0)
		}
	}
	return best, length
}

// The path is a chain of real dependencies from a root to a leaf, and its
// total and length are the best over every such chain.
func TestPropertyCriticalPathMatchesEnumeration(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 9).Draw(t, "n")
		nodes := make([]Node, n)
		w := make([]int64, n)
		for i := range nodes {
			nodes[i].ID = fmt.Sprint(i)
			for j := 0; j < i; j++ {
				if rapid.Bool().Draw(t, fmt.Sprintf("e%d-%d", j, i)) {
					nodes[i].Deps = append(nodes[i].Deps, fmt.Sprint(j))
				}
			}
			w[i] = int64(rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("w%d", i)))
		}
		g, err := New(nodes)
		if err != nil {
			t.Fatal(err)
		}
		path := g.CriticalPath(func(i int) int64 { return w[i] })
		if len(g.Deps(path[0])) != 0 || len(g.Dependents(path[len(path)-1])) != 0 {
			t.Fatalf("path %v does not run from a root to a leaf", path)
		}
		var sum int64
		for k, i := range path {
			sum += w[i]
			if k > 0 && !slices.Contains(g.Deps(i), path[k-1]) {
				t.Fatalf("path %v: %d does not depend on %d", path, i, path[k-1])
			}
		}
		best, length := naiveCritical(g, w)
		if sum != best || len(path) != length {
			t.Fatalf("path %v: total %d over %d nodes, want %d over %d", path, sum, len(path), best, length)
		}
	})
}

package dag

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genNodes draws a graph of up to 30 nodes. With acyclic set, every edge
// points to an earlier node in a random permutation, so the graph is a DAG
// declared in arbitrary order; otherwise edges may point anywhere.
func genNodes(t *rapid.T, acyclic bool) []Node {
	n := rapid.IntRange(1, 30).Draw(t, "n")
	perm := rapid.Permutation(rangeN(n)).Draw(t, "perm")
	ns := make([]Node, n)
	for i := range ns {
		ns[i].ID = fmt.Sprintf("n%d", i)
	}
	for i := range ns {
		k := rapid.IntRange(0, 4).Draw(t, "deg")
		seen := map[int]bool{}
		for range k {
			j := rapid.IntRange(0, n-1).Draw(t, "dep")
			if j == i || seen[j] {
				continue
			}
			if acyclic && slices.Index(perm, j) >= slices.Index(perm, i) {
				continue
			}
			seen[j] = true
			ns[i].Deps = append(ns[i].Deps, ns[j].ID)
		}
	}
	return ns
}

func rangeN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// naiveKahn is Kahn's algorithm over maps of in-degrees and adjacency
// lists, written as plainly as possible.
func naiveKahn(ns []Node) ([]string, bool) {
	graph := map[string][]string{}
	inDegree := map[string]int{}
	for _, n := range ns {
		graph[n.ID] = nil
		inDegree[n.ID] = 0
	}
	for _, n := range ns {
		for _, d := range n.Deps {
			graph[d] = append(graph[d], n.ID)
			inDegree[n.ID]++
		}
	}
	var queue, result []string
	for _, n := range ns {
		if inDegree[n.ID] == 0 {
			queue = append(queue, n.ID)
		}
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		result = append(result, cur)
		for _, nb := range graph[cur] {
			inDegree[nb]--
			if inDegree[nb] == 0 {
				queue = append(queue, nb)
			}
		}
	}
	return result, len(result) == len(ns)
}

// reaches reports whether to is reachable from from along dependency edges.
func reaches(ns []Node, from, to string) bool {
	deps := map[string][]string{}
	for _, n := range ns {
		deps[n.ID] = n.Deps
	}
	seen := map[string]bool{}
	stack := slices.Clone(deps[from])
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == to {
			return true
		}
		if !seen[x] {
			seen[x] = true
			stack = append(stack, deps[x]...)
		}
	}
	return false
}

func TestPropertyOrderMatchesNaiveKahn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ns := genNodes(t, rapid.Bool().Draw(t, "acyclic"))
		want, acyclic := naiveKahn(ns)
		g, err := New(ns)
		if !acyclic {
			ce, ok := err.(*CycleError)
			if !ok {
				t.Fatalf("naive Kahn found a cycle, New returned %v", err)
			}
			checkCycle(t, ns, ce.Path)
			return
		}
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if got := g.OrderIDs(); !slices.Equal(got, want) {
			t.Fatalf("order %v, naive %v", got, want)
		}
	})
}

func checkCycle(t *rapid.T, ns []Node, path []string) {
	if len(path) < 3 || path[0] != path[len(path)-1] {
		t.Fatalf("cycle path %v does not close", path)
	}
	deps := map[string][]string{}
	for _, n := range ns {
		deps[n.ID] = n.Deps
	}
	for k := 0; k+1 < len(path); k++ {
		if !slices.Contains(deps[path[k]], path[k+1]) {
			t.Fatalf("cycle path %v: %s does not depend on %s", path, path[k], path[k+1])
		}
	}
}

func TestPropertyTransitiveDependents(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ns := genNodes(t, true)
		g, err := New(ns)
		if err != nil {
			t.Fatal(err)
		}
		i := rapid.IntRange(0, len(ns)-1).Draw(t, "node")
		var want []string
		for _, k := range g.Order() {
			if reaches(ns, ns[k].ID, ns[i].ID) {
				want = append(want, ns[k].ID)
			}
		}
		var got []string
		for _, k := range g.TransitiveDependents(i) {
			got = append(got, g.ID(k))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("dependents of %s: got %v, want %v", ns[i].ID, got, want)
		}
	})
}

// TestPropertyTrackerMatchesRescan runs random completion orders and checks
// that the incremental ready set always equals a brute-force rescan.
func TestPropertyTrackerMatchesRescan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ns := genNodes(t, true)
		g, err := New(ns)
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTracker(g)
		done := make([]bool, len(ns))
		started := make([]bool, len(ns))
		var running []int
		for {
			for {
				i, ok := tr.Pop()
				if !ok {
					break
				}
				if started[i] {
					t.Fatalf("%s released twice", ns[i].ID)
				}
				started[i] = true
				running = append(running, i)
			}
			// Brute force: every node whose deps are all done has started.
			for i := range ns {
				all := true
				for _, d := range g.Deps(i) {
					all = all && done[d]
				}
				if all != started[i] {
					t.Fatalf("%s: deps done=%v but started=%v", ns[i].ID, all, started[i])
				}
			}
			if len(running) == 0 {
				break
			}
			k := rapid.IntRange(0, len(running)-1).Draw(t, "finish")
			i := running[k]
			running = slices.Delete(running, k, k+1)
			done[i] = true
			tr.Satisfy(i)
		}
		for i := range ns {
			if !done[i] {
				t.Fatalf("%s never ran", ns[i].ID)
			}
		}
	})
}

package dag

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors, matched with errors.Is. The concrete error returned by New
// carries the offending ids.
var (
	ErrEmptyID      = errors.New("dag: empty id")
	ErrDuplicateID  = errors.New("dag: duplicate id")
	ErrUnknownDep   = errors.New("dag: unknown dependency")
	ErrSelfDep      = errors.New("dag: self-dependency")
	ErrDuplicateDep = errors.New("dag: duplicate dependency")
	ErrCycle        = errors.New("dag: cycle")
)

// Node is one vertex as given by the caller: its id and the ids it depends on.
type Node struct {
	ID   string
	Deps []string
}

// NodeError reports a problem with one node's declaration.
type NodeError struct {
	Err   error  // one of ErrEmptyID, ErrDuplicateID, ErrUnknownDep, ErrSelfDep, ErrDuplicateDep
	Index int    // position of the node in the input
	ID    string // the node's id
	Dep   string // the dependency at fault, if any
}

func (e *NodeError) Error() string {
	switch {
	case errors.Is(e.Err, ErrEmptyID):
		return fmt.Sprintf("node #%d has an empty id", e.Index)
	case errors.Is(e.Err, ErrDuplicateID):
		return fmt.Sprintf("node #%d: duplicate id %q", e.Index, e.ID)
	case errors.Is(e.Err, ErrUnknownDep):
		return fmt.Sprintf("%q depends on unknown %q", e.ID, e.Dep)
	case errors.Is(e.Err, ErrSelfDep):
		return fmt.Sprintf("%q depends on itself", e.ID)
	case errors.Is(e.Err, ErrDuplicateDep):
		return fmt.Sprintf("%q lists dependency %q more than once", e.ID, e.Dep)
	}
	return fmt.Sprintf("node %q: %v", e.ID, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// CycleError reports a dependency cycle. Path starts and ends with the same
// id, the one declared first among the cycle's nodes, and each id depends on
// the next: for Path = [A C B A], A depends on C, C on B and B on A.
type CycleError struct {
	Path []string
}

func (e *CycleError) Error() string {
	return "cycle: " + strings.Join(e.Path, " -> ")
}

func (e *CycleError) Unwrap() error { return ErrCycle }

// Graph is a validated DAG. Edges point from a dependency to its dependents.
type Graph struct {
	ids        []string
	index      map[string]int
	deps       [][]int // deps[i]: the nodes i depends on, in declaration order
	dependents [][]int // dependents[i]: the nodes that depend on i, in document order
	order      []int   // Kahn order
}

// New validates nodes and builds the graph. It returns a *NodeError for the
// first malformed declaration in document order, or a *CycleError naming one
// cycle's path.
func New(nodes []Node) (*Graph, error) {
	g := &Graph{
		ids:        make([]string, len(nodes)),
		index:      make(map[string]int, len(nodes)),
		deps:       make([][]int, len(nodes)),
		dependents: make([][]int, len(nodes)),
	}
	for i, n := range nodes {
		if n.ID == "" {
			return nil, &NodeError{Err: ErrEmptyID, Index: i}
		}
		if _, dup := g.index[n.ID]; dup {
			return nil, &NodeError{Err: ErrDuplicateID, Index: i, ID: n.ID}
		}
		g.index[n.ID] = i
		g.ids[i] = n.ID
	}
	edges := 0
	// seenBy[j] is 1 + the node that last listed j as a dependency: a
	// duplicate is found in O(1), so a node with many dependencies (the
	// end of a wide fan-out) costs linear time, not quadratic.
	seenBy := make([]int, len(nodes))
	// Every node's dependencies, one after another, in one array (a plan
	// of many tools was an allocation per tool here).
	total := 0
	for _, n := range nodes {
		total += len(n.Deps)
	}
	all := make([]int, 0, total)
	for i, n := range nodes {
		if len(n.Deps) == 0 {
			continue
		}
		start := len(all)
		for _, d := range n.Deps {
			j, ok := g.index[d]
			switch {
			case !ok:
				return nil, &NodeError{Err: ErrUnknownDep, Index: i, ID: n.ID, Dep: d}
			case j == i:
				return nil, &NodeError{Err: ErrSelfDep, Index: i, ID: n.ID, Dep: d}
			}
			if seenBy[j] == i+1 {
				return nil, &NodeError{Err: ErrDuplicateDep, Index: i, ID: n.ID, Dep: d}
			}
			seenBy[j] = i + 1
			all = append(all, j)
		}
		g.deps[i] = all[start:len(all):len(all)]
		edges += len(all) - start
	}
	// Dependents in document order: walk nodes in order, putting i in each
	// of its dependencies' lists, which share one array too. seenBy
	// counts, then places.
	next := seenBy
	clear(next)
	for _, j := range all {
		next[j]++
	}
	back := make([]int, len(all))
	at := 0
	for j, c := range next {
		if c > 0 {
			g.dependents[j] = back[at : at : at+c]
		}
		at += c
	}
	for i, ds := range g.deps {
		for _, j := range ds {
			g.dependents[j] = append(g.dependents[j], i)
		}
	}
	order, ok := g.kahn()
	if !ok {
		return nil, &CycleError{Path: g.findCycle(order)}
	}
	g.order = order
	return g, nil
}

// kahn computes Kahn's order with a FIFO queue seeded in document order.
// It reports false when a cycle leaves some nodes unordered; the partial
// order is returned so the cycle search can skip ordered nodes.
func (g *Graph) kahn() ([]int, bool) {
	n := len(g.ids)
	indeg := make([]int, n)
	for i := range g.deps {
		indeg[i] = len(g.deps[i])
	}
	order := make([]int, 0, n)
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for head := 0; head < len(order); head++ {
		for _, d := range g.dependents[order[head]] {
			indeg[d]--
			if indeg[d] == 0 {
				order = append(order, d)
			}
		}
	}
	return order, len(order) == n
}

// findCycle returns the path of one cycle among the nodes Kahn's algorithm
// could not order: an iterative DFS along dependency edges from the first
// such node in document order, reporting the first back edge found.
func (g *Graph) findCycle(ordered []int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.ids))
	for _, i := range ordered {
		color[i] = black // acyclic part, cannot be on a cycle
	}
	type frame struct{ node, next int }
	for start := range g.ids {
		if color[start] != white {
			continue
		}
		stack := []frame{{node: start}}
		color[start] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(g.deps[top.node]) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			dep := g.deps[top.node][top.next]
			top.next++
			switch color[dep] {
			case white:
				color[dep] = grey
				stack = append(stack, frame{node: dep})
			case grey:
				// Back edge: top.node depends on dep, which is lower on
				// the stack; each stack entry depends on the one above it.
				var k int
				for k = len(stack) - 1; stack[k].node != dep; k-- {
				}
				cyc := make([]int, 0, len(stack)-k)
				for _, f := range stack[k:] {
					cyc = append(cyc, f.node)
				}
				// Start at the node declared first, so the report does
				// not depend on where the search happened to enter.
				m := 0
				for x := range cyc {
					if cyc[x] < cyc[m] {
						m = x
					}
				}
				path := make([]string, 0, len(cyc)+1)
				for x := range cyc {
					path = append(path, g.ids[cyc[(m+x)%len(cyc)]])
				}
				return append(path, path[0])
			}
		}
	}
	return nil // unreachable when kahn reported a cycle
}

// Len is the number of nodes.
func (g *Graph) Len() int { return len(g.ids) }

// ID returns the id of node i.
func (g *Graph) ID(i int) string { return g.ids[i] }

// Index returns the index of the node with the given id.
func (g *Graph) Index(id string) (int, bool) {
	i, ok := g.index[id]
	return i, ok
}

// Deps returns the nodes i depends on, in declaration order. The slice is
// shared; callers must not modify it.
func (g *Graph) Deps(i int) []int { return g.deps[i] }

// Dependents returns the nodes that depend directly on i, in document order.
// The slice is shared; callers must not modify it.
func (g *Graph) Dependents(i int) []int { return g.dependents[i] }

// Order returns Kahn's topological order: a FIFO queue seeded with the
// dependency-free nodes in document order, each finished node enqueueing its
// newly freed dependents in document order. The slice is shared; callers must
// not modify it.
func (g *Graph) Order() []int { return g.order }

// OrderIDs returns Order as ids.
func (g *Graph) OrderIDs() []string {
	out := make([]string, len(g.order))
	for k, i := range g.order {
		out[k] = g.ids[i]
	}
	return out
}

// TransitiveDependents returns every node that depends on i directly or
// transitively, in Kahn order.
func (g *Graph) TransitiveDependents(i int) []int {
	seen := make([]bool, len(g.ids))
	var out []int
	queue := []int{i}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, d := range g.dependents[n] {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
				queue = append(queue, d)
			}
		}
	}
	pos := make([]int, len(g.ids))
	for k, i := range g.order {
		pos[i] = k
	}
	slices.SortFunc(out, func(a, b int) int { return pos[a] - pos[b] })
	return out
}

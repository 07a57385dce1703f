package dag

import (
	"errors"
	"fmt"
	"hash/maphash"
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
	ids []string
	// table finds a node by id: open addressing on the id's hash, each
	// slot 1 + a node's index or 0 for none; its length is a power of two
	// at least twice the nodes'.
	table []int32
	// edges holds every node's dependencies in declaration order, then
	// every node's dependents in document order: node i's are
	// edges[depAt[i]:depAt[i+1]] and edges[revAt[i]:revAt[i+1]].
	edges        []int
	depAt, revAt []int
	order        []int // Kahn order
}

// seed keys the ids' hash: a plan's author cannot choose ids that collide.
var seed = maphash.MakeSeed()

// slot returns where in the table the search for id starts, and the mask
// of the table's index.
func (g *Graph) slot(id string) (int, int) {
	mask := len(g.table) - 1
	return int(maphash.String(seed, id) & uint64(mask)), mask
}

// New validates nodes and builds the graph. It returns a *NodeError for the
// first malformed declaration in document order, or a *CycleError naming one
// cycle's path.
func New(nodes []Node) (*Graph, error) {
	return NewFunc(len(nodes), func(i int) Node { return nodes[i] })
}

// NewFunc is New of the n nodes node(0), ..., node(n-1), for a caller
// whose nodes are in another form (a plan's tools): it need not build
// them as a slice. node is called a few times per node and must return
// the same each time.
//
// The graph takes four allocations, whatever its size: the Graph, its
// ids, the table of ids and one array of every index it holds (a plan of
// 25 tools was ten, and a map).
func NewFunc(n int, node func(i int) Node) (*Graph, error) {
	size := 2
	for size < 2*n {
		size <<= 1
	}
	g := &Graph{ids: make([]string, n), table: make([]int32, size)}
	mask := size - 1
	for i := range n {
		id := node(i).ID
		if id == "" {
			return nil, &NodeError{Err: ErrEmptyID, Index: i}
		}
		h := int(maphash.String(seed, id) & uint64(mask))
		for ; g.table[h] != 0; h = (h + 1) & mask {
			if g.ids[g.table[h]-1] == id {
				return nil, &NodeError{Err: ErrDuplicateID, Index: i, ID: id}
			}
		}
		g.table[h] = int32(i + 1)
		g.ids[i] = id
	}
	total := 0
	for i := range n {
		total += len(node(i).Deps)
	}
	// depAt, revAt, the dependencies, the dependents, the order, then
	// seenBy, which is scratch space.
	ints := make([]int, 2*(n+1)+2*total+2*n)
	g.depAt, ints = ints[:n+1:n+1], ints[n+1:]
	g.revAt, ints = ints[:n+1:n+1], ints[n+1:]
	g.edges, ints = ints[:2*total:2*total], ints[2*total:]
	order, seenBy := ints[:0:n], ints[n:]
	// seenBy[j] is 1 + the node that last listed j as a dependency: a
	// duplicate is found in O(1), so a node with many dependencies (the
	// end of a wide fan-out) costs linear time, not quadratic.
	all := g.edges[:0]
	for i := range n {
		nd := node(i)
		for _, d := range nd.Deps {
			j, ok := g.Index(d)
			switch {
			case !ok:
				return nil, &NodeError{Err: ErrUnknownDep, Index: i, ID: nd.ID, Dep: d}
			case j == i:
				return nil, &NodeError{Err: ErrSelfDep, Index: i, ID: nd.ID, Dep: d}
			}
			if seenBy[j] == i+1 {
				return nil, &NodeError{Err: ErrDuplicateDep, Index: i, ID: nd.ID, Dep: d}
			}
			seenBy[j] = i + 1
			all = append(all, j)
		}
		g.depAt[i+1] = len(all)
	}
	// Dependents in document order: count them per node, place each
	// node's list after the one before, then walk the nodes in order,
	// putting i in each of its dependencies' lists. seenBy counts, then
	// places.
	next := seenBy
	clear(next)
	for _, j := range all {
		next[j]++
	}
	at := total
	for j, c := range next {
		g.revAt[j], next[j] = at, at
		at += c
	}
	g.revAt[n] = at
	for i := range n {
		for _, j := range g.Deps(i) {
			g.edges[next[j]] = i
			next[j]++
		}
	}
	order, ok := g.kahn(order, seenBy)
	if !ok {
		return nil, &CycleError{Path: g.findCycle(order)}
	}
	g.order = order
	return g, nil
}

// kahn computes Kahn's order with a FIFO queue seeded in document order,
// into order (empty, of capacity the nodes') with indeg as scratch space.
// It reports false when a cycle leaves some nodes unordered; the partial
// order is returned so the cycle search can skip ordered nodes.
func (g *Graph) kahn(order, indeg []int) ([]int, bool) {
	n := len(g.ids)
	for i := range n {
		indeg[i] = g.depAt[i+1] - g.depAt[i]
	}
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for head := 0; head < len(order); head++ {
		for _, d := range g.Dependents(order[head]) {
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
			if top.next == len(g.Deps(top.node)) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			dep := g.Deps(top.node)[top.next]
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
	if len(g.table) == 0 {
		return 0, false
	}
	h, mask := g.slot(id)
	for ; g.table[h] != 0; h = (h + 1) & mask {
		if i := int(g.table[h] - 1); g.ids[i] == id {
			return i, true
		}
	}
	return 0, false
}

// Deps returns the nodes i depends on, in declaration order. The slice is
// shared; callers must not modify it.
func (g *Graph) Deps(i int) []int {
	a, b := g.depAt[i], g.depAt[i+1]
	if a == b {
		return nil
	}
	return g.edges[a:b:b]
}

// Dependents returns the nodes that depend directly on i, in document order.
// The slice is shared; callers must not modify it.
func (g *Graph) Dependents(i int) []int {
	a, b := g.revAt[i], g.revAt[i+1]
	if a == b {
		return nil
	}
	return g.edges[a:b:b]
}

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
		for _, d := range g.Dependents(n) {
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

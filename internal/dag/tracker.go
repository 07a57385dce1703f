package dag

// Tracker follows one run over a Graph and yields each node the moment all
// of its dependencies are satisfied. Over a whole run it does O(V+E) work:
// every node enters the ready queue once and every edge is counted down
// once; nothing is rescanned per step.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	g         *Graph
	remaining []int32 // unsatisfied dependencies per node
	satisfied []bool
	queue     []int // FIFO of ready nodes; queue[head:] not yet popped
	head      int
}

// NewTracker starts a run with the dependency-free nodes ready, in document
// order.
func NewTracker(g *Graph) *Tracker {
	t := &Tracker{
		g:         g,
		remaining: make([]int32, g.Len()),
		satisfied: make([]bool, g.Len()),
		queue:     make([]int, 0, g.Len()),
	}
	for i := range g.Len() {
		t.remaining[i] = int32(len(g.Deps(i)))
		if t.remaining[i] == 0 {
			t.queue = append(t.queue, i)
		}
	}
	return t
}

// Satisfy records that node i no longer holds back its dependents (it
// finished in a way that lets them run) and queues every dependent whose last
// unsatisfied dependency was i, in document order. Satisfying a node twice
// is a no-op.
func (t *Tracker) Satisfy(i int) {
	if t.satisfied[i] {
		return
	}
	t.satisfied[i] = true
	for _, d := range t.g.Dependents(i) {
		t.remaining[d]--
		if t.remaining[d] == 0 {
			t.queue = append(t.queue, d)
		}
	}
}

// Satisfied reports whether Satisfy was called for i.
func (t *Tracker) Satisfied(i int) bool { return t.satisfied[i] }

// Pop removes and returns the node that became ready first.
func (t *Tracker) Pop() (int, bool) {
	if t.head == len(t.queue) {
		return 0, false
	}
	i := t.queue[t.head]
	t.head++
	return i, true
}

// Peek returns the node Pop would return, without removing it.
func (t *Tracker) Peek() (int, bool) {
	if t.head == len(t.queue) {
		return 0, false
	}
	return t.queue[t.head], true
}

// Ready returns the ready nodes not yet popped, in the order Pop yields them.
// The slice is shared; callers must not modify it.
func (t *Tracker) Ready() []int { return t.queue[t.head:] }

// Remaining returns how many of node i's dependencies are not yet satisfied.
func (t *Tracker) Remaining(i int) int { return int(t.remaining[i]) }

package plan

import (
	"errors"
	"fmt"

	"github.com/planbus/planbus/internal/dag"
)

// errReachBudget: checking a plan's references needed more graph steps
// than its size allows. Only a plan built to be costly gets there: many
// references, each to a different tool far up a long path.
var errReachBudget = errors.New("plan: references too costly to check")

// maxCachedTargets bounds the tools whose dependents are kept as a set.
const maxCachedTargets = 256

// reach answers whether one tool depends on another, directly or through
// others, for every reference of a plan, in time linear in the plan's size
// for any plan a person or planner writes, and bounded for any other.
//
// A direct dependency is a lookup. A tool referenced through others a
// second time gets the set of every tool that depends on it, computed once
// (one walk of the graph), so a long chain whose tools all read the first
// one's output costs one walk, not one per tool. Other references are a
// walk up from the referring tool. Every walk counts against a budget of
// 64 steps per node and edge: a plan that exceeds it is refused.
type reach struct {
	g       *dag.Graph
	direct  []int // 1 + the tool whose direct dependencies are marked
	marked  int
	visited []uint32
	stamp   uint32
	seen    map[int]int      // references through others, per target
	below   map[int][]uint64 // bitsets of the tools depending on a target
	budget  int
}

func newReach(g *dag.Graph) *reach {
	edges := 0
	for i := range g.Len() {
		edges += len(g.Deps(i))
	}
	return &reach{g: g, direct: make([]int, g.Len()), visited: make([]uint32, g.Len()),
		seen: map[int]int{}, below: map[int][]uint64{}, budget: 64*(g.Len()+edges) + 1<<16}
}

// dependsOn reports whether tool i depends on the tool with id.
func (r *reach) dependsOn(i int, id string) (bool, error) {
	target, ok := r.g.Index(id)
	if !ok || target == i {
		return false, nil
	}
	if r.marked != i+1 {
		for _, d := range r.g.Deps(i) {
			r.direct[d] = i + 1
		}
		r.marked = i + 1
	}
	if r.direct[target] == i+1 {
		return true, nil
	}
	if set, ok := r.below[target]; ok {
		return set[i/64]&(1<<(i%64)) != 0, nil
	}
	r.seen[target]++
	if r.seen[target] > 1 && len(r.below) < maxCachedTargets {
		set, err := r.dependents(target)
		if err != nil {
			return false, err
		}
		r.below[target] = set
		return set[i/64]&(1<<(i%64)) != 0, nil
	}
	return r.walkUp(i, target)
}

// walkUp searches i's dependencies, transitively, for target.
func (r *reach) walkUp(i, target int) (bool, error) {
	r.next()
	stack := append([]int(nil), r.g.Deps(i)...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == target {
			return true, nil
		}
		if r.visited[n] == r.stamp {
			continue
		}
		r.visited[n] = r.stamp
		deps := r.g.Deps(n)
		if r.budget -= 1 + len(deps); r.budget < 0 {
			return false, r.exhausted()
		}
		stack = append(stack, deps...)
	}
	return false, nil
}

// dependents returns the set of tools that depend on target, transitively.
func (r *reach) dependents(target int) ([]uint64, error) {
	set := make([]uint64, (r.g.Len()+63)/64)
	stack := append([]int(nil), r.g.Dependents(target)...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if set[n/64]&(1<<(n%64)) != 0 {
			continue
		}
		set[n/64] |= 1 << (n % 64)
		ds := r.g.Dependents(n)
		if r.budget -= 1 + len(ds); r.budget < 0 {
			return nil, r.exhausted()
		}
		stack = append(stack, ds...)
	}
	return set, nil
}

func (r *reach) next() {
	r.stamp++
	if r.stamp == 0 { // wrapped: clear the marks once
		clear(r.visited)
		r.stamp = 1
	}
}

func (r *reach) exhausted() error {
	return fmt.Errorf("%w: checking the plan's references through other tools took more steps than a plan of its size may (64 per tool and dependency): list the tools it references among its dependencies", errReachBudget)
}

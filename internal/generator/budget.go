package generator

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/planbus/planbus/internal/goap"
)

// Defaults of the generation budgets (see the planner's Config).
const (
	DefaultHTNMaxMemory  int64 = 128 << 20
	DefaultGOAPMaxMemory int64 = 128 << 20
	DefaultGOAPMaxNodes        = goap.DefaultMaxNodes
	DefaultGenMaxMemory  int64 = 256 << 20
)

// Limits are the budgets one generation runs with.
type Limits struct {
	Memory int64 // bytes; reserved from the node's pool while it runs
	Nodes  int64 // 0: no node budget
	Gated  bool  // runs in this process: takes a generation slot
	// search: an HTN or GOAP search, which may take its whole time
	// budget. Other generations (a plan as given, a template filled in)
	// take slots of a gate of their own, so they never wait behind
	// searches.
	Search bool
}

// Gate runs the in-process generations: at most GenConcurrency at once,
// and only while the memory budgets of those running add up to at most
// GenMaxMemory. Others wait their turn in arrival order, holding no more
// than their request. Safe for concurrent use.
type Gate struct {
	slots   *semaphore.Weighted
	memory  *semaphore.Weighted
	waiting atomic.Int64
	running atomic.Int64
	served  atomic.Int64
	// reserved is the memory budgets of the generations running.
	reserved atomic.Int64
}

func NewGate(concurrency int, memory int64) *Gate {
	return &Gate{slots: semaphore.NewWeighted(int64(concurrency)), memory: semaphore.NewWeighted(memory)}
}

// Sharing is a gate of slots of its own that takes its memory from g's
// pool: the generations through it wait for their slots apart from g's,
// and the node's memory bound holds for both together.
func (g *Gate) Sharing(concurrency int) *Gate {
	return &Gate{slots: semaphore.NewWeighted(int64(concurrency)), memory: g.memory}
}

// AgentSlots is how many agents' searches run at once beside
// GenConcurrency requests' searches: half as many, at least one. Agents
// search on their own, again and again (each goal, each replan, each
// cooldown's end), so however many there are they share their slots and
// never take those of requests: another client's request does not wait
// behind a crowd of agents that find no plan.
func AgentSlots(genConcurrency int) int { return max(1, genConcurrency/2) }

// Enter waits for a slot and for bytes of the memory pool, then returns
// the function that gives them back. It fails only when ctx ends.
func (g *Gate) Enter(ctx context.Context, bytes int64) (func(), error) {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	if err := g.slots.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	if err := g.memory.Acquire(ctx, bytes); err != nil {
		g.slots.Release(1)
		return nil, err
	}
	g.running.Add(1)
	g.reserved.Add(bytes)
	return func() {
		g.running.Add(-1)
		g.served.Add(1)
		g.reserved.Add(-bytes)
		g.memory.Release(bytes)
		g.slots.Release(1)
	}, nil
}

// Waiting is how many generations wait for a slot or memory now.
func (g *Gate) Waiting() int64 { return g.waiting.Load() }

// Running is how many generations hold a slot now.
func (g *Gate) Running() int64 { return g.running.Load() }

// Served is how many generations have held a slot and given it back.
func (g *Gate) Served() int64 { return g.served.Load() }

// Reserved is the memory budgets, in bytes, of the generations running.
func (g *Gate) Reserved() int64 { return g.reserved.Load() }

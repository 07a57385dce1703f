package planner

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/planbus/planbus/internal/goap"
	"github.com/planbus/planbus/internal/request"
)

// Defaults of the generation budgets (see Config).
const (
	DefaultHTNMaxMemory  int64 = 128 << 20
	DefaultGOAPMaxMemory int64 = 128 << 20
	DefaultGOAPMaxNodes        = goap.DefaultMaxNodes
	DefaultGenMaxMemory  int64 = 256 << 20
)

// limits are the budgets one generation runs with.
type limits struct {
	memory int64 // bytes; reserved from the node's pool while it runs
	nodes  int64 // 0: no node budget
	gated  bool  // runs in this process: takes a generation slot
	// search: an HTN or GOAP search, which may take its whole time
	// budget. Other generations (a plan as given, a template filled in)
	// take slots of a gate of their own, so they never wait behind
	// searches.
	search bool
}

// limitsFor works out the budgets of a request's generations from the
// planner's maxima and the request's own, which may only lower them.
func (c Config) limitsFor(r *request.Request) limits {
	lower := func(max, asked int64) int64 {
		if asked > 0 && asked < max {
			return asked
		}
		return max
	}
	switch r.Kind {
	case request.KindHTN:
		l := limits{memory: c.HTNMaxMemory, gated: true, search: true}
		if b := r.HTN.Budget; b != nil {
			l.memory, l.nodes = lower(l.memory, b.Memory), b.Nodes
		}
		return l
	case request.KindGOAP:
		l := limits{memory: c.GOAPMaxMemory, nodes: int64(c.GOAPMaxNodes), gated: true, search: true}
		if b := r.GOAP.Budget; b != nil {
			l.memory, l.nodes = lower(l.memory, b.Memory), lower(l.nodes, b.Nodes)
		}
		return l
	case request.KindExternal:
		return limits{} // the work is another process's
	}
	return limits{gated: true}
}

// checkBudget refuses a request that asks for more than this planner
// allows, naming the field and the maximum.
func (c Config) checkBudget(r *request.Request) error {
	above := func(field string, asked, max int64, flag string) error {
		return &request.Error{Field: field, Msg: fmt.Sprintf("%d is above this planner's maximum of %d (%s); ask for less or leave it out", asked, max, flag)}
	}
	switch {
	case r.Kind == request.KindHTN && r.HTN.Budget != nil:
		if b := r.HTN.Budget; b.Memory > c.HTNMaxMemory {
			return above("/htn/budget/memory", b.Memory, c.HTNMaxMemory, "--htn-max-memory")
		}
	case r.Kind == request.KindGOAP && r.GOAP.Budget != nil:
		b := r.GOAP.Budget
		if b.Memory > c.GOAPMaxMemory {
			return above("/goap/budget/memory", b.Memory, c.GOAPMaxMemory, "--goap-max-memory")
		}
		if b.Nodes > int64(c.GOAPMaxNodes) {
			return above("/goap/budget/nodes", b.Nodes, int64(c.GOAPMaxNodes), "--goap-max-nodes")
		}
	}
	return nil
}

// errHandBack: the message is handed back to JetStream to be handled
// later (the service is stopping), not counted against the request.
var errHandBack = errors.New("planner: handed back")

// gate runs the in-process generations: at most GenConcurrency at once,
// and only while the memory budgets of those running add up to at most
// GenMaxMemory. Others wait their turn in arrival order, holding no more
// than their request. Safe for concurrent use.
type gate struct {
	slots   *semaphore.Weighted
	memory  *semaphore.Weighted
	waiting atomic.Int64
	running atomic.Int64
	served  atomic.Int64
	// reserved is the memory budgets of the generations running.
	reserved atomic.Int64
}

func newGate(concurrency int, memory int64) *gate {
	return &gate{slots: semaphore.NewWeighted(int64(concurrency)), memory: semaphore.NewWeighted(memory)}
}

// sharing is a gate of slots of its own that takes its memory from g's
// pool: the generations through it wait for their slots apart from g's,
// and the node's memory bound holds for both together.
func (g *gate) sharing(concurrency int) *gate {
	return &gate{slots: semaphore.NewWeighted(int64(concurrency)), memory: g.memory}
}

// agentSlots is how many agents' searches run at once beside
// GenConcurrency requests' searches: half as many, at least one. Agents
// search on their own, again and again (each goal, each replan, each
// cooldown's end), so however many there are they share their slots and
// never take those of requests: another client's request does not wait
// behind a crowd of agents that find no plan.
func agentSlots(genConcurrency int) int { return max(1, genConcurrency/2) }

// enter waits for a slot and for bytes of the memory pool, then returns
// the function that gives them back. It fails only when ctx ends.
func (g *gate) enter(ctx context.Context, bytes int64) (func(), error) {
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

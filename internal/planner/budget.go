package planner

import (
	"errors"
	"fmt"

	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/request"
)

// limitsFor works out the budgets of a request's generations from the
// planner's maxima and the request's own, which may only lower them.
func (c Config) limitsFor(r *request.Request) generator.Limits {
	lower := func(max, asked int64) int64 {
		if asked > 0 && asked < max {
			return asked
		}
		return max
	}
	switch r.Kind {
	case request.KindHTN:
		l := generator.Limits{Memory: c.HTNMaxMemory, Gated: true, Search: true}
		if b := r.HTN.Budget; b != nil {
			l.Memory, l.Nodes = lower(l.Memory, b.Memory), b.Nodes
		}
		return l
	case request.KindGOAP:
		l := generator.Limits{Memory: c.GOAPMaxMemory, Nodes: int64(c.GOAPMaxNodes), Gated: true, Search: true}
		if b := r.GOAP.Budget; b != nil {
			l.Memory, l.Nodes = lower(l.Memory, b.Memory), lower(l.Nodes, b.Nodes)
		}
		return l
	case request.KindExternal:
		return generator.Limits{} // the work is another process's
	}
	return generator.Limits{Gated: true}
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

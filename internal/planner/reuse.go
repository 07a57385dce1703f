package planner

import (
	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
)

// Replans keep finished work. When an attempt fails and the loop plans
// again, the results of its succeeded tools are remembered in the loop
// state, by tool identity (plan.Plan.Identities: skill, input and
// fallback, with the identities of the tools each depends on); a tool of
// a later attempt with an identity seen succeed, whose dependencies are
// all reused too, gets that result in reuseFrom and does not run again:
// the dispatcher checks the result and the engine takes it (see
// execution.StartReusing). So a replan after a late failure runs only what
// failed or changed, and side effects of the tools that succeeded (a
// payment, a deployment, a message sent) are not repeated. A request or
// a tool that says "reuse": false runs everything again.

// remember adds the succeeded tools of res, the execution of the plan the
// loop runs, to the results later attempts may reuse. A tool that was
// itself reused keeps pointing at the result it reused.
func (l *loop) remember(res *planbus.ExecutionResult) {
	if !l.Request.Reuses() || len(l.Plan) == 0 {
		return
	}
	p, err := plan.Decode(l.Plan)
	if err != nil || p.PlanID != res.PlanID || len(p.Tools) != len(res.Tools) {
		return // an execution without its tools (too large to keep) teaches nothing
	}
	ids := p.Identities()
	for i, t := range p.Tools {
		o := res.Tools[i]
		if o.ToolID != t.ToolID || o.State != planbus.ToolSucceeded || t.NoReuse {
			continue
		}
		ref := plan.ReuseRef{PlanID: res.PlanID, ToolID: t.ToolID, ResultSeq: o.ResultSeq}
		if o.Reused && t.ReuseFrom != nil {
			ref = *t.ReuseFrom
		}
		if ref.ResultSeq == 0 {
			continue
		}
		if l.Reusable == nil {
			l.Reusable = map[string]plan.ReuseRef{}
		}
		l.Reusable[ids[i]] = ref
	}
}

// reuse gives each tool of p identical to one that succeeded in an
// earlier attempt that tool's result in reuseFrom, if the tool and the
// request allow it and every tool it depends on is reused too (one that
// runs again may give another output). A reuseFrom the generator wrote is
// replaced: earlier results are the loop's to name. It returns how many
// tools reuse a result.
func (l *loop) reuse(p *plan.Plan) int {
	for i := range p.Tools {
		p.Tools[i].ReuseFrom = nil
	}
	if !l.Request.Reuses() || len(l.Reusable) == 0 {
		return 0
	}
	ids, g, n := p.Identities(), p.Graph(), 0
	for _, i := range g.Order() {
		t := &p.Tools[i]
		ref, ok := l.Reusable[ids[i]]
		if !ok || t.NoReuse {
			continue
		}
		for _, d := range g.Deps(i) {
			if p.Tools[d].ReuseFrom == nil {
				ok = false
			}
		}
		if ok {
			t.ReuseFrom = &ref
			n++
		}
	}
	return n
}

// reusing counts the tools of p that reuse an earlier result.
func reusing(p *plan.Plan) int {
	n := 0
	for _, t := range p.Tools {
		if t.ReuseFrom != nil {
			n++
		}
	}
	return n
}

package htn

import (
	"context"
	"sort"
	"unsafe"
)

// Query answers goal, a comma-separated list of Prolog goals, against the
// program's initial facts and axioms, as the reference's resolver does
// (HtnGoalResolver::ResolveAll). With opts.FirstOnly it stops after the
// first answer. A failed query is not an error: Answer.Solutions is nil.
// assert and retract change only this call's copy of the facts.
//
// Errors: a *ParseError for a malformed goal, ErrBudgetExceeded,
// ErrCanceled, or a *RuntimeError for a domain error.
func (p *Program) Query(ctx context.Context, goal string, opts Options) (*Answer, error) {
	r := newRun(ctx, p, opts)
	ps := newParser(goal, r.syms)
	goals, err := ps.parseGoalList()
	if err != nil {
		return nil, err
	}
	e := r.eng
	e.reset()
	base := e.newVars(ps.vars)
	nq := len(ps.vars)
	ans := &Answer{}
	err = e.solveAt(goals, base, func() (bool, error) {
		var bound []int
		for i := 0; i < nq; i++ {
			if c := &e.env[i]; c.bound && !c.anon {
				bound = append(bound, i)
			}
		}
		sort.Slice(bound, func(a, b int) bool { return e.env[bound[a]].tpos < e.env[bound[b]].tpos })
		sol := make(Solution, 0, len(bound))
		kept := sliceBytes(cap(sol), sizeBinding)
		for _, i := range bound {
			v := e.freeze(term{k: kRef, n: int64(i)}, 0)
			b := Binding{Var: r.syms.name(e.env[i].name), Value: publicTerm(v, r.syms)}
			kept += publicTermBytes(b.Value)
			sol = append(sol, b)
		}
		before := sliceBytes(cap(ans.Solutions), int64(unsafe.Sizeof(Solution{})))
		ans.Solutions = append(ans.Solutions, sol)
		r.keptMem += kept + sliceBytes(cap(ans.Solutions), int64(unsafe.Sizeof(Solution{}))) - before
		return !opts.FirstOnly, nil
	})
	ans.Stats = r.stats
	if err != nil {
		return ans, err
	}
	return ans, nil
}

package generator

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/goap"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

// GOAP is kind goap: a GOAP domain planned by internal/goap. The
// world state is the session state with the request's facts over it; the
// goal is the request's, or the arbiter's choice of the most useful valid
// goal. Actions whose skill is disabled or unserved are left out, so a
// replan finds another way.
type GOAP struct {
	Domains string // directory of <name>.goap.json files
	// decoded keeps decoded domains by their text, so a domain is decoded
	// once, not on every request, and its planners (which keep their
	// search structures between plans) are reused. Nil decodes every
	// time.
	decoded *domainCache
}

// NewGOAP is kind goap with the domains of dir, each decoded once and
// kept among the last few used.
func NewGOAP(dir string) GOAP { return GOAP{Domains: dir, decoded: newDomainCache()} }

// domainCache holds the last few decoded domains, by the SHA-256 of their
// JSON. A goap.Domain is safe for concurrent use.
type domainCache struct {
	mu    sync.Mutex
	order []string // least recently used first
	by    map[string]*goap.Domain
}

// domainCacheSize bounds the domains kept: a few named domains and the
// inline ones of recent requests.
const domainCacheSize = 64

func newDomainCache() *domainCache { return &domainCache{by: map[string]*goap.Domain{}} }

// decode returns doc decoded, from the cache when it was seen before.
func (c *domainCache) decode(doc []byte) (*goap.Domain, error) {
	if c == nil {
		return goap.Decode(doc)
	}
	sum := sha256.Sum256(doc)
	key := string(sum[:])
	c.mu.Lock()
	if d, ok := c.by[key]; ok {
		c.touch(key)
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()
	d, err := goap.Decode(doc)
	if err != nil {
		return nil, err // not kept: a bad domain is cheap to refuse again
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.by[key]; !ok {
		if len(c.order) >= domainCacheSize {
			delete(c.by, c.order[0])
			c.order = c.order[1:]
		}
		c.by[key] = d
		c.order = append(c.order, key)
	}
	return c.by[key], nil
}

// touch moves key to the most recently used end. c.mu is held.
func (c *domainCache) touch(key string) {
	if i := slices.Index(c.order, key); i >= 0 {
		c.order = append(append(c.order[:i:i], c.order[i+1:]...), key)
	}
}

func (g GOAP) Domain(r *request.GOAPRequest) (*goap.Domain, error) {
	_, d, err := g.Document(r)
	if err != nil {
		return nil, err
	}
	if r.Goal != "" && !slices.ContainsFunc(d.Goals, func(gl *goap.Goal) bool { return gl.Name == r.Goal }) {
		return nil, &request.Error{Field: "/goap/goal", Msg: fmt.Sprintf("the domain has no goal %q", r.Goal)}
	}
	return d, nil
}

// Document reads the request's domain (a file of the domains directory,
// or inline) and decodes it; errors are *request.Error naming the field.
func (g GOAP) Document(r *request.GOAPRequest) ([]byte, *goap.Domain, error) {
	doc := []byte(r.Inline)
	field := "/goap/inline"
	if r.Domain != "" {
		field = "/goap/domain"
		if g.Domains == "" {
			return nil, nil, &request.Error{Field: field, Msg: "this planner has no --domains directory; send the domain inline as goap.inline"}
		}
		b, err := os.ReadFile(filepath.Join(g.Domains, r.Domain+".goap.json"))
		if err != nil {
			return nil, nil, &request.Error{Field: field, Msg: fmt.Sprintf("no GOAP domain %q in the planner's domains directory", r.Domain)}
		}
		doc = b
	}
	d, err := g.decoded.decode(doc)
	if err != nil {
		var de *goap.DomainError
		if r.Domain == "" && errors.As(err, &de) {
			field += de.Path // the place in the inline domain
		}
		return nil, nil, &request.Error{Field: field, Msg: err.Error()}
	}
	return doc, d, nil
}

func (g GOAP) Generate(ctx context.Context, in Input) (*plan.Plan, error) {
	r := in.Request.GOAP
	d, err := g.Domain(r)
	if err != nil {
		return nil, &Error{Code: planbus.CodeInvalidDomain, Category: planbus.CategoryInvalidInput, Message: err.Error()}
	}
	state := goap.State{}
	maps.Copy(state, in.Session)
	maps.Copy(state, r.State)
	goal := r.Goal
	if goal == "" {
		arb, err := goap.NewArbiter(d, goap.ArbiterConfig{})
		if err != nil {
			return nil, &Error{Code: planbus.CodeGOAPError, Category: planbus.CategoryPermanent, Message: err.Error()}
		}
		sel, err := arb.Select(state, time.Now())
		if err != nil {
			return nil, &Error{Code: planbus.CodeGOAPError, Category: planbus.CategoryPermanent, Message: err.Error()}
		}
		if sel.Goal == "" {
			return nil, &Error{Code: planbus.CodeNoGoal, Category: planbus.CategoryPermanent, Message: "no goal is valid and unsatisfied: " + sel.Detail}
		}
		goal = sel.Goal
	}
	disabled := func(skill string) bool {
		return slices.Contains(in.DisabledSkills, skill) || !HasSkill(in.Skills, skill)
	}
	p, err := goap.PlanJSON(ctx, d, state, goal, goap.Options{Disabled: disabled, MaxMemory: in.Memory, MaxNodes: int(in.Nodes)})
	var ue *goap.UnreachableError
	var be *goap.BudgetError
	switch {
	case errors.As(err, &ue):
		return nil, &Error{Code: planbus.CodeNoPlan, Category: planbus.CategoryPermanent, Message: err.Error()}
	case errors.Is(err, goap.ErrCanceled):
		return nil, ctx.Err()
	case errors.As(err, &be):
		code, what := planbus.CodeGOAPNodeBudget, "node budget (goap.budget.nodes, --goap-max-nodes)"
		if be.Limit == goap.BudgetMemory {
			code, what = planbus.CodeGOAPMemoryBudget, "memory budget (goap.budget.memory, --goap-max-memory)"
		}
		return nil, &Error{Code: code, Category: planbus.CategoryPermanent, Message: fmt.Sprintf("%v; this request's %s", err, what)}
	case errors.Is(err, goap.ErrPlanJSON):
		return nil, &Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryInternal, Message: err.Error()}
	case err != nil:
		return nil, &Error{Code: planbus.CodeGOAPError, Category: planbus.CategoryPermanent, Message: err.Error()}
	}
	return p, nil
}

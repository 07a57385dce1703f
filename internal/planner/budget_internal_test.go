package planner

import (
	"errors"
	"testing"

	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/request"
)

func TestRequestsMayLowerBudgetsNotRaiseThem(t *testing.T) {
	c := Config{HTNMaxMemory: 100 << 20, GOAPMaxMemory: 50 << 20, GOAPMaxNodes: 1000}.withDefaults()
	htn := func(b *request.Budget) *request.Request {
		return &request.Request{Kind: request.KindHTN, HTN: &request.HTNRequest{Budget: b}}
	}
	goap := func(b *request.Budget) *request.Request {
		return &request.Request{Kind: request.KindGOAP, GOAP: &request.GOAPRequest{Budget: b}}
	}
	for _, tc := range []struct {
		name  string
		r     *request.Request
		want  generator.Limits
		field string
	}{
		{"htn default", htn(nil), generator.Limits{Memory: 100 << 20, Gated: true, Search: true}, ""},
		{"htn lower", htn(&request.Budget{Memory: 1 << 20, Nodes: 5}), generator.Limits{Memory: 1 << 20, Nodes: 5, Gated: true, Search: true}, ""},
		{"htn higher", htn(&request.Budget{Memory: 200 << 20}), generator.Limits{Memory: 100 << 20, Gated: true, Search: true}, "/htn/budget/memory"},
		{"goap default", goap(nil), generator.Limits{Memory: 50 << 20, Nodes: 1000, Gated: true, Search: true}, ""},
		{"goap lower", goap(&request.Budget{Memory: 1 << 20, Nodes: 10}), generator.Limits{Memory: 1 << 20, Nodes: 10, Gated: true, Search: true}, ""},
		{"goap more nodes", goap(&request.Budget{Nodes: 1001}), generator.Limits{Memory: 50 << 20, Nodes: 1000, Gated: true, Search: true}, "/goap/budget/nodes"},
		{"goap more memory", goap(&request.Budget{Memory: 51 << 20}), generator.Limits{Memory: 50 << 20, Nodes: 1000, Gated: true, Search: true}, "/goap/budget/memory"},
		{"external", &request.Request{Kind: request.KindExternal}, generator.Limits{}, ""},
		{"plan", &request.Request{Kind: request.KindPlan}, generator.Limits{Gated: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A planner with lower maxima than the one that accepted the
			// request clamps it rather than raise its own.
			if got := c.limitsFor(tc.r); got != tc.want {
				t.Errorf("limits %+v, want %+v", got, tc.want)
			}
			err := c.checkBudget(tc.r)
			var re *request.Error
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &re) || re.Field != tc.field):
				t.Errorf("got %v, want a refusal at %s", err, tc.field)
			}
		})
	}
}

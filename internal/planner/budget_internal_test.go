package planner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/request"
)

func TestGateBoundsConcurrencyAndMemory(t *testing.T) {
	g := newGate(2, 100)
	blocked := func(bytes int64) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		release, err := g.enter(ctx, bytes)
		if err == nil {
			release()
			return false
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("enter(%d): %v", bytes, err)
		}
		return true
	}
	first, err := g.enter(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if !blocked(60) {
		t.Error("a second generation of 60 bytes ran beside one of 60 in a pool of 100")
	}
	if blocked(40) {
		t.Error("a generation of 40 bytes waited although it fits")
	}
	second, err := g.enter(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if !blocked(1) {
		t.Error("a third generation ran with a concurrency of 2")
	}
	if got := g.running.Load(); got != 2 {
		t.Errorf("running %d, want 2", got)
	}
	if got := g.reserved.Load(); got != 70 {
		t.Errorf("reserved %d bytes, want the two budgets, 70", got)
	}
	first()
	second()
	if got := g.reserved.Load(); got != 0 {
		t.Errorf("reserved %d bytes after all left, want 0", got)
	}
	if blocked(100) {
		t.Error("a generation of the whole pool waited with nothing running")
	}
	if g.running.Load() != 0 || g.waiting.Load() != 0 {
		t.Errorf("running %d, waiting %d after all left", g.running.Load(), g.waiting.Load())
	}
}

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
		want  limits
		field string
	}{
		{"htn default", htn(nil), limits{memory: 100 << 20, gated: true, search: true}, ""},
		{"htn lower", htn(&request.Budget{Memory: 1 << 20, Nodes: 5}), limits{memory: 1 << 20, nodes: 5, gated: true, search: true}, ""},
		{"htn higher", htn(&request.Budget{Memory: 200 << 20}), limits{memory: 100 << 20, gated: true, search: true}, "/htn/budget/memory"},
		{"goap default", goap(nil), limits{memory: 50 << 20, nodes: 1000, gated: true, search: true}, ""},
		{"goap lower", goap(&request.Budget{Memory: 1 << 20, Nodes: 10}), limits{memory: 1 << 20, nodes: 10, gated: true, search: true}, ""},
		{"goap more nodes", goap(&request.Budget{Nodes: 1001}), limits{memory: 50 << 20, nodes: 1000, gated: true, search: true}, "/goap/budget/nodes"},
		{"goap more memory", goap(&request.Budget{Memory: 51 << 20}), limits{memory: 50 << 20, nodes: 1000, gated: true, search: true}, "/goap/budget/memory"},
		{"external", &request.Request{Kind: request.KindExternal}, limits{}, ""},
		{"plan", &request.Request{Kind: request.KindPlan}, limits{gated: true}, ""},
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

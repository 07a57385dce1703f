package skills_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
)

func TestSimulatedSpecs(t *testing.T) {
	for _, tc := range []struct {
		spec, name string
		params     int
		ok         bool
	}{
		{"walk", "walk", 0, true},
		{"walk(from,to)", "walk", 2, true},
		{"walk(from,to)=network", "walk", 2, true},
		{"gather@3s", "gather", 0, true},
		{"gather(what)@250ms=timeout", "gather", 1, true},
		{"gather@0s", "", 0, false},
		{"gather@-1s", "", 0, false},
		{"gather@2h", "", 0, false},
		{"gather@soon", "", 0, false},
		{"walk=tired", "", 0, false},
		{"wa lk", "", 0, false},
	} {
		sk, err := skills.Simulated(tc.spec)
		if (err == nil) != tc.ok || tc.ok && (sk.Manifest.Name != tc.name || len(sk.Manifest.Parameters) != tc.params) {
			t.Errorf("Simulated(%q) = %s %v, %v; want ok %v", tc.spec, sk.Manifest.Name, sk.Manifest.Parameters, err, tc.ok)
		}
	}
}

func TestSimulatedDelayAndStatePatch(t *testing.T) {
	sk, err := skills.Simulated("gather@3s")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("answers after its delay, with the input's statePatch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			res, err := sk.Handler.Handle(t.Context(), newCall("gather", `{"what": "wood", "statePatch": {"wood": true}}`))
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != 3*time.Second {
				t.Errorf("answered after %s, want 3s", got)
			}
			if string(res.StatePatch) != `{"wood": true}` {
				t.Errorf("statePatch %s", res.StatePatch)
			}
		})
	})
	t.Run("a cancel ends it early", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			done := handleAsync(ctx, sk.Handler, newCall("gather", `{}`))
			synctest.Wait()
			cancel()
			if o := <-done; !errors.Is(o.err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", o.err)
			}
		})
	})
	t.Run("no patch without a statePatch object", func(t *testing.T) {
		plain, _ := skills.Simulated("gather")
		for _, in := range []string{`{"what": "wood"}`, `{"statePatch": 3}`, `[1]`} {
			res, err := plain.Handler.Handle(t.Context(), newCall("gather", in))
			if err != nil || res.StatePatch != nil {
				t.Errorf("input %s: statePatch %s, %v", in, res.StatePatch, err)
			}
		}
	})
	t.Run("a failing one fails after its delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			down, _ := skills.Simulated("gather@1s=network")
			_, err := down.Handler.Handle(t.Context(), newCall("gather", `{"statePatch": {"wood": true}}`))
			wantError(t, err, planbus.CategoryNetwork, "SIMULATED_FAILURE")
		})
	})
}

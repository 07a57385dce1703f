package htn_test

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/htn"
)

// liveHeap runs f while sampling the live heap (runtime/metrics'
// /gc/heap/live:bytes, what the last collection found reachable) and
// returns the highest level seen above the level before f, and the level
// after f once collected (what f's results keep). The caller runs with a
// low GOGC, so collections are frequent and the samples close.
func liveHeap(f func()) (peak, after int64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() int64 {
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	runtime.GC()
	base := read()
	var high int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			high = max(high, read())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	runtime.GC()
	return high - base, read() - base
}

// TestMemoryEstimate checks the memory budget's estimate against the heap
// the Go runtime measures: on a search that runs away in depth (loop,
// stopped by its budget) and on one that collects many plans (wide, all
// 4^7 plans kept in the result), the estimate must cover what the search
// held, and not be so far above it that budgets would stop sound searches.
func TestMemoryEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap; skipped with -short")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	const wide = `choose(?n) :- if(>(?n, 0), item(?x), is(?m, -(?n, 1))), do(pick(?n, ?x), choose(?m)).
choose(?n) :- else, if(), do().
pick(?n, ?x) :- del(), add(picked(?n, ?x)).
item(i0). item(i1). item(i2). item(i3).`
	for _, c := range []struct {
		name, src, goal string
		first           bool
		budget          int64
		plans           int
		exceeded        bool
	}{
		{name: "loop", src: "loop(?x) :- if(), do(loop(?x)).", goal: "loop(1)", first: true, budget: 32 << 20, exceeded: true},
		{name: "wide", src: wide, goal: "choose(7)", budget: 1 << 30, plans: 16384},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := htn.Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			var res *htn.Result
			peak, after := liveHeap(func() {
				res, err = p.Plan(context.Background(), c.goal, htn.Options{FirstOnly: c.first, Budget: htn.Budget{Memory: c.budget}})
			})
			var be *htn.BudgetError
			switch {
			case c.exceeded && (!errors.As(err, &be) || be.Limit != htn.BudgetMemory):
				t.Fatalf("got %v, want a memory BudgetError", err)
			case !c.exceeded && err != nil:
				t.Fatal(err)
			case len(res.Plans) != c.plans:
				t.Fatalf("got %d plans, want %d", len(res.Plans), c.plans)
			}
			est := res.Stats.PeakMemory
			held := max(peak, after)
			t.Logf("estimate %.1f MB, live heap: peak %.1f MB, after %.1f MB", float64(est)/1e6, float64(peak)/1e6, float64(after)/1e6)
			if held > est+est/4 {
				t.Errorf("the live heap grew by %d bytes, more than the estimate %d allows (+25%%)", held, est)
			}
			if est > 2*held {
				t.Errorf("estimate %d is more than twice the live heap growth %d", est, held)
			}
			runtime.KeepAlive(res)
		})
	}
}

package goap

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// wander's goal cannot be reached (x only takes even values) but nothing
// tells the heuristic so: the search goes on over a space that branches
// fourteen ways, until a budget stops it.
const wander = `{"name": "wander", "facts": {"x": 0, "a": 0, "b": 0, "c": 0, "d": 0, "e": 0, "f": 0},
	"actions": [
		{"name": "x-up", "preconditions": {"a": {"gte": -1000}, "b": {"gte": -1000}, "c": {"gte": -1000}, "d": {"gte": -1000}, "e": {"gte": -1000}, "f": {"gte": -1000}}, "effects": {"x": {"inc": 2}}},
		{"name": "x-down", "effects": {"x": {"dec": 2}}},
		{"name": "a-up", "effects": {"a": {"inc": 1}}}, {"name": "a-down", "effects": {"a": {"dec": 1}}},
		{"name": "b-up", "effects": {"b": {"inc": 1}}}, {"name": "b-down", "effects": {"b": {"dec": 1}}},
		{"name": "c-up", "effects": {"c": {"inc": 1}}}, {"name": "c-down", "effects": {"c": {"dec": 1}}},
		{"name": "d-up", "effects": {"d": {"inc": 1}}}, {"name": "d-down", "effects": {"d": {"dec": 1}}},
		{"name": "e-up", "effects": {"e": {"inc": 1}}}, {"name": "e-down", "effects": {"e": {"dec": 1}}},
		{"name": "f-up", "effects": {"f": {"inc": 1}}}, {"name": "f-down", "effects": {"f": {"dec": 1}}}
	],
	"goals": [{"name": "odd", "conditions": {"x": 3}}]}`

// TestMemoryEstimate checks the memory budget against the heap the Go
// runtime measures: a search stopped by MaxMemory held about what its
// estimate says, neither much more nor much less.
func TestMemoryEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap; skipped with -short")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	d := mustDecode(t, wander)
	const budget = 16 << 20
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() int64 {
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	runtime.GC()
	base := read()
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			peak = max(peak, read()-base)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	_, err := Plan(context.Background(), d, nil, "odd", Options{MaxNodes: -1, MaxMemory: budget})
	close(done)
	wg.Wait()
	var be *BudgetError
	if !errors.As(err, &be) || be.Limit != BudgetMemory {
		t.Fatalf("got %v, want a memory BudgetError", err)
	}
	t.Logf("estimate %.1f MB after %d states, live heap peak %.1f MB", float64(be.Used)/1e6, be.Expanded, float64(peak)/1e6)
	if peak > be.Used+be.Used/4 {
		t.Errorf("the live heap grew by %d bytes, more than the estimate %d allows (+25%%)", peak, be.Used)
	}
	if be.Used > 2*peak {
		t.Errorf("estimate %d is more than twice the live heap growth %d", be.Used, peak)
	}
}

package memlimit

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// The limit is base plus twice the live heap that is not the generations'.
func TestMemoryLimitFor(t *testing.T) {
	const MiB = 1 << 20
	for _, tt := range []struct{ live, gens, want int64 }{
		{0, 0, 384 * MiB},                          // idle
		{300 * MiB, 256 * MiB, 472 * MiB},          // runaway generations: near base
		{200 * MiB, 256 * MiB, 384 * MiB},          // generations using less than their budgets
		{500 * MiB, 0, (384 + 1000) * MiB},         // plans at a high rate: GOGC's room
		{600 * MiB, 100 * MiB, (384 + 1000) * MiB}, // both
	} {
		if got := For(384*MiB, tt.live, tt.gens); got != tt.want {
			t.Errorf("live %d MiB, generations %d MiB: limit %d MiB, want %d MiB", tt.live/MiB, tt.gens/MiB, got/MiB, tt.want/MiB)
		}
	}
}

// Follow sets the limit from the live heap and the generations'
// budgets as they change, until its context ends.
func TestFollowLiveMemory(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	// The live heap is what the last collection found: a test binary this
	// small may not have had one yet, and its live heap would read 0.
	runtime.GC()
	const base = 384 << 20
	var gens atomic.Int64
	gens.Store(1 << 40) // more than any live heap: the limit is base
	reads := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Follow(ctx, base, func() int64 {
			select {
			case reads <- struct{}{}:
			case <-ctx.Done():
			}
			return gens.Load()
		}, time.Millisecond)
	}()
	read := func() {
		t.Helper()
		select {
		case <-reads:
		case <-time.After(10 * time.Second):
			t.Fatal("the generations' memory was not read again within 10 s")
		}
	}
	read()
	read() // the limit from the first reading is set
	if got := debug.SetMemoryLimit(-1); got != base {
		t.Errorf("limit %d MiB with generations holding more than the heap, want base %d MiB", got>>20, base>>20)
	}
	gens.Store(0)
	read()
	read()
	if got := debug.SetMemoryLimit(-1); got <= base {
		t.Errorf("limit %d MiB with no generations, want base + twice the live heap, above %d MiB", got>>20, base>>20)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
}

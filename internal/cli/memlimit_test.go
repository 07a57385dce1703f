package cli

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// The soft memory limit planbus chose follows what the embedded server
// holds in memory: base plus the latest reading, until ctx ends.
func TestFollowStoredMemory(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const base = 384 << 20
	var stored atomic.Uint64
	stored.Store(100 << 20)
	reads := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		followStoredMemory(ctx, base, func() uint64 {
			select {
			case reads <- struct{}{}:
			case <-ctx.Done():
			}
			return stored.Load()
		}, time.Millisecond)
	}()
	read := func() {
		t.Helper()
		select {
		case <-reads:
		case <-time.After(10 * time.Second):
			t.Fatal("the stored memory was not read again within 10 s")
		}
	}
	read()
	read() // the limit from the first reading is set
	if got := debug.SetMemoryLimit(-1); got != base+100<<20 {
		t.Errorf("limit %d MiB, want base + 100 MiB = %d MiB", got>>20, (base+100<<20)>>20)
	}
	stored.Store(250 << 20)
	read()
	read()
	if got := debug.SetMemoryLimit(-1); got != base+250<<20 {
		t.Errorf("limit %d MiB after the events grew, want %d MiB", got>>20, (base+250<<20)>>20)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("followStoredMemory did not return after its context ended")
	}
}

package generator

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGateBoundsConcurrencyAndMemory(t *testing.T) {
	g := NewGate(2, 100)
	blocked := func(bytes int64) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		release, err := g.Enter(ctx, bytes)
		if err == nil {
			release()
			return false
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("enter(%d): %v", bytes, err)
		}
		return true
	}
	first, err := g.Enter(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if !blocked(60) {
		t.Error("a second generation of 60 bytes ran beside one of 60 in a pool of 100")
	}
	if blocked(40) {
		t.Error("a generation of 40 bytes waited although it fits")
	}
	second, err := g.Enter(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if !blocked(1) {
		t.Error("a third generation ran with a concurrency of 2")
	}
	if got := g.Running(); got != 2 {
		t.Errorf("running %d, want 2", got)
	}
	if got := g.Reserved(); got != 70 {
		t.Errorf("reserved %d bytes, want the two budgets, 70", got)
	}
	first()
	second()
	if got := g.Reserved(); got != 0 {
		t.Errorf("reserved %d bytes after all left, want 0", got)
	}
	if blocked(100) {
		t.Error("a generation of the whole pool waited with nothing running")
	}
	if g.Running() != 0 || g.Waiting() != 0 {
		t.Errorf("running %d, waiting %d after all left", g.Running(), g.Waiting())
	}
}

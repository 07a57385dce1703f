package execution

import (
	"testing"
	"time"
)

// Dedupe keeps one release per call, one timer per message id, the
// first, and the last plan timeout (an approval moves the deadline), and
// everything else as it was: a call released by a timer and again by
// Outstanding is published once.
func TestDedupe(t *testing.T) {
	t0 := time.UnixMilli(1_000)
	fx := Effects{
		Releases: []Release{{Index: 1, Attempt: 2, TimeoutMs: 100}, {Index: 0, Attempt: 1}, {Index: 1, Attempt: 2, TimeoutMs: 200}, {Index: 1, Attempt: 3}},
		Timers: []Timer{{Kind: TimerPlanTimeout, FireAt: t0}, {Kind: TimerRetry, Index: 1, Attempt: 3, FireAt: t0},
			{Kind: TimerPlanTimeout, FireAt: t0.Add(time.Second)}, {Kind: TimerRetry, Index: 1, Attempt: 4, FireAt: t0}},
	}
	fx.Dedupe()
	wantR := []Release{{Index: 1, Attempt: 2, TimeoutMs: 100}, {Index: 0, Attempt: 1}, {Index: 1, Attempt: 3}}
	if len(fx.Releases) != len(wantR) {
		t.Fatalf("releases %+v, want %+v", fx.Releases, wantR)
	}
	for i := range wantR {
		if fx.Releases[i] != wantR[i] {
			t.Errorf("release %d: %+v, want %+v", i, fx.Releases[i], wantR[i])
		}
	}
	if len(fx.Timers) != 3 || fx.Timers[0].Kind != TimerRetry || fx.Timers[1].Kind != TimerPlanTimeout ||
		!fx.Timers[1].FireAt.Equal(t0.Add(time.Second)) || fx.Timers[2].Attempt != 4 {
		t.Errorf("timers %+v, want both retries and the timeout once (the last)", fx.Timers)
	}
}

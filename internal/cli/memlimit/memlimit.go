// Package memlimit keeps the soft memory limit (debug.SetMemoryLimit) of
// a planner process: planner serve sets it to the generations' memory
// budget plus Headroom and, when the limit is planbus's choice, Follow
// raises it with the live heap that is not the generations'; planner bench
// --serve-memory-limit runs under the same.
package memlimit

import (
	"context"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// Interval is how often planner serve has Follow sets the limit again.
const Interval = 2 * time.Second

// Headroom is what the soft memory limit leaves above the
// generations' budget for the rest of the process.
const Headroom = 128 << 20

// Follow raises the soft memory limit planbus chose, base, by
// twice the live heap that is not the running generations' (their memory
// budgets, generations()), every interval until ctx ends. The limit is
// there to collect what runaway generations leave, before it doubles the
// heap; but a node running plans at a high rate holds hundreds of MB that
// are live (its embedded server's events stream, message ids kept for
// de-duplication, subject indexes), and under a limit below that the
// collector runs without pause: at 300 plans a second with the limit at
// 384 MiB, plans waited seconds. Twice the rest of the live heap is the
// room Go's default (GOGC=100) gives it; with nothing but generations
// running, the limit stays near base.
func Follow(ctx context.Context, base int64, generations func() int64, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		debug.SetMemoryLimit(For(base, Live(), generations()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// For is base plus twice what of the live heap is not the
// generations'.
func For(base, live, generations int64) int64 {
	return base + 2*max(0, live-generations)
}

// Live is this process's live heap: what its last collection kept
// (runtime/metrics' /gc/heap/live:bytes).
func Live() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

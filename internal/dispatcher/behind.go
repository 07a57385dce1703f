package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/planbus/planbus/internal/bus"
)

// When the plan states and tool calls are written behind
// (bus.Config.WriteBehind), a write the server acknowledged reaches the
// disk up to WriteBehind later. A message whose handling wrote them is
// therefore acknowledged only then: until it is, a crash of the server
// delivers it again, and its handling derives the state and calls again
// from the plan's state as stored (a message that may have been handled
// before republishes everything that state implies, process.go). The
// acknowledgements wait in order, in acksBehind; nothing else waits for
// them.

// writeBehind reads how long the server may take to put the plan states
// and tool calls on disk: the longer of the two stores' (bus.WriteBehindOf),
// zero when both flush every write before acknowledging it.
func (d *Dispatcher) writeBehind(ctx context.Context) (time.Duration, error) {
	var behind time.Duration
	for _, name := range []string{bus.StreamTools, "KV_" + bus.BucketPlans} {
		st, err := d.conn.JS.Stream(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("dispatcher: stream %s: %w", name, err)
		}
		behind = max(behind, bus.WriteBehindOf(&st.CachedInfo().Config))
	}
	return behind, nil
}

// acksBehind holds acknowledgements until the writes of the messages'
// handling are on disk: each batch delay after it was handed in.
type acksBehind struct {
	delay time.Duration
	// inProcess: the server runs in this process, so it stops with the
	// dispatcher and flushes every store as it does: what is held is
	// acknowledged at once when the dispatcher stops.
	inProcess bool

	mu      sync.Mutex
	held    []heldAcks // in the order handed in, so by due time
	wake    chan struct{}
	stopped bool
	done    chan struct{}
}

type heldAcks struct {
	due   time.Time
	items []item
}

func newAcksBehind(delay time.Duration, inProcess bool) *acksBehind {
	return &acksBehind{delay: delay, inProcess: inProcess, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// ack acknowledges items now when nothing is written behind, else once
// what their handling wrote is on disk.
func (a *acksBehind) ack(items []item) {
	if a.delay <= 0 {
		ackAll(items)
		return
	}
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		a.flushOnStop(items, time.Now().Add(a.delay))
		return
	}
	a.held = append(a.held, heldAcks{due: time.Now().Add(a.delay), items: items})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run acknowledges what is held as it comes due, until stop.
func (a *acksBehind) run() {
	defer close(a.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		a.mu.Lock()
		if a.stopped {
			held := a.held
			a.held = nil
			a.mu.Unlock()
			for _, h := range held {
				a.flushOnStop(h.items, h.due)
			}
			return
		}
		now := time.Now()
		var due []heldAcks
		for len(a.held) > 0 && !a.held[0].due.After(now) {
			due = append(due, a.held[0])
			a.held = a.held[1:]
		}
		wait := time.Hour
		if len(a.held) > 0 {
			wait = a.held[0].due.Sub(now)
		}
		a.mu.Unlock()
		for _, h := range due {
			ackAll(h.items)
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-a.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// stop acknowledges what is held and returns when done: at once when the
// server stops with this process, else each when it comes due. Only for a
// run started.
func (a *acksBehind) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	<-a.done
}

// flushOnStop acknowledges items held until due, as the dispatcher stops.
func (a *acksBehind) flushOnStop(items []item, due time.Time) {
	if !a.inProcess {
		time.Sleep(time.Until(due))
	}
	ackAll(items)
}

// ackAll acknowledges items; one whose ack is lost is delivered again
// and handled as such.
func ackAll(items []item) {
	for _, it := range items {
		_ = it.msg.Ack()
	}
}

package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// When the plan states, tool calls and execution results are written behind
// (bus.Config.WriteBehind), a write the server acknowledged reaches the
// disk up to WriteBehind later. A message whose handling wrote them is
// therefore acknowledged only then: until it is, a crash of the server
// delivers it again, and its handling derives the state and calls again
// from the plan's state as stored (a message that may have been handled
// before republishes everything that state implies, process.go). The
// acknowledgements wait in order, in acksBehind; nothing else waits for
// them.
//
// The same wait saves most plans two flushed writes: the timer of a
// plan's timeout (published when the plan starts, removed when it ends)
// waits with the plan's acknowledgement, and is published only if the
// plan is still running when the acknowledgement is sent. Until then the
// plan message is not acknowledged, so should the dispatcher or the server
// die, its delivery again republishes the timer with everything else its
// state implies.

// writeBehind reads how long the server may take to put what dispatchers
// derive on disk: the longest of its stores' (bus.WrittenBehind,
// bus.WriteBehindOf), zero when all flush every write before
// acknowledging it.
func (d *Dispatcher) writeBehind(ctx context.Context) (time.Duration, error) {
	var behind time.Duration
	for _, name := range bus.WrittenBehind {
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
	// gone is closed when the connection is: a stop then waits for
	// nothing (nil: never).
	gone <-chan struct{}
	// publish publishes a held timeout timer; handBack returns messages
	// whose timer could not be published, to be handled again.
	publish  func(*nats.Msg) (jetstream.PubAckFuture, error)
	handBack func([]item, error)

	mu      sync.Mutex
	held    []heldAcks // in the order handed in, so by due time
	wake    chan struct{}
	stopped bool
	done    chan struct{}
}

// heldAcks are the messages of a batch, and the timer of its plan's
// timeout when the batch started the plan.
type heldAcks struct {
	due   time.Time
	items []item
	timer *nats.Msg
	ent   *entry
}

func newAcksBehind(delay time.Duration) *acksBehind {
	return &acksBehind{delay: delay, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// defers reports whether a plan's timeout timer firing at fireAt can wait
// for the acknowledgement of the batch that started the plan: there is a
// wait, and the timer is not due before it ends.
func (a *acksBehind) defers(fireAt, now time.Time) bool {
	return a.delay > 0 && fireAt.After(now.Add(a.delay))
}

// ack acknowledges items now when nothing is written behind, else once
// what their handling wrote is on disk, publishing timer (the plan's
// timeout, held back by send) first if the plan of ent still runs then.
func (a *acksBehind) ack(items []item, timer *nats.Msg, ent *entry) {
	if a.delay <= 0 {
		ackAll(items)
		return
	}
	h := heldAcks{due: time.Now().Add(a.delay), items: items, timer: timer, ent: ent}
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		a.release([]heldAcks{h}, true)
		return
	}
	a.held = append(a.held, h)
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
			a.release(held, true)
			return
		}
		now := time.Now()
		n := 0
		for n < len(a.held) && !a.held[n].due.After(now) {
			n++
		}
		due := a.held[:n:n]
		a.held = a.held[n:]
		wait := time.Hour
		if len(a.held) > 0 {
			wait = a.held[0].due.Sub(now)
		}
		a.mu.Unlock()
		a.release(due, false)
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

// stop acknowledges what is held, each when it comes due, and returns when
// done: at most the write-behind later. Even a server that stops with this
// process does not sync what it wrote behind as it stops (it leaves it to
// the kernel). Only for a run started.
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

// release publishes the timers of the batches whose plans still run, all
// at once, and acknowledges each batch once its timer is stored (a batch
// whose timer was not is handed back). stopping: the dispatcher stops, and
// batches not due yet are waited for.
func (a *acksBehind) release(batches []heldAcks, stopping bool) {
	if len(batches) == 0 {
		return
	}
	if wait := time.Until(batches[len(batches)-1].due); stopping && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-a.gone:
			t.Stop()
		}
	}
	futures := make([]jetstream.PubAckFuture, len(batches))
	errs := make([]error, len(batches))
	for i, h := range batches {
		if h.timer != nil && !h.ent.ended.Load() {
			futures[i], errs[i] = a.publish(h.timer)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for i, h := range batches {
		if f := futures[i]; f != nil {
			select {
			case ack := <-f.Ok():
				if !ack.Duplicate {
					h.ent.timerSeq.Store(ack.Sequence)
				}
			case err := <-f.Err():
				errs[i] = err
			case <-ctx.Done():
				errs[i] = errors.New("the timeout timer was not stored in time")
			}
		}
		if errs[i] != nil {
			a.handBack(h.items, fmt.Errorf("publish the plan's timeout timer: %w", errs[i]))
			continue
		}
		ackAll(h.items)
	}
}

// ackAll acknowledges items; one whose ack is lost is delivered again
// and handled as such.
func ackAll(items []item) {
	for _, it := range items {
		_ = it.msg.Ack()
	}
}

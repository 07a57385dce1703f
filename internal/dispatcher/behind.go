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
// state implies. When nothing is written behind (every write flushed), the
// batch that starts a plan still waits, for Config.TimeoutGrace (1 s by
// default), and no other: most plans end within it and never store their
// timeout (a schedule written and later purged, and the purge's request).

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
// handling are on disk: each batch delay after it was handed in. With no
// delay, it holds the batches that start a plan, for grace.
type acksBehind struct {
	delay time.Duration
	grace time.Duration
	// gone is closed when the connection is: a stop then waits for
	// nothing (nil: never).
	gone <-chan struct{}
	// publish publishes a held timeout timer; handBack returns messages
	// whose timer could not be published, to be handled again.
	publish  func(*nats.Msg) (jetstream.PubAckFuture, error)
	handBack func([]item, error)
	// timerWait is how long a round waits for the timers' publishes to
	// be acknowledged (0: opTimeout).
	timerWait time.Duration

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
	// waits counts the rounds the timer's publish was not acknowledged
	// in (timerWaits at most).
	waits int
}

// timerWaits is how many rounds a held batch waits for its timer's
// publish to be acknowledged before it is handed back. A server behind on
// its work (a rate above what it can take) acknowledges late; handing the
// batches back then has every message handled again, which adds to what
// it is behind on: a soak at 375 plans a second fell from 370 to 88 plans
// a second that way.
const timerWaits = 6

func newAcksBehind(delay time.Duration) *acksBehind {
	return &acksBehind{delay: delay, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// hold is how long the batch that starts a plan waits: the write-behind,
// or without one the grace. Every batch held waits as long, so those held
// are in order of due time.
func (a *acksBehind) hold() time.Duration {
	if a.delay > 0 {
		return a.delay
	}
	return a.grace
}

// holds reports whether anything is ever held.
func (a *acksBehind) holds() bool { return a.hold() > 0 }

// defers reports whether a plan's timeout timer firing at fireAt can wait
// for the acknowledgement of the batch that started the plan: there is a
// wait, and the timer is not due before it ends.
func (a *acksBehind) defers(fireAt, now time.Time) bool {
	wait := a.hold()
	return wait > 0 && fireAt.After(now.Add(wait))
}

// ack acknowledges items now when nothing is written behind (and timer,
// the plan's timeout held back by send, is nil), else once what their
// handling wrote is on disk (or the grace is over), publishing timer
// first if the plan of ent still runs then.
func (a *acksBehind) ack(items []item, timer *nats.Msg, ent *entry) {
	if a.delay <= 0 && timer == nil {
		ackAll(items)
		return
	}
	h := heldAcks{due: time.Now().Add(a.hold()), items: items, timer: timer, ent: ent}
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

// stop acknowledges what is held, each when it comes due (what waits only
// for the grace, at once), and returns when done: at most the write-behind
// later. Even a server that stops with this process does not sync what it
// wrote behind as it stops (it leaves it to the kernel). Only for a run
// started.
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
	// Stopping, what is written behind is waited for; a grace is not (the
	// plans still running store their timeouts now).
	if wait := time.Until(batches[len(batches)-1].due); stopping && a.delay > 0 && wait > 0 {
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
	wait := a.timerWait
	if wait <= 0 {
		wait = opTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var again []heldAcks
	for i, h := range batches {
		f := futures[i]
		if f == nil && errors.Is(errs[i], jetstream.ErrTooManyStalledMsgs) && h.waits < timerWaits {
			h.waits++
			again = append(again, h)
			continue
		}
		var ack *jetstream.PubAck
		if f != nil {
			// What has been acknowledged is taken first, even when the
			// wait is over.
			select {
			case ack = <-f.Ok():
			case errs[i] = <-f.Err():
			default:
				select {
				case ack = <-f.Ok():
				case errs[i] = <-f.Err():
				case <-ctx.Done():
				}
			}
			switch {
			case ack != nil:
				h.ent.scheduled.Store(true)
			case errs[i] == nil && h.waits < timerWaits:
				h.waits++
				again = append(again, h)
				continue
			case errs[i] == nil:
				errs[i] = fmt.Errorf("the timeout timer was not stored in %d rounds of %s", timerWaits+1, wait)
			}
		}
		if errs[i] != nil {
			a.handBack(h.items, fmt.Errorf("publish the plan's timeout timer: %w", errs[i]))
			continue
		}
		ackAll(h.items)
	}
	a.holdAgain(again)
}

// holdAgain holds batches whose timer was not stored yet for another
// delay, in order of due time; their timers are published again (the
// same message id) when they come due.
func (a *acksBehind) holdAgain(batches []heldAcks) {
	if len(batches) == 0 {
		return
	}
	a.mu.Lock()
	stopped := a.stopped
	if !stopped {
		// Every batch held was handed in before now, under this lock, so
		// is due before these: they go last, in order of due time.
		due := time.Now().Add(a.hold())
		for k := range batches {
			batches[k].due = due
		}
		a.held = append(a.held, batches...)
	}
	a.mu.Unlock()
	if stopped {
		// Handled again by whoever takes them: a stop does not wait
		// rounds for a server behind.
		for _, h := range batches {
			a.handBack(h.items, errors.New("publish the plan's timeout timer: not stored before the dispatcher stopped"))
		}
		return
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// ackAll acknowledges items; one whose ack is lost is delivered again
// and handled as such.
func ackAll(items []item) {
	for _, it := range items {
		_ = it.msg.Ack()
	}
}

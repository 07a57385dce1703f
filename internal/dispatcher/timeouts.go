package dispatcher

import (
	"sync"
	"time"
)

// timeouts are the timeout timers of running plans as they wait in their
// consumer: a timer that is not due is postponed (route) until it is, and
// when its plan ends first the dispatcher acknowledges it through the ack
// subject of that delivery, which removes it from the work queue. An ack
// is one message; deleting the timer through the JetStream API, which a
// dispatcher that never saw the delivery still does (settle), is a
// request the server decodes, carries out and answers, a few per cent of
// the CPU a short plan costs. A lost ack changes nothing: the timer fires
// at its time and is ignored, its plan having ended.
//
// An ack subject names the delivery's stream sequence, and a server that
// crashed can come back with the stream's sequences rolled back, giving
// that sequence to another plan's timer: so a timer held before the
// connection was lost (its generation, the connection's reconnect count,
// is not the connection's now) is not acknowledged but purged by its
// plan's subject (settle).
type timeouts struct {
	mu sync.Mutex
	m  map[string]heldTimeout
	// swept is when entries past their time were last dropped.
	swept time.Time
}

// ackBody acknowledges a JetStream message.
var ackBody = []byte("+ACK")

// heldTimeout is the ack subject of a postponed timeout timer, and the
// generation of the connection it came on.
type heldTimeout struct {
	reply  string
	gen    uint64
	fireAt time.Time
}

// sweepEvery is how often hold drops entries past their time: a timer
// that came due was redelivered, and its entry is of no more use
// (entries of plans that end elsewhere, after a partition moved, or that
// end before their timer's first delivery is postponed, go this way).
const sweepEvery = time.Minute

// hold records the ack subject of plan planID's postponed timeout timer,
// delivered on generation gen of the connection.
func (t *timeouts) hold(planID, reply string, gen uint64, fireAt, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]heldTimeout{}
	}
	if now.Sub(t.swept) >= sweepEvery {
		for id, h := range t.m {
			if h.fireAt.Before(now) {
				delete(t.m, id)
			}
		}
		t.swept = now
	}
	t.m[planID] = heldTimeout{reply: reply, gen: gen, fireAt: fireAt}
}

// take forgets plan planID's timeout timer and returns its ack subject,
// ok if it was held, is not yet due and came on generation gen of the
// connection; held reports whether it was held at all.
func (t *timeouts) take(planID string, gen uint64, now time.Time) (reply string, ok, held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, held := t.m[planID]
	delete(t.m, planID)
	return h.reply, held && h.gen == gen && h.fireAt.After(now), held
}

// forget drops plan planID's timeout timer, if held: it came due, and its
// delivery is spent.
func (t *timeouts) forget(planID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, planID)
}

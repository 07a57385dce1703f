package worker

import (
	"container/list"
	"time"
)

// Remembered cancels: how long and how many. A call of an ended plan can
// wait in its queue for a while (plans time out when workers are busy),
// so cancels are kept as long as JetStream's duplicate window; the cap
// bounds the memory a flood of cancels can take (about 200 bytes each).
const (
	cancelMemoryTTL = 10 * time.Minute
	cancelMemoryMax = 16384
)

// endedPlans remembers the cancels a worker received, so that calls of an
// ended plan that arrive later are dropped instead of run. A cancel is
// remembered as its plan id with the digest of the token it revealed, and
// a later call is dropped only if it carries that digest: a forged cancel
// (which cannot know the token) drops nothing, and since it takes an entry
// of its own it cannot replace the real one either.
//
// Every operation is O(1): entries sit in a map and in a list oldest
// first, and expire from the front. When full, the oldest entry goes; a
// flood of cancels can thus make a worker forget a real one, which costs
// only the work of running a call whose result the dispatcher ignores.
// Not safe for concurrent use.
type endedPlans struct {
	ttl     time.Duration
	max     int
	entries map[endedPlan]*list.Element
	order   list.List // of endedKey, oldest first
}

type endedPlan struct{ planID, digest string }

type endedKey struct {
	endedPlan
	at time.Time
}

func newEndedPlans(ttl time.Duration, maxEntries int) *endedPlans {
	return &endedPlans{ttl: ttl, max: maxEntries, entries: map[endedPlan]*list.Element{}}
}

// add remembers that a cancel of planID revealing a token with this
// digest arrived at now.
func (e *endedPlans) add(planID, digest string, now time.Time) {
	e.expire(now)
	k := endedPlan{planID, digest}
	if el, ok := e.entries[k]; ok {
		e.remove(el)
	}
	for e.order.Len() >= e.max {
		e.remove(e.order.Front())
	}
	e.entries[k] = e.order.PushBack(endedKey{k, now})
}

// ended reports whether a call of planID carrying cancelDigest belongs to
// a plan whose cancel has arrived.
func (e *endedPlans) ended(planID, cancelDigest string, now time.Time) bool {
	e.expire(now)
	_, ok := e.entries[endedPlan{planID, cancelDigest}]
	return ok && cancelDigest != ""
}

// expire drops the entries older than the TTL: they are at the front.
func (e *endedPlans) expire(now time.Time) {
	for el := e.order.Front(); el != nil && now.Sub(el.Value.(endedKey).at) > e.ttl; el = e.order.Front() {
		e.remove(el)
	}
}

func (e *endedPlans) remove(el *list.Element) {
	delete(e.entries, el.Value.(endedKey).endedPlan)
	e.order.Remove(el)
}

func (e *endedPlans) len() int { return e.order.Len() }

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
// of its own it cannot replace the real one either. When full, the oldest
// entry goes; a flood of cancels can thus make a worker forget a real one,
// which costs only the work of running a call whose result the dispatcher
// ignores. Not safe for concurrent use.
type endedPlans struct{ recent[endedPlan] }

type endedPlan struct{ planID, digest string }

func newEndedPlans(ttl time.Duration, maxEntries int) *endedPlans {
	return &endedPlans{newRecent[endedPlan](ttl, maxEntries)}
}

// add remembers that a cancel of planID revealing a token with this
// digest arrived at now.
func (e *endedPlans) add(planID, digest string, now time.Time) { e.put(endedPlan{planID, digest}, now) }

// ended reports whether a call of planID carrying cancelDigest belongs to
// a plan whose cancel has arrived.
func (e *endedPlans) ended(planID, cancelDigest string, now time.Time) bool {
	return cancelDigest != "" && e.has(endedPlan{planID, cancelDigest}, now)
}

// recent remembers keys for ttl each, and at most max of them, the oldest
// going first. Every operation is O(1): entries sit in a map and in a
// list oldest first, and expire from the front. Not safe for concurrent
// use.
type recent[K comparable] struct {
	ttl     time.Duration
	max     int
	entries map[K]*list.Element
	order   list.List // of stamped[K], oldest first
}

type stamped[K comparable] struct {
	key K
	at  time.Time
}

func newRecent[K comparable](ttl time.Duration, maxEntries int) recent[K] {
	return recent[K]{ttl: ttl, max: maxEntries, entries: map[K]*list.Element{}}
}

// put remembers k as of now.
func (r *recent[K]) put(k K, now time.Time) {
	r.expire(now)
	if el, ok := r.entries[k]; ok {
		r.remove(el)
	}
	for r.order.Len() >= r.max {
		r.remove(r.order.Front())
	}
	r.entries[k] = r.order.PushBack(stamped[K]{k, now})
}

// has reports whether k was put within the ttl (and not pushed out).
func (r *recent[K]) has(k K, now time.Time) bool {
	r.expire(now)
	_, ok := r.entries[k]
	return ok
}

// expire drops the entries older than the ttl: they are at the front.
func (r *recent[K]) expire(now time.Time) {
	for el := r.order.Front(); el != nil && now.Sub(el.Value.(stamped[K]).at) > r.ttl; el = r.order.Front() {
		r.remove(el)
	}
}

func (r *recent[K]) remove(el *list.Element) {
	delete(r.entries, el.Value.(stamped[K]).key)
	r.order.Remove(el)
}

func (r *recent[K]) len() int { return r.order.Len() }

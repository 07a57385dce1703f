package worker

import (
	"container/list"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/schemas"
)

// maxCancelSize bounds the cancels worth decoding; a real one is about
// 100 bytes.
const maxCancelSize = 1024

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

// onCancel stops the running calls of a plan whose cancel token matches
// their cancelDigest, and remembers the cancel for calls that arrive
// later. A message that is not a well-formed cancel of the subject's plan
// is ignored; one whose token matches no call stops nothing. The work per
// message does not depend on how many cancels came before: a lookup of the
// plan's calls and an O(1) update of the remembered cancels.
func (w *Worker) onCancel(m *nats.Msg) {
	planID := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var c planbus.Cancel
	if len(m.Data) > maxCancelSize {
		if w.rejects.Allow() {
			w.log.Warn("ignoring a cancel larger than any real one", slog.String("subject", m.Subject), slog.Int("bytes", len(m.Data)))
		}
		return
	}
	if err := schemas.Validate(schemas.Cancel, m.Data); err != nil {
		if w.rejects.Allow() {
			w.log.Warn("ignoring an invalid cancel", slog.Any("error", err), slog.String("subject", m.Subject))
		}
		return
	}
	if err := json.Unmarshal(m.Data, &c); err != nil || c.PlanID != planID {
		if w.rejects.Allow() {
			w.log.Warn("ignoring a cancel of another plan", slog.String("subject", m.Subject), slog.String("cancel_plan_id", c.PlanID))
		}
		return
	}
	// Digests are public (every call carries its own), so comparing them
	// needs no constant time; the token is what a forger lacks.
	digest := token.Digest(c.Token)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for cl := range w.inflight[planID] {
		if cl.digest == digest {
			cl.cancel(ErrPlanEnded)
		}
	}
	w.ended.add(planID, digest, now)
}

package worker

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
)

// ackWaitRefresh is how often heartbeats reads the skills' consumers'
// AckWait again: another worker given another AckWait changes it.
var ackWaitRefresh = 5 * time.Second

// What hold found of a call.
const (
	holdTaken   = iota // the call is this worker's to run now
	holdRunning        // this worker runs or reports it already
	holdSettled        // this worker acknowledged it a moment ago
)

// callKey is what a worker knows a call by across its deliveries: a hash
// of its plan, tool, attempt and token, as the dispatcher made them (16
// bytes: a worker remembers the calls it settled in the last minute, some
// 100,000 at 300 plans a second). Not its stream sequence: a server that
// crashed can come back with a stream's sequences rolled back, and give a
// new call the sequence of one acknowledged a moment before the crash
// (nats-server 2.15, kill -9 in the soak: the new call was taken for a
// delivery again of the old one and acknowledged without running).
type callKey [16]byte

// keyOf is the callKey of tc.
func keyOf(tc *planbus.ToolCall) callKey {
	b := make([]byte, 0, 160)
	b = append(b, tc.PlanID...)
	b = append(b, 0)
	b = append(b, tc.ToolID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(tc.Attempt), 10)
	b = append(b, 0)
	b = append(b, tc.Token...)
	sum := sha256.Sum256(b)
	return callKey(sum[:16])
}

// settledMemory is how long a worker remembers the calls it acknowledged,
// and settledMax how many at most: a delivery already on its way when the
// ack went out arrives within moments.
const (
	settledMemory = time.Minute
	settledMax    = 1 << 16
)

type call struct {
	msg    jetstream.Msg
	planID string
	digest string // the call's cancelDigest
	cancel context.CancelCauseFunc
}

// pull keeps as many calls requested or running as the skill's concurrency
// allows, and never more: a slot is reserved before its call is requested,
// so no call waits in a client buffer where no heartbeat covers it. A new
// pull request goes out only when the open ones can take no more calls;
// until then new calls flow into those, so pull requests are few and large.
func (w *Worker) pull(ctx context.Context, s *served, cons jetstream.Consumer) {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	free, unfilled := w.cfg.Concurrency, 0
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	})
	defer stop()
	release := func(slots, open int) {
		mu.Lock()
		free += slots
		unfilled -= open
		cond.Broadcast()
		mu.Unlock()
	}
	// One long-lived runner per slot: calls reuse their goroutines (and the
	// stacks they grew) instead of starting one each.
	work := make(chan jetstream.Msg)
	var fetchers sync.WaitGroup
	for range w.cfg.Concurrency {
		w.runners.Add(1)
		go func() {
			defer w.runners.Done()
			for msg := range work {
				w.handle(s, msg)
				w.calls.Done()
				release(1, 0)
			}
		}()
	}
	defer func() {
		fetchers.Wait()
		close(work)
	}()
	for {
		mu.Lock()
		for ctx.Err() == nil && (free == 0 || unfilled > 0) {
			cond.Wait()
		}
		if ctx.Err() != nil {
			mu.Unlock()
			return
		}
		n := free
		free, unfilled = 0, n
		mu.Unlock()

		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			release(n, n)
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("fetch failed; retrying", slog.Any("error", err), slog.String("skill", s.skill.Manifest.Name))
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		fetchers.Add(1)
		go func() {
			defer fetchers.Done()
			defer cancel()
			got := 0
			for msg := range batch.Messages() {
				got++
				release(0, 1)
				w.calls.Add(1)
				work <- msg // a runner is free: there are as many as slots
			}
			release(n-got, n-got)
		}()
	}
}

// heartbeatEvery is how often calls held get a heartbeat: a third of the
// shortest AckWait of the skills' consumers.
func (w *Worker) heartbeatEvery() time.Duration {
	shortest := w.cfg.AckWait
	for _, s := range w.skills {
		if d := time.Duration(s.ackWait.Load()); d > 0 && d < shortest {
			shortest = d
		}
	}
	return max(shortest/3, 50*time.Millisecond)
}

// refreshAckWaits reads each skill's consumer's AckWait again and reports
// whether one changed.
func (w *Worker) refreshAckWaits(consumers []jetstream.Consumer) bool {
	changed := false
	for i, s := range w.skills {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := consumers[i].Info(ctx)
		cancel()
		if err != nil {
			continue
		}
		if d := info.Config.AckWait; s.ackWait.Swap(int64(d)) != int64(d) {
			changed = true
			w.log.Info("the skill's consumer has another ack wait now; heartbeating to it", slog.String("skill", s.skill.Manifest.Name), slog.Duration("ack_wait", d))
		}
	}
	return changed
}

// heartbeats tells JetStream that held calls are still being worked on,
// at a third of the shortest AckWait of the skills' consumers.
func (w *Worker) heartbeats(done <-chan struct{}, consumers []jetstream.Consumer) {
	every := w.heartbeatEvery()
	t := time.NewTicker(every)
	defer t.Stop()
	refresh := time.NewTicker(w.ackWaitRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-done:
			return
		case <-refresh.C:
			if w.refreshAckWaits(consumers) {
				if d := w.heartbeatEvery(); d != every {
					every = d
					t.Reset(every)
				}
			}
		case <-t.C:
			w.mu.Lock()
			msgs := make([]jetstream.Msg, 0, w.running)
			for _, calls := range w.inflight {
				for c := range calls {
					msgs = append(msgs, c.msg)
				}
			}
			// Deliveries that wait for a run here (hold) too: the call
			// published again must not go to another worker meanwhile.
			for _, again := range w.held {
				msgs = append(msgs, again...)
			}
			w.mu.Unlock()
			for _, m := range msgs {
				_ = m.InProgress()
			}
		}
	}
}

// track adds a call to those in flight, unless a cancel of its plan with
// its digest has arrived: then it reports false.
func (w *Worker) track(c *call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended.ended(c.planID, c.digest, time.Now()) {
		return false
	}
	calls := w.inflight[c.planID]
	if calls == nil {
		calls = map[*call]struct{}{}
		w.inflight[c.planID] = calls
	}
	calls[c] = struct{}{}
	w.running++
	return true
}

// hold records that call k is this worker's to run and report, unless it
// already runs here or was settled here lately. A delivery of a call that
// runs here (its heartbeat came late, or the dispatcher published it
// again as a new message) waits for the run: unhold settles it with it.
func (w *Worker) hold(k callKey, msg jetstream.Msg) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if again, ok := w.held[k]; ok {
		w.held[k] = append(again, msg)
		return holdRunning
	}
	if w.settled.has(k, time.Now()) {
		return holdSettled
	}
	w.held[k] = nil
	return holdTaken
}

// unhold ends hold; settled records that the call was acknowledged, and
// the deliveries that waited for the run are acknowledged too (else
// handed back).
func (w *Worker) unhold(k callKey, settled bool) {
	w.mu.Lock()
	again := w.held[k]
	delete(w.held, k)
	if settled {
		w.settled.put(k, time.Now())
	}
	w.mu.Unlock()
	for _, m := range again {
		if settled {
			_ = m.Ack()
		} else {
			_ = m.Nak()
		}
	}
}

func (w *Worker) untrack(c *call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := w.inflight[c.planID]
	delete(calls, c)
	if len(calls) == 0 {
		delete(w.inflight, c.planID)
	}
	w.running--
}

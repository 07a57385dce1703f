package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// flush makes sure the server has processed what was sent before, within
// ctx or, if ctx has no deadline, the request timeout.
func (c *Client) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.requestTimeout)
		defer cancel()
	}
	for {
		// A flush in flight when the connection drops is ended with
		// nats.ErrConnectionClosed although nats.go reconnects: it is
		// sent again, and answered once the connection is back, after
		// the subscriptions are renewed. Only a closed connection, or the
		// context, ends it.
		err := c.nc.FlushWithContext(ctx)
		if !errors.Is(err, nats.ErrConnectionClosed) || c.nc.IsClosed() {
			return err
		}
	}
}

// Await waits for a request's outcome. It returns at once for a request
// that has ended. It does not check that the request exists: Status does.
func (c *Client) Await(ctx context.Context, requestID string) (*planbus.Outcome, error) {
	w, err := c.follow(ctx, requestID, bus.StreamOutcomes, bus.OutcomeSubject(requestID), false)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	return w.outcome(ctx, false, nil)
}

// Watch follows a request to its end: it passes onEvent (which may be
// nil) the request's events that already happened (events are kept for an
// hour), in the order they were stored, then the ones to come as they
// happen, and returns the outcome. For a request that has ended it shows
// the past and returns at once. It does not check that the request
// exists: Status does.
func (c *Client) Watch(ctx context.Context, requestID string, onEvent func(planbus.Event)) (*planbus.Outcome, error) {
	w, err := c.follow(ctx, requestID, bus.StreamOutcomes, bus.OutcomeSubject(requestID), onEvent != nil)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	return w.outcome(ctx, true, onEvent)
}

// WatchPlan follows a plan to its end as Watch follows a request: it
// passes onEvent the events of the plan (those of its request that name
// it), past and to come, and returns its execution result. It is for
// plans published on their own (ExecutePlan); a plan id of a request's
// attempt works too. A plan sent through the planner (SubmitPlan, RunPlan)
// runs as <requestId>-1, not under the planId it carried (its requestId
// defaults to that planId): watch the request with Watch, or that id.
func (c *Client) WatchPlan(ctx context.Context, planID string, onEvent func(planbus.Event)) (*planbus.ExecutionResult, error) {
	requestID := planID
	if st, err := c.planStatus(ctx, planID); err != nil {
		return nil, err
	} else if st != nil {
		requestID = st.RequestID
	}
	w, err := c.follow(ctx, requestID, bus.StreamExecutions, bus.ExecutionSubject(planID), onEvent != nil)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	return w.execution(ctx, true, onEvent, planID)
}

// follower follows a request: its events, on a subscription, and the one
// message that ends it (an outcome or an execution result), subscribed to
// and read from its stream.
type follower struct {
	c         *Client
	requestID string
	subject   string // of the result

	mu      sync.Mutex
	queue   []*nats.Msg   // events received, not yet delivered
	wake    chan struct{} // a new event is queued
	dropped int
	esub    *nats.Subscription

	result   <-chan []byte
	stopWait func()
}

// follow subscribes to the request's events (if events) and starts
// waiting for the message on subject in stream. Both subscriptions are in
// place at the server when it returns.
func (c *Client) follow(ctx context.Context, requestID, stream, subject string, events bool) (*follower, error) {
	w := &follower{c: c, requestID: requestID, subject: subject, wake: make(chan struct{}, 1)}
	if events {
		sub, err := c.nc.Subscribe(bus.EventsOfRequest(requestID), w.take)
		if err != nil {
			return nil, fmt.Errorf("client: follow the events of %s: %w", requestID, err)
		}
		// Events are held in the queue; the subscription only hands them
		// over, so the server's and the library's limits are not what
		// drops them.
		_ = sub.SetPendingLimits(-1, -1)
		w.esub = sub
	}
	result, stop, err := c.await(ctx, stream, subject)
	if err != nil {
		w.stop()
		return nil, err
	}
	w.result, w.stopWait = result, stop
	return w, nil
}

func (w *follower) take(m *nats.Msg) {
	w.mu.Lock()
	if len(w.queue) < w.c.opt.eventBuffer {
		w.queue = append(w.queue, m)
	} else {
		w.dropped++
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *follower) stop() {
	if w.esub != nil {
		_ = w.esub.Unsubscribe()
	}
	if w.stopWait != nil {
		w.stopWait()
	}
}

// outcome waits for the request's outcome; with past, it first delivers
// the events stored before.
func (w *follower) outcome(ctx context.Context, past bool, onEvent func(planbus.Event)) (*planbus.Outcome, error) {
	data, err := w.wait(ctx, past, onEvent, "")
	if err != nil {
		return nil, err
	}
	var o planbus.Outcome
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("client: outcome of %s: %w", w.requestID, err)
	}
	return &o, nil
}

// execution waits for a plan's execution result; with planID, only the
// events naming that plan are delivered.
func (w *follower) execution(ctx context.Context, past bool, onEvent func(planbus.Event), planID string) (*planbus.ExecutionResult, error) {
	data, err := w.wait(ctx, past, onEvent, planID)
	if err != nil {
		return nil, err
	}
	var res planbus.ExecutionResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("client: execution result on %s: %w", w.subject, err)
	}
	return &res, nil
}

// wait delivers events until the result arrives, then the events the
// server routed before it, and returns the result. With past, it first
// reads the events already in the EVENTS stream; the live ones that are
// also there are delivered once.
func (w *follower) wait(ctx context.Context, past bool, onEvent func(planbus.Event), planID string) ([]byte, error) {
	deliver := func(data []byte) {
		var ev planbus.Event
		if json.Unmarshal(data, &ev) != nil {
			return // watchers skip what they cannot decode
		}
		if planID != "" && ev.PlanID != planID {
			return
		}
		onEvent(ev)
	}
	var seed maphash.Seed
	var seen map[uint64]int // events read from the stream, by hash
	if past && onEvent != nil {
		seed, seen = maphash.MakeSeed(), map[uint64]int{}
		err := w.c.pastEvents(ctx, w.requestID, func(data []byte) {
			seen[maphash.Bytes(seed, data)]++
			deliver(data)
		})
		if err != nil {
			return nil, err
		}
	}
	drain := func() {
		w.mu.Lock()
		q := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, m := range q {
			if seen != nil {
				h := maphash.Bytes(seed, m.Data)
				if seen[h] > 0 {
					seen[h]-- // read from the stream already
					continue
				}
			}
			deliver(m.Data)
		}
	}
	for {
		select {
		case <-w.wake:
			drain()
		case data := <-w.result:
			if onEvent != nil {
				// A round trip to the server makes sure every event it
				// routed to us before now has arrived; draining the
				// subscription hands each of them to take before it
				// closes, so none is still on its way to the queue.
				_ = w.c.nc.FlushTimeout(time.Second)
				if w.esub != nil {
					closed := w.esub.StatusChanged(nats.SubscriptionClosed)
					if w.esub.Drain() == nil {
						select {
						case <-closed:
						case <-time.After(time.Second):
						}
					}
				}
				drain()
				w.mu.Lock()
				dropped := w.dropped
				w.mu.Unlock()
				if dropped > 0 {
					w.c.log.Debug("events dropped: the buffer was full", slog.Int("dropped", dropped), slog.String("request_id", w.requestID))
				}
			}
			return data, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w on %s: %w", ErrNoResult, w.subject, context.Cause(ctx))
		}
	}
}

// pastEvents passes each event of the request in the EVENTS stream to
// each, in stream order, by direct gets of the next message on the
// request's subjects: the client role may read by subject, not create
// consumers.
func (c *Client) pastEvents(ctx context.Context, requestID string, each func([]byte)) error {
	st, err := c.stream(ctx, bus.StreamEvents)
	if err != nil {
		return err
	}
	filter := bus.EventsOfRequest(requestID)
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("client: past events of %s: %w", requestID, err)
		}
		each(m.Data)
		seq = m.Sequence + 1
	}
}

// await waits for the message on subject, which stream keeps: it
// subscribes to the subject, then reads the stream's last message on it,
// which is there if it was published before the subscription, and reads
// it again every poll interval, since a subscription misses what is
// published while the connection is down. It needs no consumer, only
// reads by subject. The channel receives the first message; stop ends the
// wait.
func (c *Client) await(ctx context.Context, stream, subject string) (<-chan []byte, func(), error) {
	out := make(chan []byte, 1)
	offer := func(data []byte) {
		select {
		case out <- data:
		default: // one is enough: the first is the answer
		}
	}
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) { offer(m.Data) })
	if err != nil {
		return nil, nil, fmt.Errorf("client: follow %s: %w", subject, err)
	}
	// The subscription must be in place at the server before the stream
	// is read, or a message published in between would be missed by both.
	if err := c.flush(ctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, fmt.Errorf("client: follow %s: %w", subject, err)
	}
	st, err := c.stream(ctx, stream)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(c.opt.pollInterval)
		defer tick.Stop()
		for {
			// Not there yet, or not readable now (reconnecting, a leader
			// being elected): either way, look again at the next tick.
			m, err := st.GetLastMsgForSubject(pctx, subject)
			if err == nil {
				offer(m.Data)
				return
			}
			if !errors.Is(err, jetstream.ErrMsgNotFound) && pctx.Err() == nil {
				c.log.Debug("cannot read the stream now; trying again", slog.Any("error", err), slog.String("subject", subject))
			}
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return out, func() { cancel(); <-done; _ = sub.Unsubscribe() }, nil
}

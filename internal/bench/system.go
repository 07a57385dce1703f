package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/wire"
)

// System submits plans to a running planbus over NATS and waits for their
// execution results on one subscription.
type System struct {
	conn *bus.Conn
	sub  *nats.Subscription
	mu   sync.Mutex
	// waiting holds what to do with each awaited plan's result (nil if it
	// could not be decoded), called on the subscription's goroutine.
	waiting map[string]func(*planbus.ExecutionResult)
	// window and stallWait set up each run's submitter (0: the
	// defaults); tests make them small.
	window    int
	stallWait time.Duration
}

// submitter publishes on s's connection.
func (s *System) submitter() *submitter {
	sub := newSubmitter(s.conn.JS)
	if s.window > 0 {
		sub.window = s.window
	}
	sub.stallWait = s.stallWait
	return sub
}

// NewSystem subscribes to every execution result.
func NewSystem(conn *bus.Conn) (*System, error) {
	s := &System{conn: conn, waiting: map[string]func(*planbus.ExecutionResult){}}
	sub, err := conn.NC.Subscribe(bus.SubjectExecutionsAll, func(m *nats.Msg) {
		id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		s.mu.Lock()
		done := s.waiting[id]
		delete(s.waiting, id)
		s.mu.Unlock()
		if done == nil {
			return
		}
		res, err := ended(m.Data)
		if err != nil {
			res = nil
		}
		done(res)
	})
	if err != nil {
		return nil, err
	}
	if err := conn.NC.Flush(); err != nil {
		return nil, err
	}
	s.sub = sub
	return s, nil
}

// ended reads what the bench needs of an execution result: whether and
// when the plan ended well. It skips the tools' outcomes (wire.Lenient),
// whose decoding (2 ms at 1,000 tools) is the bench's work, not the
// system's, yet would count in its CPU time.
func ended(data []byte) (*planbus.ExecutionResult, error) {
	var h struct {
		State      planbus.PlanState  `json:"state"`
		Success    bool               `json:"success"`
		Error      *planbus.ErrorInfo `json:"error"`
		FinishedAt time.Time          `json:"finishedAt"`
	}
	if err := wire.Lenient(data, &h); err != nil {
		return nil, err
	}
	return &planbus.ExecutionResult{State: h.State, Success: h.Success, Error: h.Error, FinishedAt: h.FinishedAt}, nil
}

// Close unsubscribes.
func (s *System) Close() { _ = s.sub.Unsubscribe() }

// await has done called with the result of plan id.
func (s *System) await(id string, done func(*planbus.ExecutionResult)) {
	s.mu.Lock()
	s.waiting[id] = done
	s.mu.Unlock()
}

// forget stops waiting for plan id.
func (s *System) forget(id string) {
	s.mu.Lock()
	delete(s.waiting, id)
	s.mu.Unlock()
}

// Run submits the plans at once and waits for all; it returns the time
// from the first submission to the last result and each plan's latency.
//
// The plans are published asynchronously with a bounded number awaiting
// their acknowledgement (submitter): however many there are, the
// submission waits for the server rather than failing on nats.go's limit.
func (s *System) Run(ctx context.Context, plans []Input) (_ time.Duration, _ []time.Duration, err error) {
	type pending struct {
		ch    chan *planbus.ExecutionResult
		start time.Time
	}
	ps := make([]pending, len(plans))
	for i, p := range plans {
		ch := make(chan *planbus.ExecutionResult, 1)
		ps[i].ch = ch
		s.await(p.ID, func(r *planbus.ExecutionResult) { ch <- r })
	}
	// A run that fails leaves no plan of its own awaited.
	defer func() {
		if err != nil {
			for _, p := range plans {
				s.forget(p.ID)
			}
		}
	}()
	sub := s.submitter()
	start := time.Now()
	for i, p := range plans {
		// A plan's latency starts when it is published: past the
		// submitter's window, after the server has acknowledged older ones.
		ps[i].start = time.Now()
		if err := sub.publish(ctx, bus.PlanSubject(p.ID), p.Doc, p.ID); err != nil {
			return 0, nil, err
		}
	}
	if err := sub.wait(ctx); err != nil {
		return 0, nil, err
	}
	lat := make([]time.Duration, len(plans))
	var end time.Time
	for i := range ps {
		select {
		case res := <-ps[i].ch:
			now := time.Now()
			if res == nil || !res.Success {
				msg := "undecodable result"
				if res != nil {
					msg = fmt.Sprintf("%s: %v", res.State, res.Error)
				}
				return 0, nil, fmt.Errorf("bench: plan %s: %s", plans[i].ID, msg)
			}
			// Results are read in submission order; a plan that finished
			// earlier than it was read waited in its channel.
			lat[i] = now.Sub(ps[i].start)
			if res.FinishedAt.After(ps[i].start) && res.FinishedAt.Before(now) {
				lat[i] = res.FinishedAt.Sub(ps[i].start)
			}
			end = now
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	return end.Sub(start), lat, nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// submitWindow bounds the bench's plan publishes awaiting their
// acknowledgement. It is below nats.go's limit of a JetStream context
// (4,000 by default), which, once reached, makes PublishAsync wait 200 ms
// for room and then fail with ErrTooManyStalledMsgs: many-plans-5000 with
// --sync always, whose acknowledgements each wait for a disk flush, did.
// It is above 1,000 so that many-plans-1000 is still submitted all at
// once, as its published figures were.
const submitWindow = 2048

// submitter publishes plans asynchronously with at most window of them
// awaiting their acknowledgement: past that it waits for the oldest one,
// and it takes nats.go's stall (others' publishes on the same context
// filling its limit) as the same backpressure, not as an error. The
// submission is as fast as the server acknowledges; none is dropped.
//
// A submitter is used by one goroutine at a time.
type submitter struct {
	js     jetstream.JetStream
	window int
	// stallWait, when positive, is how long nats.go waits for room before
	// it reports a stall (jetstream.WithStallWait); 0 leaves its default.
	stallWait time.Duration
	inflight  []jetstream.PubAckFuture // oldest first
}

func newSubmitter(js jetstream.JetStream) *submitter {
	return &submitter{js: js, window: submitWindow}
}

// publish publishes data to subject with msgID for deduplication. It
// returns once the message is sent, after waiting for acknowledgements
// if the window is full. It returns an acknowledgement's error (the
// server refused or failed to store a message published before), a
// publish error other than a stall, or ctx's.
func (s *submitter) publish(ctx context.Context, subject string, data []byte, msgID string) error {
	if err := s.reap(); err != nil {
		return err
	}
	for len(s.inflight) >= max(s.window, 1) {
		if err := s.waitOldest(ctx); err != nil {
			return err
		}
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(msgID)}
	if s.stallWait > 0 {
		opts = append(opts, jetstream.WithStallWait(s.stallWait))
	}
	for {
		f, err := s.js.PublishAsync(subject, data, opts...)
		if err == nil {
			s.inflight = append(s.inflight, f)
			return nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return fmt.Errorf("bench: publish %s: %w", subject, err)
		}
		// A stalled publish is not sent (nats.go refuses it before it
		// sends), so it is tried again once there is room.
		if len(s.inflight) > 0 {
			if err := s.waitOldest(ctx); err != nil {
				return err
			}
			continue
		}
		select {
		case <-s.js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reap drops the acknowledged publishes at the head of the window,
// without waiting, so an acknowledgement's error is reported soon.
func (s *submitter) reap() error {
	for len(s.inflight) > 0 {
		f := s.inflight[0]
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("bench: publish %s: %w", f.Msg().Subject, err)
		default:
			return nil
		}
		s.pop()
	}
	return nil
}

// waitOldest waits for the oldest publish's acknowledgement.
func (s *submitter) waitOldest(ctx context.Context) error {
	f := s.inflight[0]
	select {
	case <-f.Ok():
	case err := <-f.Err():
		return fmt.Errorf("bench: publish %s: %w", f.Msg().Subject, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	s.pop()
	return nil
}

func (s *submitter) pop() {
	s.inflight[0] = nil
	s.inflight = s.inflight[1:]
}

// wait waits until every publish is acknowledged; it returns the first
// acknowledgement's error or ctx's.
func (s *submitter) wait(ctx context.Context) error {
	for len(s.inflight) > 0 {
		if err := s.waitOldest(ctx); err != nil {
			return err
		}
	}
	return nil
}

package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SetFlush replaces the round trip Run makes to the server before it
// serves, so a test can make it fail.
func SetFlush(w *Worker, flush func() error) { w.flush = flush }

// SetAckWaitRefresh sets how often workers made after it (New) read their
// consumers' AckWait again, and returns a function that restores it.
func SetAckWaitRefresh(d time.Duration) (restore func()) {
	old := ackWaitRefresh
	ackWaitRefresh = d
	return func() { ackWaitRefresh = old }
}

// ResultPublisher is the worker's publisher of results, which commits
// those that finish together as one atomic batch.
type ResultPublisher = resultPublisher

// PublisherHooks let a test see and hold a ResultPublisher's steps.
type PublisherHooks struct {
	// Queued is called with the number of results waiting once one more
	// is queued.
	Queued func(waiting int)
	// Sending is called before each publish of the queue with the number
	// of results it takes and whether they go as one batch; the publish
	// waits for it to return.
	Sending func(n int, batch bool)
}

// NewResultPublisher returns a publisher of results on nc whose batches
// end with ctx. plainMax and minBatch, when not 0, replace how many results
// it publishes on their own at once and the fewest it batches.
func NewResultPublisher(ctx context.Context, nc *nats.Conn, plainMax, minBatch int, hooks PublisherHooks) (*ResultPublisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	p := newResultPublisher(ctx, nc, js, slog.New(slog.DiscardHandler), publisherHooks{})
	p.tune(plainMax, minBatch, hooks)
	return p, nil
}

func (p *resultPublisher) tune(plainMax, minBatch int, hooks PublisherHooks) {
	if plainMax != 0 {
		p.plainMax = plainMax
	}
	if minBatch != 0 {
		p.minBatch = minBatch
	}
	p.hooks = publisherHooks{queued: hooks.Queued, sending: hooks.Sending}
}

// Publish is one try of storing m, a result with its Nats-Msg-Id.
func (p *resultPublisher) Publish(ctx context.Context, m *nats.Msg) error { return p.publish(ctx, m) }

// TuneResults makes the publisher of w's results (made when Run starts)
// publish at most plainMax results on their own at once and batch at
// least minBatch (each when not 0), calling hooks.
func TuneResults(w *Worker, plainMax, minBatch int, hooks PublisherHooks) {
	w.resultTuning = func(p *resultPublisher) { p.tune(plainMax, minBatch, hooks) }
}

// Commit publishes msgs, results with their Nats-Msg-Id, as one atomic
// batch.
func (p *resultPublisher) Commit(ctx context.Context, msgs []*nats.Msg) error {
	batch := make([]*queuedResult, len(msgs))
	for i, m := range msgs {
		batch[i] = &queuedResult{msg: m, size: m.Size(), done: make(chan error, 1)}
	}
	return p.commit(ctx, batch)
}

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The headers of an atomic batch publish (nats-server 2.12+, ADR-50).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// The server's answers to a batch that name a limit or a stream setting,
// among the errors that refuse a batch as a whole.
const (
	errCodeBatchDisabled jetstream.ErrorCode = 10174 // the stream does not allow atomic publish
	errCodeBatchTooLarge jetstream.ErrorCode = 10199 // more messages than the server's max_batch_size
)

const (
	// plainMax is how many results a worker publishes each on its own at
	// once; those that finish while that many are in flight queue for a
	// batch. minBatch is the fewest queued that go as a batch: fewer go on
	// their own as places among the plainMax free up. A server of one
	// replica stages a batch in a store of its own, a directory of files
	// made, flushed and deleted for each batch, which costs about as much
	// as ten results published on their own (docs/benchmarks.md, "Results
	// in atomic batches"): a batch pays only when it carries many, and a
	// worker with few calls at once (16, a skill's default concurrency)
	// publishes as it always has.
	plainMax = 16
	minBatch = 8
	// maxBatchMsgs is the most results a batch carries: nats-server's
	// default limit of messages in an atomic batch. A server configured
	// with less says so, and batches are halved until they fit.
	maxBatchMsgs = 1000
	// batchHeaderRoom is what the batch headers add to a message, with
	// room to spare: a result that fits the server's max payload only
	// without it is published on its own.
	batchHeaderRoom = 128
	// publishTry bounds one try of a publish (of a result, or of a batch).
	publishTry = 5 * time.Second
	// plainFor is how long results are published one by one after the
	// server said it does not take batches (a stream declared without
	// allow_atomic, a server older than 2.12), before batching is tried
	// again: a planner or dispatcher may update the stream meanwhile.
	plainFor = time.Minute
)

var (
	// errBatchRefused means the server refused a batch as a whole: each
	// of its results is published again on its own.
	errBatchRefused = errors.New("worker: batch refused")
	// errGoPlain tells a queued result to go on its own: a place among
	// the plainMax is free.
	errGoPlain = errors.New("worker: publish on its own")
)

// resultPublisher stores a worker's results in PLANBUS_RESULTS, many in
// one atomic batch when many finish at once.
//
// Why: at the default durability (--sync always) the server flushes every
// stored message to disk on its own, so a fan-out of 1,000 tools costs
// 1,000 flushes of the results stream, one after another. A server of one
// replica commits an atomic batch (nats-server 2.12+, the stream's
// allow_atomic) with one flush. So results are published each on its own,
// as ever, while fewer than plainMax are in flight and no batch is; those
// that finish meanwhile queue, and the queue goes as one atomic batch once
// it holds minBatch (up to the server's batch limit and, together, the
// server's max payload) while no other batch is in flight: under load,
// each batch carries what finished during the one before. Each result is
// still its own message on its own subject with its own Nats-Msg-Id, so
// dispatchers and readers see nothing new. A batch the server refuses (one
// duplicate message id fails a batch as a whole; a stream without atomic
// publish; too many batches in flight) is published again one result at a
// time, each de-duplicated on its own, so every result is stored exactly
// once.
//
// publish waits for its own result's acknowledgement, so a caller acks its
// call only after its result is stored, as before.
type resultPublisher struct {
	ctx context.Context // bounds batches; a worker's callCtx
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger

	plainMax, minBatch int

	mu         sync.Mutex
	queue      []*queuedResult
	plainOut   int       // results being published on their own, of plainMax
	batchOut   bool      // a batch is in flight
	maxMsgs    int       // the most results in a batch
	plainUntil time.Time // batches refused as unsupported: none until then

	hooks publisherHooks
}

// publisherHooks let tests and the benchmark see the publisher's steps and
// hold them; all nil in a worker.
type publisherHooks struct {
	// queued is called with the number of results waiting once one more
	// is queued.
	queued func(waiting int)
	// sending is called before each publish with the number of results it
	// carries and whether they go as a batch; the publish waits for it to
	// return.
	sending func(n int, batch bool)
}

// queuedResult is a result waiting for its publish.
type queuedResult struct {
	msg  *nats.Msg
	size int
	done chan error // its outcome, or errGoPlain; buffered
}

// newResultPublisher returns a publisher whose batches end with ctx.
func newResultPublisher(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, log *slog.Logger, hooks publisherHooks) *resultPublisher {
	return &resultPublisher{ctx: ctx, nc: nc, js: js, log: log, plainMax: plainMax, minBatch: minBatch, maxMsgs: maxBatchMsgs, hooks: hooks}
}

// publish stores m, a result with its Nats-Msg-Id, in the results stream:
// one try, bounded by ctx (a batch under way may take one publishTry
// more). It returns nil once the stream has it (or had it: a duplicate).
func (p *resultPublisher) publish(ctx context.Context, m *nats.Msg) error {
	size := m.Size()
	if size+batchHeaderRoom > int(p.nc.MaxPayload()) {
		return p.plain(ctx, m) // too large for a batch: on its own, whatever comes
	}
	p.mu.Lock()
	switch {
	case !p.plainUntil.IsZero() && time.Now().Before(p.plainUntil):
		p.mu.Unlock()
		return p.plain(ctx, m)
	case p.plainOut < p.plainMax && !p.batchOut && len(p.queue) == 0:
		p.plainOut++
		p.mu.Unlock()
		return p.plainCounted(ctx, m)
	}
	q := &queuedResult{msg: m, size: size, done: make(chan error, 1)}
	p.queue = append(p.queue, q)
	waiting := len(p.queue)
	p.dispatchLocked()
	p.mu.Unlock()
	if p.hooks.queued != nil {
		p.hooks.queued(waiting)
	}
	select {
	case err := <-q.done:
		switch {
		case errors.Is(err, errGoPlain):
			return p.plainCounted(ctx, m)
		case errors.Is(err, errBatchRefused):
			return p.plain(ctx, m)
		}
		return err
	case <-ctx.Done():
		if p.leave(q) {
			return ctx.Err()
		}
		// Taken already: its outcome is on its way (a batch ends within
		// publishTry).
		switch err := <-q.done; {
		case err == nil:
			return nil
		case errors.Is(err, errGoPlain):
			p.freePlain()
		}
		return ctx.Err()
	}
}

// leave takes q out of the queue, and reports whether it was there (not
// yet taken).
func (p *resultPublisher) leave(q *queuedResult) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.queue, q)
	if i < 0 {
		return false
	}
	p.queue = slices.Delete(p.queue, i, i+1)
	return true
}

// plain publishes m on its own and waits for the stream's ack, as workers
// always have.
func (p *resultPublisher) plain(ctx context.Context, m *nats.Msg) error {
	if p.hooks.sending != nil {
		p.hooks.sending(1, false)
	}
	_, err := p.js.PublishMsg(ctx, m)
	return err
}

// plainCounted is plain for one of the plainMax, which it frees.
func (p *resultPublisher) plainCounted(ctx context.Context, m *nats.Msg) error {
	defer p.freePlain()
	return p.plain(ctx, m)
}

// freePlain frees a place among the plainMax, and starts what the queue
// allows.
func (p *resultPublisher) freePlain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plainOut--
	p.dispatchLocked()
}

// dispatchLocked starts what the queue allows: a batch when none is in
// flight and the queue holds enough, and results on their own while
// places among the plainMax are free. p.mu is held.
func (p *resultPublisher) dispatchLocked() {
	for !p.batchOut && len(p.queue) >= p.minBatch {
		batch := p.takeLocked()
		if len(batch) > 1 {
			p.batchOut = true
			go p.sendBatch(batch)
			break
		}
		// Too large to share a batch with the next: on its own, even
		// beyond plainMax.
		p.plainOut++
		batch[0].done <- errGoPlain
	}
	for !p.batchOut && len(p.queue) > 0 && p.plainOut < p.plainMax {
		p.plainOut++
		p.queue[0].done <- errGoPlain
		p.queue = p.queue[1:]
	}
	if len(p.queue) == 0 {
		p.queue = nil // let the array go
	}
}

// takeLocked removes from the queue the results of the next batch: as
// many as the batch limit allows whose messages together fit in the
// server's max payload. p.mu is held.
func (p *resultPublisher) takeLocked() []*queuedResult {
	room := int(p.nc.MaxPayload())
	n, size := 0, 0
	for _, q := range p.queue {
		if n >= p.maxMsgs || n > 0 && size+q.size+batchHeaderRoom > room {
			break
		}
		size += q.size + batchHeaderRoom
		n++
	}
	batch := slices.Clone(p.queue[:n])
	p.queue = p.queue[n:]
	return batch
}

// sendBatch publishes batch as one atomic batch, tells each result the
// outcome, and starts what the queue allows next.
func (p *resultPublisher) sendBatch(batch []*queuedResult) {
	if p.hooks.sending != nil {
		p.hooks.sending(len(batch), true)
	}
	ctx, cancel := context.WithTimeout(p.ctx, publishTry)
	err := p.commit(ctx, batch)
	cancel()
	for _, q := range batch {
		q.done <- err
	}
	p.mu.Lock()
	p.batchOut = false
	p.dispatchLocked()
	p.mu.Unlock()
}

// commit publishes batch as one atomic batch: every message but the last
// without a reply subject (the server would answer each with an empty
// message; it answers the last, which commits the batch, with the
// acknowledgement of all), then the last as a request. An error wrapping
// errBatchRefused means the server stored none of them, or may have
// stored some outside a batch: each is to be published again on its own.
func (p *resultPublisher) commit(ctx context.Context, batch []*queuedResult) error {
	if err := ctx.Err(); err != nil {
		return err // rather than leave the server a batch without its commit
	}
	id := nuid.Next()
	for i, q := range batch {
		m := &nats.Msg{Subject: q.msg.Subject, Data: q.msg.Data, Header: make(nats.Header, len(q.msg.Header)+3)}
		maps.Copy(m.Header, q.msg.Header)
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i < len(batch)-1 {
			if err := p.nc.PublishMsg(m); err != nil {
				if errors.Is(err, nats.ErrMaxPayload) {
					return fmt.Errorf("%w: %w", errBatchRefused, err)
				}
				return err
			}
			continue
		}
		m.Header.Set(batchCommitHeader, "1")
		resp, err := p.nc.RequestMsgWithContext(ctx, m)
		if errors.Is(err, nats.ErrNoResponders) {
			return jetstream.ErrNoStreamResponse
		}
		if err != nil {
			return err
		}
		return p.committed(resp.Data, id, len(batch))
	}
	return nil
}

// committed reads the server's answer to the commit of batch id of n
// results.
func (p *resultPublisher) committed(data []byte, id string, n int) error {
	var ack struct {
		Error *jetstream.APIError `json:"error"`
		Batch string              `json:"batch"`
		Count int                 `json:"count"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("%w: its acknowledgement does not decode: %v", errBatchRefused, err)
	}
	switch {
	case ack.Error != nil:
		switch ack.Error.ErrorCode {
		case errCodeBatchDisabled:
			p.goPlain(ack.Error.Error())
		case errCodeBatchTooLarge:
			p.mu.Lock()
			p.maxMsgs = max(2, min(p.maxMsgs, n)/2)
			p.mu.Unlock()
		}
		p.log.Debug("batch of results refused; publishing them one by one", slog.Int("results", n), slog.Any("error", ack.Error))
		return fmt.Errorf("%w: %w", errBatchRefused, ack.Error)
	case ack.Batch != id || ack.Count != n:
		// A server older than 2.12 takes the batch's messages as plain
		// ones and answers the last alone: those before it may or may not
		// be stored.
		p.goPlain(fmt.Sprintf("the server acknowledged a batch of %d as %q of %d (a server older than 2.12?)", n, ack.Batch, ack.Count))
		return fmt.Errorf("%w: not committed as a batch", errBatchRefused)
	}
	return nil
}

// goPlain publishes results one by one for plainFor.
func (p *resultPublisher) goPlain(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plainUntil.IsZero() || time.Now().After(p.plainUntil) {
		p.log.Warn("the results stream takes no batches; publishing results one by one for a while", slog.String("why", why), slog.Duration("for", plainFor))
	}
	p.plainUntil = time.Now().Add(plainFor)
}

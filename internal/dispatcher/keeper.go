package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// The tool queue is a work queue: a call is deleted from the store when
// its worker acknowledges it. When that empties the store's last block
// (a chain's queue empties at every step), the file store deletes the
// block's file and creates a new one, which on a slow file system is most
// of a chain step's CPU. Each dispatcher therefore keeps a message of its
// own in the queue (bus.KeeperSubject, which no worker takes): published
// again after every keepEvery bytes of calls (or keepRefresh), so that one
// sits in the block being written, the one before deleted once the new
// one is stored, so that it pins no older block; and living keepTTL, so
// that the one of a dispatcher that died does not pin its block for long.
const (
	keepEvery   = 256 << 10
	keepRefresh = 20 * time.Second
	keepTTL     = time.Minute
)

// keeper counts what a dispatcher has put in the tool queue since its
// last keeper message.
type keeper struct {
	mu    sync.Mutex
	bytes int
	last  time.Time
}

// keep accounts for n bytes of calls just published and publishes a
// keeper message when one is due; once it is stored, the keeper messages
// before it (every dispatcher's) are purged. By subject, not by sequence:
// a server that crashed can come back with the queue's sequences rolled
// back, and the sequence of a keeper message stored before the crash be a
// call's after it. It does not wait for the acknowledgement: a keeper
// message lost costs a block's churn, nothing else.
func (d *Dispatcher) keep(n int) {
	k := &d.keeper
	k.mu.Lock()
	k.bytes += n
	now := time.Now()
	due := k.last.IsZero() || k.bytes >= keepEvery || now.Sub(k.last) >= keepRefresh
	if due {
		k.bytes, k.last = 0, now
	}
	k.mu.Unlock()
	if !due {
		return
	}
	f, err := d.conn.JS.PublishAsync(bus.KeeperSubject, nil, jetstream.WithMsgTTL(keepTTL))
	if err != nil {
		return
	}
	go func() {
		select {
		case <-f.Ok():
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			_ = d.tools.Purge(ctx, jetstream.WithPurgeSubject(bus.KeeperSubject), jetstream.WithPurgeKeep(1))
		case <-f.Err():
		}
	}()
}

package dispatcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
)

// A plan's state is stored under bus.StateKey, whole, or for a plan of
// many tools as a head and chunks (execution.StateWrite says how): a
// write then costs what the batch changed.

// stateWrite encodes what storing ent's state takes; its head reuses
// ent's buffer.
func (d *Dispatcher) stateWrite(ent *entry) *execution.StateWrite {
	st := ent.eng.State()
	w, err := st.Write(bus.StateKey(st.PlanID), nuid.Next(), ent.stateBuf)
	if err != nil {
		panic(fmt.Sprintf("dispatcher: encode plan state: %v", err)) // states only hold known tool states
	}
	ent.stateBuf = w.Head
	return w
}

// storeState stores w, the write of ent's state: its chunks, then its head
// by compare-and-set against ent.rev, or created if ent.rev is 0. It
// returns jetstream.ErrKeyRevisionMismatch or jetstream.ErrKeyExists when
// another write came first; then and on success it deletes the chunks
// nothing names any more.
func (d *Dispatcher) storeState(ctx context.Context, ent *entry, w *execution.StateWrite) error {
	if err := d.putChunks(ctx, w.Chunks); err != nil {
		return err
	}
	key := bus.StateKey(ent.eng.State().PlanID)
	var rev uint64
	var err error
	if ent.rev == 0 {
		rev, err = d.kv.Create(ctx, key, w.Head)
	} else {
		rev, err = d.kv.Update(ctx, key, w.Head, ent.rev)
	}
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		// Refused, so nothing names the chunks just put. After any other
		// error the head may have been stored: they stay.
		for _, c := range w.Chunks {
			d.deleteKey(c.Key)
		}
		return err
	}
	if err != nil {
		return err
	}
	ent.rev = rev
	ent.eng.State().Wrote(w)
	for _, k := range w.Superseded {
		d.deleteKey(k)
	}
	return nil
}

// putChunks puts a write's chunks, all at once, and waits until the
// server has them.
func (d *Dispatcher) putChunks(ctx context.Context, chunks []execution.KeyValue) error {
	futures := make([]jetstream.PubAckFuture, 0, len(chunks))
	for _, c := range chunks {
		f, err := d.conn.JS.PublishAsync(bus.KVSubject(bus.BucketPlans, c.Key), c.Value)
		if err != nil {
			return fmt.Errorf("put %s: %w", c.Key, err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("put %s: %w", chunks[i].Key, err)
		case <-ctx.Done():
			return fmt.Errorf("put %s: %w", chunks[i].Key, ctx.Err())
		}
	}
	return nil
}

// deleteKey deletes a chunk nothing names, without waiting: one left
// behind (the delete lost, the process gone) expires with the bucket's
// TTL, and no reader takes a chunk its head does not name.
func (d *Dispatcher) deleteKey(key string) {
	m := nats.NewMsg(bus.KVSubject(bus.BucketPlans, key))
	m.Header.Set("KV-Operation", "DEL")
	_, _ = d.conn.JS.PublishMsgAsync(m)
}

// readState reads a plan's stored state, with its chunks; errNoPlan if it
// has none. The read may come from a replica that is behind: a state
// older than the last, or none for a plan started a moment ago (see
// readStateSure).
func (d *Dispatcher) readState(ctx context.Context, planID string) (*execution.Stored, uint64, error) {
	return d.readStateWith(ctx, planID, bus.KVRead(d.kv))
}

// readStateSure is readState whose errNoPlan is the stream leader's word,
// not a replica's that may be behind: for answers that end something.
func (d *Dispatcher) readStateSure(ctx context.Context, planID string) (*execution.Stored, uint64, error) {
	return d.readStateWith(ctx, planID, bus.KVReadSure(d.conn.NC, d.kv))
}

func (d *Dispatcher) readStateWith(ctx context.Context, planID string, get execution.Getter) (*execution.Stored, uint64, error) {
	s, rev, err := execution.ReadStored(ctx, bus.StateKey(planID), get)
	if err == nil && s == nil {
		err = errNoPlan
	}
	return s, rev, err
}

package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// batchAck is a stream's answer to the commit of an atomic batch.
type batchAck struct {
	Error *jetstream.APIError `json:"error"`
	Seq   uint64              `json:"seq"`
	Batch string              `json:"batch"`
	Count int                 `json:"count"`
}

// publishBatch publishes one result on each subject as one atomic batch,
// as a worker does (docs/protocol.md, section 4): every message but the
// last without a reply subject, or with ackEach as a request, which the
// server answers with an empty message; the last commits the batch and is
// answered with the acknowledgement of all. It fails unless the stream
// committed all of them.
func publishBatch(ctx context.Context, nc *nats.Conn, ackEach bool, subjects ...string) (batchAck, error) {
	id := nuid.Next()
	for i, subject := range subjects {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{}`)
		m.Header.Set(jetstream.MsgIDHeader, id+"/"+strconv.Itoa(i))
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < len(subjects)-1 {
			if !ackEach {
				if err := nc.PublishMsg(m); err != nil {
					return batchAck{}, err
				}
				continue
			}
			resp, err := nc.RequestMsgWithContext(ctx, m)
			if err != nil {
				return batchAck{}, fmt.Errorf("message %d of the batch: %w", i+1, err)
			}
			if len(resp.Data) != 0 {
				return batchAck{}, fmt.Errorf("message %d of the batch answered %s, want an empty message", i+1, resp.Data)
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return batchAck{}, fmt.Errorf("commit: %w", err)
		}
		var ack batchAck
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return batchAck{}, fmt.Errorf("commit answered %s: %w", resp.Data, err)
		}
		switch {
		case ack.Error != nil:
			return ack, fmt.Errorf("commit refused: %w", ack.Error)
		case ack.Batch != id || ack.Count != len(subjects):
			return ack, fmt.Errorf("commit answered %s, want batch %s of %d", resp.Data, id, len(subjects))
		}
		return ack, nil
	}
	return batchAck{}, fmt.Errorf("no subjects")
}

// A results stream declared before atomic batches is updated in place: it
// takes batches afterwards, keeps what it held, and stores each result of a
// batch under its own plan's partition.
func TestDeclareLetsResultsComeInAtomicBatches(t *testing.T) {
	cfg := bustest.StartBare(t)
	cfg.Partitions = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := bustest.Dial(t, cfg)
	old := cfg.Streams()[2]
	if old.Name != bus.StreamResults || !old.AllowAtomicPublish {
		t.Fatalf("stream 2 is %s, atomic publish %v", old.Name, old.AllowAtomicPublish)
	}
	old.AllowAtomicPublish = false
	if _, err := c.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, bus.ResultSubject("before"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if ack, err := publishBatch(ctx, c.NC, false, bus.ResultSubject("a"), bus.ResultSubject("b")); err == nil || ack.Error == nil {
		t.Fatalf("a batch into the stream of before: %+v, %v; want it refused", ack, err)
	}
	if err := c.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if sc := s.CachedInfo().Config; !sc.AllowAtomicPublish || sc.SubjectTransform == nil {
		t.Fatalf("results stream after Declare: atomic publish %v, transform %+v", sc.AllowAtomicPublish, sc.SubjectTransform)
	}
	plans := []string{"p1", "p2", "p3", "p4", "p5"}
	var subjects []string
	for _, id := range plans {
		subjects = append(subjects, bus.ResultSubject(id))
	}
	ack, err := publishBatch(ctx, c.NC, false, subjects...)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(id string) string { return "planbus.results." + strconv.Itoa(bus.PartitionOf(id, 4)) + "." + id }
	for i, id := range plans {
		m, err := s.GetMsg(ctx, ack.Seq-uint64(len(plans)-1-i))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != stored(id) {
			t.Errorf("result %d of the batch stored as %s, want %s, plan %s's partition", i+1, m.Subject, stored(id), id)
		}
	}
	if m, err := s.GetMsg(ctx, 1); err != nil || m.Subject != stored("before") || ack.Seq != 1+uint64(len(plans)) {
		t.Errorf("the result stored before: %v, %v; the batch ends at %d", m, err, ack.Seq)
	}
}

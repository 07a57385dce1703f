package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// resultsOnServer publishes n results of plan p to the RESULTS stream of a
// real server and returns a dispatcher that reads them back, with their
// sequences.
func resultsOnServer(tb testing.TB, n int) (*Dispatcher, []uint64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := bustest.Dial(tb, bustest.Start(tb))
	st, err := conn.JS.Stream(ctx, bus.StreamResults)
	if err != nil {
		tb.Fatal(err)
	}
	seqs := make([]uint64, n)
	for i := range seqs {
		ack, err := conn.JS.Publish(ctx, bus.ResultSubject("p"),
			fmt.Appendf(nil, `{"planId":"p","requestId":"p","toolId":"t%d","attempt":1,"state":"succeeded","output":{"i":%d}}`, i, i))
		if err != nil {
			tb.Fatal(err)
		}
		seqs[i] = ack.Sequence
	}
	return &Dispatcher{results: st, log: zerolog.Nop()}, seqs
}

// storedResults reads every result it is given, and leaves out one the
// stream does not hold (expired).
func TestStoredResultsReadsThemAll(t *testing.T) {
	d, seqs := resultsOnServer(t, 100)
	got, err := d.storedResults(t.Context(), append(seqs, seqs[len(seqs)-1]+1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(seqs) {
		t.Fatalf("%d results read, want %d", len(got), len(seqs))
	}
	for i, seq := range seqs {
		if r := got[seq]; r == nil || r.ToolID != fmt.Sprintf("t%d", i) {
			t.Errorf("result %d: %+v, want tool t%d's", seq, r, i)
		}
	}
	if n := d.stats.ReadBack.Load(); n != int64(len(seqs)+1) {
		t.Errorf("read back %d, want %d", n, len(seqs)+1)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.storedResults(ctx, seqs); err == nil {
		t.Error("reading with a context that has ended: no error")
	}
}

// BenchmarkStoredResults5000 reads back 5,000 results, as a dispatcher
// rebuilding the engine of a plan of as many finished tools does: one at a
// time (as before), and resultReaders at once.
func BenchmarkStoredResults5000(b *testing.B) {
	d, seqs := resultsOnServer(b, 5000)
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			for _, seq := range seqs {
				if r, err := d.storedResult(b.Context(), seq); r == nil || err != nil {
					b.Fatal(seq, err)
				}
			}
		}
	})
	b.Run("at-once", func(b *testing.B) {
		for b.Loop() {
			if got, err := d.storedResults(b.Context(), seqs); len(got) != len(seqs) || err != nil {
				b.Fatal(len(got), err)
			}
		}
	})
}

// A publish its replicated stream answered "duplicate message id is in
// process" is published again until the stream says how it ended: stored
// now, or the duplicate of the one stored a moment ago; any other error
// is not retried.
func TestRepublishInProcess(t *testing.T) {
	conn := bustest.Dial(t, bustest.Start(t))
	d := &Dispatcher{conn: conn, log: zerolog.Nop()}
	inProcess := &jetstream.APIError{Code: 409, ErrorCode: errCodeInProcess, Description: "duplicate message id is in process"}
	m := nats.NewMsg(bus.ExecutionSubject("p-in-process"))
	m.Data = []byte(`{}`)
	m.Header.Set(jetstream.MsgIDHeader, "p-in-process")
	ack, err := d.republishInProcess(t.Context(), m, inProcess)
	if err != nil || ack.Duplicate {
		t.Fatalf("first: %+v %v, want it stored", ack, err)
	}
	ack, err = d.republishInProcess(t.Context(), m, inProcess)
	if err != nil || !ack.Duplicate {
		t.Fatalf("again: %+v %v, want the stored one's duplicate", ack, err)
	}
	other := &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "no suitable peers"}
	if _, err := d.republishInProcess(t.Context(), m, other); err != other {
		t.Errorf("another error: %v, want it returned as it is", err)
	}
}

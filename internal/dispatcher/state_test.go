package dispatcher_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
)

// A plan's state in chunks, written by dispatchers that contend for it,
// leaves in the plans bucket its plan, its head and the chunks the head
// names, all from the last write (an ended plan's chunks are all written
// again), and nothing else: chunks replaced, and chunks of writes that
// lost the compare-and-set, are deleted. Its status reads whole.
func TestChunkedStateLeavesOnlyWhatItsHeadNames(t *testing.T) {
	h := start(t, opts{dispatchers: 2, workers: 2, concurrency: 8, contend: true})
	var tools []string
	for i := range 11 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"t%d","skill":"probe","dependencies":["root"],"input":{"ms":%d}}`, i, i%3))
	}
	doc := `{"maxConcurrency":4,"tools":[{"toolId":"root","skill":"probe"},` + strings.Join(tools, ",") +
		`,{"toolId":"join","skill":"probe","dependencies":["t0","t5","t10"]}]}`
	ctx, cancel := context.WithTimeout(context.Background(), minute)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		res, _ := h.run(doc, minute)
		if !res.Success {
			t.Fatalf("round %d: %s %+v", round, res.State, res.Error)
		}
		head := bus.StateKey(res.PlanID)
		st, _, err := execution.ReadStored(ctx, head, bus.KVRead(kv))
		if err != nil {
			t.Fatal(err)
		}
		if st.ChunkTools != 2 || len(st.Chunks) != 7 || len(st.Tools) != 13 {
			t.Fatalf("round %d: state of %d tools in %d chunks of %d; want 13 in 7 of 2", round, len(st.Tools), len(st.Chunks), st.ChunkTools)
		}
		want := map[string]bool{bus.PlanKey(res.PlanID): true, head: true}
		for k, id := range st.Chunks {
			if id != st.Chunks[0] {
				t.Errorf("round %d: chunk %d is from write %s, chunk 0 from %s: an ended plan's chunks are written together", round, k, id, st.Chunks[0])
			}
			want[execution.ChunkKey(head, k, id)] = true
		}
		keysSettle(t, ctx, kv, res.PlanID, want)

		status, err := h.client().Status(ctx, res.PlanID)
		if err != nil {
			t.Fatal(err)
		}
		if status.Plan == nil || len(status.Plan.Tools) != 13 {
			t.Fatalf("round %d: status %+v, want the plan's 13 tools", round, status.Plan)
		}
		for _, ts := range status.Plan.Tools {
			if ts.State != "succeeded" {
				t.Errorf("round %d: status says %s is %s", round, ts.ToolID, ts.State)
			}
		}
	}
}

// keysSettle waits until the plans bucket holds exactly want of plan id's
// keys: deletes of chunks nothing names are published without waiting.
func keysSettle(t *testing.T, ctx context.Context, kv jetstream.KeyValue, id string, want map[string]bool) {
	t.Helper()
	w, err := kv.Watch(ctx, id+".>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	live := map[string]bool{}
	settled := false // the watch has delivered what the bucket held when it began
	deadline := time.After(10 * time.Second)
	for {
		if settled && maps.Equal(live, want) {
			return
		}
		select {
		case e := <-w.Updates():
			if e == nil {
				settled = true
				continue
			}
			live[e.Key()] = e.Operation() == jetstream.KeyValuePut
			if !live[e.Key()] {
				delete(live, e.Key())
			}
		case <-deadline:
			t.Fatalf("plan %s: the bucket holds %v, want %v", id, slices.Sorted(maps.Keys(live)), slices.Sorted(maps.Keys(want)))
		}
	}
}

// BenchmarkReloadState50k reads a 50,000-tool plan's state, a head and 49
// chunks, from the plans bucket of a real server, as a dispatcher does when
// it rebuilds the plan's engine (after a restart, another dispatcher's
// write, or an eviction from its cache).
func BenchmarkReloadState50k(b *testing.B) {
	ctx := context.Background()
	conn := bustest.Dial(b, bustest.Start(b))
	if err := conn.Declare(ctx); err != nil {
		b.Fatal(err)
	}
	kv, err := conn.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		b.Fatal(err)
	}
	tools := make([]string, 50_000)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"toolId":"t%d","skill":"s"}`, i)
	}
	p, err := plan.Decode([]byte(`{"planId":"p","requestId":"r","parallel":true,"maxConcurrency":64,"tools":[` + strings.Join(tools, ",") + `]}`))
	if err != nil {
		b.Fatal(err)
	}
	eng, _ := execution.Start(p, time.Now(), 64, nil)
	eng.State().ChunkBy(0)
	w, err := eng.State().Write(bus.StateKey("p"), "a", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range append(w.Chunks, execution.KeyValue{Key: bus.StateKey("p"), Value: w.Head}) {
		if _, err := kv.Put(ctx, c.Key, c.Value); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s, _, err := execution.ReadStored(ctx, bus.StateKey("p"), bus.KVRead(kv))
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Tools) != len(tools) || len(s.Chunks) != 49 {
			b.Fatalf("read %d tools in %d chunks, want %d in 49", len(s.Tools), len(s.Chunks), len(tools))
		}
	}
}

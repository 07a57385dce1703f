package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/worker"
)

// BenchmarkResultPublish stores results in PLANBUS_RESULTS on an embedded
// server synced always (the default durability), from a number of
// publishers at once, each publish waiting for its acknowledgement as a
// worker's call does: each result on its own ("plain", as workers did
// before the batching publisher), through the worker's batching publisher
// ("batched"), and through it with one result on its own at a time and
// any two or more queued in a batch ("eager", batches at any size). An op
// is one result; reported are results/s, the median number of results in
// a batch and the share of results that went in one. Run it with a fixed
// count, on a quiet machine:
//
//	go test ./worker -run '^$' -bench ResultPublish -benchtime 2000x -count 5
func BenchmarkResultPublish(b *testing.B) {
	for _, publishers := range []int{4, 16, 32, 64} {
		for _, mode := range []struct {
			name               string
			plainMax, minBatch int // 0: the worker's
		}{{"plain", 0, 0}, {"batched", 0, 0}, {"eager", 1, 2}} {
			b.Run(fmt.Sprintf("publishers=%d/%s", publishers, mode.name), func(b *testing.B) {
				benchResults(b, publishers, mode.name != "plain", mode.plainMax, mode.minBatch)
			})
		}
	}
}

// BenchmarkResultBatchCost publishes results one batch after another, k
// results a batch (k=1: each on its own, plainly), on an embedded server
// synced always: what a batch costs the server beside a plain publish. An
// op is one result; ms/publish is the time of one batch.
//
//	go test ./worker -run '^$' -bench ResultBatchCost -benchtime 1024x -count 3
func BenchmarkResultBatchCost(b *testing.B) {
	for _, k := range []int{1, 2, 4, 8, 16, 32, 64} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			cfg := bustest.Start(b)
			nc := bustest.Dial(b, cfg).NC
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := worker.NewResultPublisher(ctx, nc, 0, 0, worker.PublisherHooks{})
			if err != nil {
				b.Fatal(err)
			}
			publishes := 0
			b.ResetTimer()
			for i := 0; i < b.N; i += k {
				var msgs []*nats.Msg
				for j := i; j < min(i+k, b.N); j++ {
					m := &nats.Msg{Subject: bus.ResultSubject(fmt.Sprintf("plan-%d", j%50)), Data: resultData, Header: nats.Header{}}
					m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s/%d", b.Name(), j))
					msgs = append(msgs, m)
				}
				if len(msgs) == 1 {
					_, err = js.PublishMsg(ctx, msgs[0])
				} else {
					err = p.Commit(ctx, msgs)
				}
				if err != nil {
					b.Fatal(err)
				}
				publishes++
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(publishes), "ms/publish")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
		})
	}
}

// resultData is about a no-op tool's result, 256 bytes
// (docs/benchmarks.md).
var resultData = []byte(`{"planId":"p","requestId":"r","toolId":"t","skill":"echo","attempt":1,"state":"succeeded","output":{"s":"` +
	strings.Repeat("x", 40) + `"},"workerId":"w","durationMs":0.1,"token":"` + strings.Repeat("t", 43) + `"}`)

func benchResults(b *testing.B, publishers int, batched bool, plainMax, minBatch int) {
	cfg := bustest.Start(b)
	nc := bustest.Dial(b, cfg).NC
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var batches []int
	inBatches := 0
	p, err := worker.NewResultPublisher(ctx, nc, plainMax, minBatch, worker.PublisherHooks{Sending: func(n int, batch bool) {
		if batch {
			mu.Lock()
			batches = append(batches, n)
			inBatches += n
			mu.Unlock()
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				m := &nats.Msg{Subject: bus.ResultSubject(fmt.Sprintf("plan-%d", i%50)), Data: resultData, Header: nats.Header{}}
				m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s/%d", b.Name(), i))
				tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
				var err error
				if batched {
					err = p.Publish(tctx, m)
				} else {
					_, err = js.PublishMsg(tctx, m)
				}
				tcancel()
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "results/s")
	if batched {
		mu.Lock()
		defer mu.Unlock()
		median := 0
		if len(batches) > 0 {
			slices.Sort(batches)
			median = batches[len(batches)/2]
		}
		b.ReportMetric(float64(median), "median-batch")
		b.ReportMetric(100*float64(inBatches)/float64(b.N), "%batched")
	}
}

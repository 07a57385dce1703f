package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

// BenchmarkReadPlanResults reads one plan's five results, as a dispatcher
// does for a plan delivered again (an ephemeral consumer filtered to the
// plan), from a results stream of 70,000 plans, the plan's results 14,000
// messages apart: filtered by the plan's literal subject (In) and by the
// wildcard one (Of). Past 64K subjects the server reads every message
// between two of the plan's for a wildcard filter.
//
//	go test ./internal/bus -run XXX -bench ReadPlanResults
func BenchmarkReadPlanResults(b *testing.B) {
	cfg := bustest.Start(b)
	c := bustest.Dial(b, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const plans, gap = 70_000, 14_000
	target := "target-plan"
	var acks []jetstream.PubAckFuture
	wait := func() {
		for _, a := range acks {
			select {
			case <-a.Ok():
			case err := <-a.Err():
				b.Fatal(err)
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
		acks = acks[:0]
	}
	for i := range plans {
		subject := bus.ResultSubject(fmt.Sprintf("plan-%d", i))
		if i%gap == 0 {
			subject = bus.ResultSubject(target)
		}
		a, err := c.JS.PublishAsync(subject, []byte(`{"toolId":"t","attempt":1}`))
		if err != nil {
			b.Fatal(err)
		}
		if acks = append(acks, a); len(acks) == 1000 {
			wait()
		}
	}
	wait()
	all := bus.Partitioned(bus.SubjectResultsAll)
	for _, f := range []struct{ name, filter string }{
		{"literal", all.In(target, cfg.Defaults().Partitions)},
		{"wildcard", all.Of(target)},
	} {
		b.Run(f.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				name := fmt.Sprintf("read-%s-%d", f.name, i)
				cons, err := c.JS.CreateConsumer(ctx, bus.StreamResults, jetstream.ConsumerConfig{Name: name, FilterSubject: f.filter,
					DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true})
				if err != nil {
					b.Fatal(err)
				}
				n := cons.CachedInfo().NumPending
				if n != plans/gap {
					b.Fatalf("%s: %d results pending, want %d", f.filter, n, plans/gap)
				}
				for range n {
					if _, err := cons.Next(jetstream.FetchContext(ctx)); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.JS.DeleteConsumer(ctx, bus.StreamResults, name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// limitedJS is a JetStream context on conn's connection whose async
// publishes may have at most maxPending awaiting their acknowledgement.
func limitedJS(t *testing.T, conn *bus.Conn, maxPending int) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(conn.NC, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// The submitter publishes more messages than nats.go lets wait for their
// acknowledgement, on a server that flushes each to disk (sync always,
// bustest's default): every one is stored, whether its own window or
// nats.go's limit is the smaller, and however short nats.go waits before
// it reports a stall.
func TestSubmitterPastTheAsyncLimit(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name               string
		maxPending, window int
		stallWait          time.Duration
	}{
		{"window below the limit", 64, 16, 0},
		{"limit below the window, stalls reported at once", 8, submitWindow, time.Microsecond},
		{"limit below the window, nats.go's stall wait", 8, submitWindow, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := bustest.Dial(t, bustest.Start(t))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sub := &submitter{js: limitedJS(t, conn, tc.maxPending), window: tc.window, stallWait: tc.stallWait}
			for i := range n {
				id := "p" + strconv.Itoa(i)
				if err := sub.publish(ctx, bus.PlanSubject(id), []byte(`{}`), id); err != nil {
					t.Fatalf("publish %d of %d: %v", i+1, n, err)
				}
				if len(sub.inflight) > tc.window {
					t.Fatalf("%d publishes awaiting their acknowledgement, want at most %d", len(sub.inflight), tc.window)
				}
			}
			if err := sub.wait(ctx); err != nil {
				t.Fatal(err)
			}
			plans, err := conn.JS.Stream(ctx, bus.StreamPlans)
			if err != nil {
				t.Fatal(err)
			}
			info, err := plans.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != n {
				t.Errorf("%d plans stored, want %d", info.State.Msgs, n)
			}
		})
	}
}

// A run of more plans than nats.go's async limit, through the whole
// system on a server with sync always, submits every plan and gets every
// result.
func TestSystemRunPastTheAsyncLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: bustest.Start(t), Workers: 1,
		Worker: worker.Config{Skills: []skill.Skill{skills.Echo()}, DrainTimeout: time.Second}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn := bustest.Dial(t, n.Bus)
	conn.JS = limitedJS(t, conn, 8)
	if err := Settle(ctx, conn.NC, 1, n.Bus.Defaults().Partitions); err != nil {
		t.Fatal(err)
	}
	sys, err := NewSystem(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	sys.stallWait = time.Microsecond
	w, err := Generate("many-plans-100")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(ctx, w, "planbus", sys.Run, Options{Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Latencies) != w.Instances {
		t.Errorf("%d plans finished, want %d", len(r.Latencies), w.Instances)
	}
	if len(sys.waiting) != 0 {
		t.Errorf("%d plans still awaited after the run", len(sys.waiting))
	}
}

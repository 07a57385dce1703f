package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/skill"
)

func TestEndedPlansStaysWithinItsBounds(t *testing.T) {
	const max = 100
	e := newEndedPlans(time.Minute, max)
	t0 := time.Now()
	for i := range 10 * max {
		e.add(fmt.Sprintf("p%d", i), "d", t0)
	}
	if e.len() != max || len(e.entries) != max {
		t.Fatalf("%d entries in the list, %d in the map after %d cancels, want %d", e.len(), len(e.entries), 10*max, max)
	}
	if e.ended("p0", "d", t0) || !e.ended(fmt.Sprintf("p%d", 10*max-1), "d", t0) {
		t.Errorf("the oldest cancel is remembered or the newest forgotten")
	}
	later := t0.Add(time.Minute + time.Millisecond)
	e.add("fresh", "d", later)
	if e.len() != 1 || !e.ended("fresh", "d", later) {
		t.Errorf("%d entries after the others expired, want only the fresh one", e.len())
	}
}

func TestEndedPlansActOnlyOnMatchingDigests(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		adds  []string // digests of cancels of plan p, in order
		check string   // the digest of a later call of p
		want  bool
	}{
		{"real cancel", []string{"real"}, "real", true},
		{"forged cancel", []string{"forged"}, "real", false},
		{"a call without a digest", []string{""}, "", false},
		{"forged after real", []string{"real", "forged"}, "real", true},
		{"real after forged", []string{"forged", "real"}, "real", true},
		{"real twice", []string{"real", "real"}, "real", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndedPlans(time.Minute, 10)
			for _, d := range tt.adds {
				e.add("p", d, now)
			}
			if got := e.ended("p", tt.check, now); got != tt.want {
				t.Errorf("call with digest %q dropped: %v, want %v", tt.check, got, tt.want)
			}
			if e.ended("other", tt.check, now) {
				t.Errorf("a call of another plan dropped")
			}
		})
	}
}

// benchWorker is a worker that is never run: enough to drive its cancel
// bookkeeping directly, with calls of unrelated plans in flight.
func benchWorker(b *testing.B, nc *nats.Conn, running int) *Worker {
	w, err := New(nc, Config{Skills: []skill.Skill{skills.Echo()}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range running {
		_, cancel := context.WithCancelCause(context.Background())
		planID := fmt.Sprintf("running-%d", i)
		if !w.track(&call{planID: planID, digest: token.Digest(fmt.Sprint(i)), cancel: cancel}) {
			b.Fatal("a fresh call was not tracked")
		}
	}
	return w
}

func cancelMsg(b *testing.B, k *token.Key, planID string) *nats.Msg {
	data, err := json.Marshal(planbus.Cancel{PlanID: planID, Token: k.Cancel(planID)})
	if err != nil {
		b.Fatal(err)
	}
	return &nats.Msg{Subject: bus.CancelSubject(planID), Data: data}
}

// BenchmarkCancel measures one cancel after 1k and after 100k others
// within the memory's TTL: the cost per cancel must not grow with the
// count (it grew linearly when every cancel scanned what came before).
//
//	go test -run XXX -bench Cancel ./worker/
func BenchmarkCancel(b *testing.B) {
	k, _, err := token.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]*nats.Msg, 1<<14)
	for i := range msgs {
		msgs[i] = cancelMsg(b, k, fmt.Sprintf("measured-%d", i))
	}
	nc := bustest.Dial(b, bustest.Start(b)).NC
	for _, prior := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("prior=%d", prior), func(b *testing.B) {
			w := benchWorker(b, nc, 256)
			for i := range prior {
				w.onCancel(cancelMsg(b, k, fmt.Sprintf("prior-%d", i)))
			}
			i := 0
			for b.Loop() {
				w.onCancel(msgs[i%len(msgs)])
				i++
			}
			b.StopTimer()
			if n := w.ended.len(); n > cancelMemoryMax {
				b.Fatalf("%d cancels remembered, more than the cap %d", n, cancelMemoryMax)
			}
		})
	}
}

// FuzzOnCancel: whatever arrives on a plan's cancel subject, the worker
// does not panic, and it stops the plan's running call only if the
// message reveals the plan's cancel token.
func FuzzOnCancel(f *testing.F) {
	k, _, err := token.NewKey()
	if err != nil {
		f.Fatal(err)
	}
	real, err := json.Marshal(planbus.Cancel{PlanID: "p", Token: k.Cancel("p")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	f.Add([]byte(nil))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"planId":"p","cancelToken":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`))
	f.Add([]byte(`{"planId":"q","cancelToken":"` + k.Cancel("p") + `"}`))
	// The worker is never run: its connection is only to have one.
	nc := bustest.Dial(f, bustest.Start(f)).NC
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := New(nc, Config{Skills: []skill.Skill{skills.Echo()}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		w.track(&call{planID: "p", digest: token.Digest(k.Cancel("p")), cancel: cancel})
		w.onCancel(&nats.Msg{Subject: bus.CancelSubject("p"), Data: data})
		if ctx.Err() != nil && !bytes.Contains(data, []byte(k.Cancel("p"))) {
			t.Fatalf("%q stopped the call without its plan's cancel token", data)
		}
		if ctx.Err() == nil && bytes.Equal(data, real) {
			t.Fatalf("the real cancel did not stop the call")
		}
	})
}

package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
)

// TestPlanTooLargeToStoreIsRejected: a plan that fits in a message but
// not, with its defaults filled in, in the store would fail at every
// delivery; it is rejected at once, naming its size and the limit.
func TestPlanTooLargeToStoreIsRejected(t *testing.T) {
	h := start(t, opts{})
	// Just under the max payload as sent; over it once stored.
	pad := strings.Repeat("x", int(h.conn.NC.MaxPayload())-2500)
	res, _ := h.run(`{"tools":[{"toolId":"A","skill":"echo","input":{"pad":"`+pad+`"}}]}`, minute)
	if res.State != plan.PlanRejected || res.Error == nil || res.Error.Code != plan.CodeInvalidPlan ||
		!strings.Contains(res.Error.Message, "the store holds at most") {
		t.Fatalf("plan %s, error %+v; want rejected, naming the store's limit", res.State, res.Error)
	}
}

// TestUnhandleableTimerIsDroppedAtTheDeliveryLimit: a timer for a plan
// whose stored state cannot be read fails at every delivery. At the
// delivery limit it is dropped, counted in the dispatcher's stats, and
// not delivered again.
func TestUnhandleableTimerIsDroppedAtTheDeliveryLimit(t *testing.T) {
	h := start(t, opts{deliveryLimit: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, bus.StateKey("p-bad"), []byte("not a plan state")); err != nil {
		t.Fatal(err)
	}
	// The server announces every message a consumer's client terminates.
	terminated, err := h.conn.NC.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED." + bus.StreamTimers + "." + bus.ConsumerDispatcherTimers)
	if err != nil {
		t.Fatal(err)
	}
	timer, _ := json.Marshal(map[string]any{"planId": "p-bad", "kind": "timeout", "fireAt": time.Now().Add(-time.Second).UnixMilli()})
	if _, err := h.conn.JS.Publish(ctx, bus.TimerSubject("p-bad"), timer); err != nil {
		t.Fatal(err)
	}
	adv, err := terminated.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("the timer was not dropped within a minute: %v", err)
	}
	var term struct {
		Deliveries int `json:"deliveries"`
	}
	if err := json.Unmarshal(adv.Data, &term); err != nil || term.Deliveries != 3 {
		t.Errorf("terminated after %d deliveries (%v), want 3: the delivery limit", term.Deliveries, err)
	}
	if got := dispatcherStat(t, h, "messagesDropped"); got != 1 {
		t.Errorf("messagesDropped %d, want 1", got)
	}
	cons, err := h.conn.JS.Consumer(ctx, bus.StreamTimers, bus.ConsumerDispatcherTimers)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("timers consumer: %d pending acks, %d pending messages; want none left", info.NumAckPending, info.NumPending)
	}
	if got := info.Config.MaxDeliver; got != bus.ConsumerMaxDeliver(3) {
		t.Errorf("timers consumer MaxDeliver %d, want %d", got, bus.ConsumerMaxDeliver(3))
	}
}

// dispatcherStat reads one counter from the dispatcher's micro stats, as
// `nats micro stats planbus-dispatcher` shows them.
func dispatcherStat(t *testing.T, h *harness, name string) int64 {
	t.Helper()
	m, err := h.conn.NC.Request("$SRV.STATS."+bus.ServiceDispatcher, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Endpoints []struct {
			Data map[string]int64 `json:"data"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(m.Data, &stats); err != nil || len(stats.Endpoints) == 0 {
		t.Fatalf("stats %s: %v", m.Data, err)
	}
	v, ok := stats.Endpoints[0].Data[name]
	if !ok {
		t.Fatalf("no %s in stats %s", name, fmt.Sprint(stats.Endpoints[0].Data))
	}
	return v
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus/internal/bus"
)

// statsWait bounds how long a gathering of micro service answers waits
// for the instances it expects.
const statsWait = 5 * time.Second

// Instances asks every instance of the micro service name for its stats
// ($SRV.STATS.<name>) and returns each instance's answer by its id. It
// waits for want answers (at most statsWait), or, with want 0, for those
// that come within half a second.
func Instances(ctx context.Context, nc *nats.Conn, name string, want int) (map[string]json.RawMessage, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("bench: stats of %s: %w", name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.STATS."+name, inbox, nil); err != nil {
		return nil, fmt.Errorf("bench: stats of %s: %w", name, err)
	}
	wait := statsWait
	if want == 0 {
		wait = 500 * time.Millisecond
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	out := map[string]json.RawMessage{}
	for want == 0 || len(out) < want {
		select {
		case m := <-ch:
			var st struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(m.Data, &st) == nil && st.ID != "" {
				out[st.ID] = m.Data
			}
		case <-t.C:
			if want == 0 {
				return out, nil
			}
			return nil, fmt.Errorf("bench: stats of %s: %d of %d instances answered within %s", name, len(out), want, wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// dispatcherStats reads every counter of the want dispatchers, by id.
func dispatcherStats(ctx context.Context, nc *nats.Conn, want int) (map[string]map[string]int64, error) {
	all, err := Instances(ctx, nc, bus.ServiceDispatcher, want)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int64{}
	for id, b := range all {
		var st struct {
			Endpoints []struct {
				Data map[string]int64 `json:"data"`
			} `json:"endpoints"`
		}
		if err := json.Unmarshal(b, &st); err != nil || len(st.Endpoints) == 0 {
			return nil, fmt.Errorf("bench: stats of dispatcher %s: no endpoint data (%v)", id, err)
		}
		out[id] = st.Endpoints[0].Data
	}
	return out, nil
}

// Conflicts returns a Counter of the state compare-and-set conflicts of
// the dispatchers: the sum of casConflicts in the stats of the want
// instances of planbus-dispatcher (nats micro stats shows the same).
func Conflicts(nc *nats.Conn, want int) Counter {
	return func(ctx context.Context) (int64, error) {
		all, err := dispatcherStats(ctx, nc, want)
		if err != nil {
			return 0, err
		}
		var sum int64
		for id, data := range all {
			n, ok := data["casConflicts"]
			if !ok {
				return 0, fmt.Errorf("bench: stats of dispatcher %s: no casConflicts", id)
			}
			sum += n
		}
		return sum, nil
	}
}

// settleWait bounds how long Settle waits.
const settleWait = 30 * time.Second

// Settle waits until the want dispatchers have shared the partitions
// out: each sees all of them, and together they own every one of the
// partitions once. Before, two may consume one partition and contend
// for its plans' state, which measurements would count.
func Settle(ctx context.Context, nc *nats.Conn, want, partitions int) error {
	deadline := time.Now().Add(settleWait)
	tick := time.NewTicker(100 * time.Millisecond) // they share out once a second
	defer tick.Stop()
	for {
		all, err := dispatcherStats(ctx, nc, want)
		if err != nil {
			return err
		}
		var owned int64
		seen := true
		for _, data := range all {
			owned += data["partitionsOwned"]
			seen = seen && data["dispatchersSeen"] == int64(want)
		}
		if seen && owned == int64(partitions) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d dispatchers did not share %d partitions out within %s (they own %d)", want, partitions, settleWait, owned)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

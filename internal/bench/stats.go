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

// Conflicts returns a Counter of the state compare-and-set conflicts of
// the dispatchers: the sum of casConflicts in the stats of the want
// instances of planbus-dispatcher (nats micro stats shows the same).
func Conflicts(nc *nats.Conn, want int) Counter {
	return func(ctx context.Context) (int64, error) {
		all, err := Instances(ctx, nc, bus.ServiceDispatcher, want)
		if err != nil {
			return 0, err
		}
		var sum int64
		for id, b := range all {
			var st struct {
				Endpoints []struct {
					Data map[string]int64 `json:"data"`
				} `json:"endpoints"`
			}
			if err := json.Unmarshal(b, &st); err != nil || len(st.Endpoints) == 0 {
				return 0, fmt.Errorf("bench: stats of dispatcher %s: no endpoint data (%v)", id, err)
			}
			n, ok := st.Endpoints[0].Data["casConflicts"]
			if !ok {
				return 0, fmt.Errorf("bench: stats of dispatcher %s: no casConflicts", id)
			}
			sum += n
		}
		return sum, nil
	}
}

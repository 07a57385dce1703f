package client

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus/internal/bus"
)

// pollInterval is how often await reads the stream again, for a message
// published while the connection was down.
const pollInterval = 2 * time.Second

// await waits for the message on subject, which stream keeps: it
// subscribes to the subject, then reads the stream's last message on it,
// which is there if it was published before the subscription, and reads
// it again every pollInterval, since a subscription misses what is
// published while the connection is down. It needs no consumer, only
// reads by subject, which the client role may do (a consumer's deliver
// subject is not checked against its creator's permissions, so clients
// may not create any). The channel receives the first message; stop ends
// the wait.
func await(ctx context.Context, conn *bus.Conn, stream, subject string) (<-chan []byte, func(), error) {
	out := make(chan []byte, 1)
	offer := func(data []byte) {
		select {
		case out <- data:
		default: // one is enough: the first is the answer
		}
	}
	sub, err := conn.NC.Subscribe(subject, func(m *nats.Msg) { offer(m.Data) })
	if err != nil {
		return nil, nil, fmt.Errorf("client: follow %s: %w", subject, err)
	}
	// The subscription must be in place at the server before the stream
	// is read, or a message published in between would be missed by both.
	if err := conn.NC.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, fmt.Errorf("client: follow %s: %w", subject, err)
	}
	st, err := conn.JS.Stream(ctx, stream)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, fmt.Errorf("client: follow %s: stream %s: %w", subject, stream, err)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(pollInterval)
		defer tick.Stop()
		for {
			// Not there yet, or not readable now (reconnecting, a leader
			// being elected): either way, look again at the next tick.
			if m, err := st.GetLastMsgForSubject(pctx, subject); err == nil {
				offer(m.Data)
				return
			}
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return out, func() { cancel(); <-done; _ = sub.Unsubscribe() }, nil
}

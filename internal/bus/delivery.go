package bus

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Delivery limits. No message is redelivered forever: the handler of a
// durable consumer that gets a message for the limit-th time and still
// cannot handle it takes the message's terminal path instead of handing it
// back (an outcome, a rejected execution result, or a logged and counted
// drop). The consumer's MaxDeliver (ConsumerMaxDeliver) sits above the
// limit, so a terminal path that fails for a while (the store is down) is
// tried again, and the server stops after that.
const (
	// DefaultDeliveryLimit is the handlers' limit unless a component's
	// config says otherwise.
	DefaultDeliveryLimit = 10
	// deliverySlack is how many deliveries above its handler's limit a
	// consumer allows for the terminal path.
	deliverySlack = 10
)

// ConsumerMaxDeliver is the MaxDeliver of a consumer whose handler gives a
// message its terminal path at delivery limit.
func ConsumerMaxDeliver(limit int) int { return limit + deliverySlack }

// Deliveries is how often m has been delivered, 1 on its first delivery
// (and when the metadata cannot be read).
func Deliveries(m jetstream.Msg) int {
	meta, err := m.Metadata()
	if err != nil || meta.NumDelivered == 0 {
		return 1
	}
	return int(meta.NumDelivered)
}

// RetryDelay is how long a handler waits before a message it could not
// handle comes back: 500 ms after the first delivery, doubling up to 30 s,
// so a store that is down for minutes does not use the limit up in
// seconds.
func RetryDelay(deliveries int) time.Duration {
	d := 500 * time.Millisecond
	for i := 1; i < deliveries && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

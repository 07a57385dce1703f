package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Shared is a durable pull consumer that every process of one kind
// (dispatchers, planners) shares: each message goes to one of them, is
// acknowledged explicitly, and is delivered at most DeliveryLimit times
// (with ConsumerMaxDeliver's slack for the terminal path).
type Shared struct {
	Stream, Durable, Filter string
	// Description is what `nats consumer info` shows.
	Description string
	// Deliver is where a new consumer starts; the zero value is all.
	Deliver       jetstream.DeliverPolicy
	AckWait       time.Duration
	DeliveryLimit int
	// MaxAckPending bounds the messages handed out and not yet
	// acknowledged.
	MaxAckPending int
	// Batch is how many messages a pull asks for.
	Batch int
}

// ConsumeShared creates or updates the consumer and hands its messages to
// handle (on the client's delivery goroutine) until the returned context
// is stopped. errs, if not nil, receives the consumer's errors
// (heartbeats missed, the server's warnings).
func (c *Conn) ConsumeShared(ctx context.Context, s Shared, handle func(jetstream.Msg), errs func(error)) (jetstream.ConsumeContext, error) {
	cons, err := c.JS.CreateOrUpdateConsumer(ctx, s.Stream, jetstream.ConsumerConfig{
		Durable: s.Durable, Description: s.Description, FilterSubject: s.Filter, DeliverPolicy: s.Deliver,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.AckWait,
		MaxDeliver: ConsumerMaxDeliver(s.DeliveryLimit), MaxAckPending: s.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", s.Durable, err)
	}
	opts := []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(s.Batch)}
	if errs != nil {
		opts = append(opts, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { errs(err) }))
	}
	cc, err := cons.Consume(handle, opts...)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", s.Durable, err)
	}
	return cc, nil
}

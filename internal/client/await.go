package client

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// await follows the last message on subject in stream, and every later
// one, through an ordered consumer: unlike a plain subscription it misses
// nothing while the connection is down or before it was made, since the
// stream keeps the message. stop ends it.
func await(ctx context.Context, conn *bus.Conn, stream, subject string) (<-chan []byte, func(), error) {
	cons, err := conn.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("client: follow %s: %w", subject, err)
	}
	out := make(chan []byte, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case out <- m.Data():
		default: // one is enough: the first is the answer
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("client: follow %s: %w", subject, err)
	}
	return out, cc.Stop, nil
}

package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// planbus.CodeDeliveryLimit is the code of a plan the dispatchers gave up on: its
// message was delivered DeliveryLimit times and could not be handled.

// handBack returns messages the dispatcher could not handle to JetStream,
// after a delay that grows with their deliveries (at least minDelay), and
// gives each its terminal path instead once it has been delivered
// DeliveryLimit times.
func (d *Dispatcher) handBack(log zerolog.Logger, items []item, minDelay time.Duration, cause error) {
	for _, it := range items {
		n := bus.Deliveries(it.msg)
		if n >= d.cfg.DeliveryLimit {
			d.giveUp(log, it, n, cause)
			continue
		}
		_ = it.msg.NakWithDelay(max(minDelay, bus.RetryDelay(n)))
	}
}

// giveUp is a message's terminal path. A plan that has not started ends
// rejected; one that has is carried on by its results and timers (its
// timeout ends it), so its message is dropped; a result or timer is
// dropped. Drops are logged and counted.
func (d *Dispatcher) giveUp(log zerolog.Logger, it item, deliveries int, cause error) {
	why := fmt.Sprintf("gave up after %d deliveries", deliveries)
	if it.kind != kindPlan {
		d.drop(log, it, why, cause)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// Only the leader's "no state" is taken as never started: a replica
	// just back from a partition may not have it yet.
	v, _, err := bus.KVReadSure(d.conn.NC, d.kv)(ctx, bus.StateKey(it.planID))
	switch {
	case err == nil && v != nil:
		d.drop(log, it, why+"; the plan is running and its results and timers carry it on", cause)
	case err == nil:
		d.rejectCode(ctx, log, it, planbus.CodeDeliveryLimit, fmt.Errorf("the dispatchers %s of plan %s: %w", why, it.planID, cause))
	default:
		// Whether it started cannot be told now: ask again later, until
		// the consumer's MaxDeliver.
		log.Error().Err(err).AnErr("cause", cause).Msg("cannot end a plan at its delivery limit; handing it back")
		_ = it.msg.NakWithDelay(bus.RetryDelay(deliveries))
	}
}

// drop terminates a message the dispatcher will not handle, logging and
// counting it.
func (d *Dispatcher) drop(log zerolog.Logger, it item, why string, cause error) {
	d.stats.Dropped.Add(1)
	d.metrics.Dropped()
	log.Error().Err(cause).Str("subject", it.msg.Subject()).Msg("dropping a message: " + why)
	_ = it.msg.TermWithReason(why)
}

// storeLimit is the most bytes one message or stored value may take: the
// server's max payload, and the limit planbus declared its buckets and
// streams with (bus.Config.MaxPayload), whichever is lower, less room for
// headers.
func (d *Dispatcher) storeLimit() int {
	limit := int64(d.conn.Config.Defaults().MaxPayload)
	if m := d.conn.NC.MaxPayload(); m > 0 && m < limit {
		limit = m
	}
	return int(limit) - 4096
}

package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// A plan's messages (its start, its tools' results, its timers) are stored
// in one partition of their streams (bus.Config.Partitions), and each
// partition goes to one dispatcher (assign) among those that answer a
// ping of their micro service.
// Every dispatcher pings once a second and takes up or gives up
// partitions as dispatchers come and go, so one dispatcher applies all of
// a plan's messages and dispatchers do not contend for its state. This is
// an optimisation only: while two dispatchers disagree on who is there,
// both may consume a partition (the state's compare-and-set keeps that
// correct) or neither (its messages wait a second in their stream). A
// dispatcher that dies leaves its unacknowledged messages to be
// redelivered after AckWait, as before.

// balanceEvery is how often a dispatcher asks who else dispatches.
const balanceEvery = time.Second

// Answers to the ping are awaited for at most pingWait, and no longer
// than pingQuiet after the last.
const (
	pingWait  = 250 * time.Millisecond
	pingQuiet = 50 * time.Millisecond
)

// source is a stream the dispatcher consumes.
type source struct {
	stream string
	// durable is the consumer shared by every dispatcher, of the messages
	// stored before the stream was partitioned; partition k's is
	// bus.PartitionConsumer(durable, k).
	durable string
	all     bus.Partitioned
	kind    kind
	maxAck  int
	// batch is how many messages a pull asks for. Plans ask for few: a
	// plan waits in the client's buffer while the dispatcher is behind
	// (intake.go), its ack wait running.
	batch int
}

var sources = []source{
	{bus.StreamPlans, bus.ConsumerDispatcherPlans, bus.SubjectPlansAll, kindPlan, 1000, 64},
	{bus.StreamResults, bus.ConsumerDispatcherResults, bus.SubjectResultsAll, kindResult, 20000, 512},
	{bus.StreamTimers, bus.ConsumerDispatcherTimers, bus.SubjectTimersAll, kindTimer, 200000, 512},
}

// partitions are the partitions a dispatcher consumes.
type partitions struct {
	n    int    // of the system
	self string // this dispatcher's id among the dispatchers
	mu   sync.Mutex
	// owned holds the consumption of each partition taken, a context per
	// source.
	owned map[int][]jetstream.ConsumeContext
	// shared consumes the messages from before partitions, with every
	// other dispatcher; draining, the partitions given up, which still
	// hand over the messages they had received.
	shared, draining []jetstream.ConsumeContext
	// seen is how many dispatchers answered the last ping.
	seen int
}

// Partitions returns the partitions this dispatcher consumes, in order.
func (d *Dispatcher) Partitions() []int {
	d.parts.mu.Lock()
	defer d.parts.mu.Unlock()
	out := make([]int, 0, len(d.parts.owned))
	for k := range d.parts.owned {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// consume creates or updates one dispatcher consumer and hands its
// messages to route until the returned context is stopped.
func (d *Dispatcher) consume(ctx context.Context, src source, durable, filter string) (jetstream.ConsumeContext, error) {
	return d.conn.ConsumeShared(ctx, bus.Shared{Stream: src.stream, Durable: durable, Filter: filter,
		Description: "planbus: dispatchers' (see docs/architecture.md, partitions)", AckWait: d.cfg.AckWait,
		DeliveryLimit: d.cfg.DeliveryLimit, MaxAckPending: src.maxAck, Batch: src.batch},
		func(m jetstream.Msg) { d.route(src.kind, m) },
		func(err error) {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
				d.log.Debug().Err(err).Str("consumer", durable).Msg("consume")
			}
		})
}

// consumeShared starts the consumers every dispatcher shares, of the
// messages stored before partitions. It runs before any partition's: on a
// work queue (timers) their filters must not overlap, and an earlier
// version's consumer took every subject.
func (d *Dispatcher) consumeShared(ctx context.Context) error {
	for _, src := range sources {
		cc, err := d.consume(ctx, src, src.durable, src.all.Published())
		if err != nil {
			return fmt.Errorf("dispatcher: %w", err)
		}
		d.parts.mu.Lock()
		d.parts.shared = append(d.parts.shared, cc)
		d.parts.mu.Unlock()
	}
	return nil
}

// take starts consuming partition k of every source.
func (d *Dispatcher) take(ctx context.Context, k int) error {
	var ccs []jetstream.ConsumeContext
	for _, src := range sources {
		cc, err := d.consume(ctx, src, bus.PartitionConsumer(src.durable, k), src.all.Partition(k))
		if err != nil {
			for _, c := range ccs {
				c.Drain()
			}
			return fmt.Errorf("dispatcher: partition %d: %w", k, err)
		}
		ccs = append(ccs, cc)
	}
	d.parts.mu.Lock()
	d.parts.owned[k] = ccs
	d.parts.mu.Unlock()
	return nil
}

// give stops consuming partition k: no more messages are asked for, and
// those already received are handled.
func (d *Dispatcher) give(k int) {
	d.parts.mu.Lock()
	ccs := d.parts.owned[k]
	delete(d.parts.owned, k)
	d.parts.draining = append(d.parts.draining, ccs...)
	d.parts.mu.Unlock()
	for _, cc := range ccs {
		cc.Drain()
	}
}

// stopConsuming stops every consumer and waits until they are closed.
func (d *Dispatcher) stopConsuming() {
	d.parts.mu.Lock()
	all := append(slices.Clone(d.parts.shared), d.parts.draining...)
	for _, ccs := range d.parts.owned {
		all = append(all, ccs...)
	}
	d.parts.owned = map[int][]jetstream.ConsumeContext{}
	d.parts.shared, d.parts.draining = nil, nil
	d.parts.mu.Unlock()
	for _, cc := range all {
		cc.Stop()
		<-cc.Closed()
	}
}

// balance takes the partitions this dispatcher is to consume and gives up
// the others, by who answers a ping now. A partition that cannot be taken
// is tried again on the next round.
func (d *Dispatcher) balance(ctx context.Context) error {
	ids := d.dispatchers(ctx)
	d.parts.mu.Lock()
	d.parts.seen = len(ids)
	d.parts.mu.Unlock()
	owners := assign(ids, d.parts.n)
	var errs []error
	for k := range d.parts.n {
		mine := owners[k] == d.parts.self || d.cfg.EveryPartition
		d.parts.mu.Lock()
		_, held := d.parts.owned[k]
		d.parts.mu.Unlock()
		switch {
		case mine && !held:
			if err := d.take(ctx, k); err != nil {
				errs = append(errs, err)
			}
		case !mine && held:
			d.give(k)
		}
	}
	return errors.Join(errs...)
}

// runBalance balances every balanceEvery until ctx ends.
func (d *Dispatcher) runBalance(ctx context.Context) {
	t := time.NewTicker(balanceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.balance(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn().Err(err).Msg("cannot take up a partition; trying again in a second")
			}
		}
	}
}

// dispatchers returns the ids of the dispatchers that answer a ping of
// their micro service, this one's among them, sorted. A ping that fails
// gives this dispatcher alone: it then consumes every partition, which
// is correct if not economical.
func (d *Dispatcher) dispatchers(ctx context.Context) []string {
	ids := []string{d.parts.self}
	inbox := d.conn.NC.NewRespInbox()
	sub, err := d.conn.NC.SubscribeSync(inbox)
	if err != nil {
		return ids
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := d.conn.NC.PublishRequest("$SRV.PING."+bus.ServiceDispatcher, inbox, nil); err != nil {
		return ids
	}
	deadline := time.Now().Add(pingWait)
	for wait := pingWait; wait > 0; wait = min(pingQuiet, time.Until(deadline)) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			break
		}
		var pong struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m.Data, &pong) == nil && pong.ID != "" && !slices.Contains(ids, pong.ID) {
			ids = append(ids, pong.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// assign gives each of n partitions to one of ids: in partition order,
// each to the dispatcher of highest random weight for it (rendezvous
// hashing) that does not yet hold its share, n/len(ids) partitions, or
// one more for the first n%len(ids) to reach it. Every dispatcher that
// sees the same ids computes the same assignment; a dispatcher that comes
// or goes moves few partitions besides its own.
func assign(ids []string, n int) []string {
	owners := make([]string, n)
	if len(ids) == 0 {
		return owners
	}
	share, extra := n/len(ids), n%len(ids)
	held := map[string]int{}
	for k := range owners {
		ranked := slices.Clone(ids)
		slices.SortFunc(ranked, func(a, b string) int {
			wa, wb := weight(a, k), weight(b, k)
			switch {
			case wa > wb:
				return -1
			case wa < wb:
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, id := range ranked {
			h := held[id]
			if h < share || (h == share && extra > 0) {
				if h == share {
					extra--
				}
				owners[k], held[id] = id, h+1
				break
			}
		}
	}
	return owners
}

// weight is dispatcher id's random weight for partition k.
func weight(id string, k int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write(strconv.AppendInt([]byte{'/'}, int64(k), 10))
	// FNV mixes the last bytes poorly; splitmix64's finalizer spreads them.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

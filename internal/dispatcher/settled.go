package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/wire"
)

// A call is delivered again when its worker's acknowledgement did not
// reach the store: the worker died, or the server did after storing the
// call's result and before taking the ack (a kill -9 of the server re-ran
// 4 of 811 completed calls on live workers). A worker asks, before it
// runs a call delivered again, whether its attempt already ended; any
// dispatcher answers from the plan's stored state and, for an attempt
// the state still shows running, from the plan's results in their stream
// (a result stored but not applied yet).

// settledTimeout bounds the work of one answer.
const settledTimeout = 10 * time.Second

// onSettled answers planbus.dispatcher.settled.
func (d *Dispatcher) onSettled(r micro.Request) {
	var q planbus.SettledQuery
	if err := json.Unmarshal(r.Data(), &q); err != nil || !wire.IsID(q.PlanID) || !wire.IsToolID(q.ToolID) || q.Attempt < 1 {
		_ = r.Error("400", "want {planId, toolId, attempt, token} of a call", nil)
		return
	}
	if !d.key.CheckResult(q.PlanID, q.ToolID, q.Attempt, q.Token) {
		_ = r.Error("403", "the token is not the call's", nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settledTimeout)
	defer cancel()
	// A read can fail for a moment (a cluster's stream leader moving
	// answers "no responders"): an answer not given lets the call run
	// again, so it is tried a few times.
	var settled bool
	var why string
	var err error
	for try := range 3 {
		if settled, why, err = d.settled(ctx, q); err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		_ = r.Error("503", err.Error(), nil)
		return
	}
	if settled {
		d.stats.SettledAnswered.Add(1)
	}
	_ = r.RespondJSON(planbus.SettledReply{Settled: settled, Why: why})
}

// settled tells whether attempt q.Attempt of the tool has ended: the
// stored state shows it ended or a later attempt, or the results stream
// holds a result of it with its token.
func (d *Dispatcher) settled(ctx context.Context, q planbus.SettledQuery) (bool, string, error) {
	// Its state is stored before any call is published, so a plan with
	// none has ended and expired; but only the leader can say it has
	// none: a replica just back from a partition may not have the state
	// of a plan started while it was away. An older state is harmless
	// here: attempts only move on and plans only end.
	stored, _, err := d.readStateSure(ctx, q.PlanID)
	if errors.Is(err, errNoPlan) {
		return true, "the plan has no state: it ended", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read plan state: %w", err)
	}
	if stored.Status != planbus.PlanRunning {
		return true, "the plan ended (" + string(stored.Status) + ")", nil
	}
	i, err := d.toolIndex(ctx, q.PlanID, q.ToolID)
	if err != nil {
		return false, "", err
	}
	if i < 0 || i >= len(stored.Tools) {
		return false, "", fmt.Errorf("plan %s has no tool %s", q.PlanID, q.ToolID)
	}
	t := stored.Tools[i]
	switch {
	case t.Attempt > q.Attempt:
		return true, fmt.Sprintf("the tool is at attempt %d", t.Attempt), nil
	case t.Attempt == q.Attempt && t.State != planbus.ToolRunning:
		return true, "the attempt ended (" + string(t.State) + ")", nil
	}
	found, err := d.resultStored(ctx, q)
	if err != nil {
		return false, "", err
	}
	if found {
		return true, "its result is stored", nil
	}
	return false, "no result of the attempt is stored", nil
}

// toolIndex is the position of a tool in the stored plan, or -1.
func (d *Dispatcher) toolIndex(ctx context.Context, planID, toolID string) (int, error) {
	// The state was found, so the plan is stored: on a replica that
	// has no plan, the leader is asked.
	doc, _, err := bus.KVReadSure(d.conn.NC, d.kv)(ctx, bus.PlanKey(planID))
	if err == nil && doc == nil {
		err = jetstream.ErrKeyNotFound
	}
	if err != nil {
		return -1, fmt.Errorf("read plan: %w", err)
	}
	var ids struct {
		Tools []struct {
			ToolID string `json:"toolId"`
		} `json:"tools"`
	}
	if err := wire.Lenient(doc, &ids); err != nil {
		return -1, fmt.Errorf("stored plan %s: %w", planID, err)
	}
	for i, t := range ids.Tools {
		if t.ToolID == toolID {
			return i, nil
		}
	}
	return -1, nil
}

// resultStored looks through the plan's results in their stream for one
// of the attempt, with its token.
func (d *Dispatcher) resultStored(ctx context.Context, q planbus.SettledQuery) (bool, error) {
	stored, err := d.storedAttempts(ctx, q.PlanID)
	return stored[attempt{q.ToolID, q.Attempt}], err
}

// attempt names one attempt of a tool.
type attempt struct {
	toolID string
	n      int
}

// maxReaders is how many storedAttempts may read at once: a server behind
// on its work redelivers many messages together, each of which reads its
// plan's results (withoutStored), and a soak past the node's rate reached
// the results stream's limit of 1,000 consumers.
const maxReaders = 64

// readerIdle is how long the server keeps a reader's consumer it was not
// told to delete.
const readerIdle = 10 * time.Second

// storedAttempts reads the plan's results in their stream: the attempts
// with a result carrying their token.
func (d *Dispatcher) storedAttempts(ctx context.Context, planID string) (map[attempt]bool, error) {
	if d.readers != nil {
		select {
		case d.readers <- struct{}{}:
			defer func() { <-d.readers }()
		case <-ctx.Done():
			return nil, fmt.Errorf("read results: waiting for one of %d readers: %w", maxReaders, ctx.Err())
		}
	}
	// An ephemeral consumer of the plan's subject, deleted once read (an
	// ordered consumer would make a new one at its first pull, which
	// the delete would miss). The subject is the literal one of the
	// plan's partition: with a wildcard (planbus.results.*.<planId>) the
	// server reads every message between two of the plan's once the
	// stream holds more than 64K subjects, and a node past its rate, whose
	// redeliveries each read their plan's results, slowed to a few plans
	// a second. Results stored before the number of partitions changed
	// are not found: their calls are published again (de-duplicated
	// within the duplicate window), at least once as ever.
	name := "settled-" + nuid.Next()
	cons, err := d.conn.JS.CreateConsumer(ctx, bus.StreamResults, jetstream.ConsumerConfig{
		Name:          name,
		FilterSubject: bus.Partitioned(bus.SubjectResultsAll).In(planID, d.conn.Config.Defaults().Partitions),
		DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, Replicas: 1,
		// Should the delete below not reach the server.
		InactiveThreshold: readerIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.conn.JS.DeleteConsumer(dctx, bus.StreamResults, name)
	}()
	info := cons.CachedInfo()
	stored := map[attempt]bool{}
	for left := info.NumPending; left > 0; left-- {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("read results (%d left): %w", left, err)
		}
		var id struct {
			ToolID  string `json:"toolId"`
			Attempt int    `json:"attempt"`
			Token   string `json:"token"`
		}
		if wire.Lenient(m.Data(), &id) == nil && d.key.CheckResult(planID, id.ToolID, id.Attempt, id.Token) {
			stored[attempt{id.ToolID, id.Attempt}] = true
		}
	}
	return stored, nil
}

// withoutStored drops from what a state implies (Engine.Outstanding) the
// calls whose result is already stored, not applied yet: that result is
// on its way to the dispatchers, and a call published again could run
// again on a worker that has no reason to ask first (a new message, if
// the server no longer remembers the first one's id). If the results
// cannot be read, every call is kept: a call may run twice, never none.
func (d *Dispatcher) withoutStored(ctx context.Context, log zerolog.Logger, eng *execution.Engine, redo *execution.Effects) {
	if len(redo.Releases) == 0 {
		return
	}
	planID := eng.Plan().PlanID
	stored, err := d.storedAttempts(ctx, planID)
	if err != nil {
		log.Warn().Err(err).Msg("cannot read the plan's stored results; publishing again every call its state shows running")
		return
	}
	redo.Releases = slices.DeleteFunc(redo.Releases, func(r execution.Release) bool {
		return stored[attempt{eng.Plan().Tools[r.Index].ToolID, r.Attempt}]
	})
}

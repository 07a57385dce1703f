package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
)

// The bus floor's streams and bucket: beside planbus's own, with their
// settings (bus.Config.Streams), on subjects of their own; deleted after
// the measurement.
const (
	floorResults = "PLANBUS_BENCH_FLOOR_RESULTS"
	floorCalls   = "PLANBUS_BENCH_FLOOR_CALLS"
	floorEvents  = "PLANBUS_BENCH_FLOOR_EVENTS"
	floorBucket  = "planbus-bench-floor"
	floorPrefix  = "planbus-bench-floor."
)

// Sizes of the bus floor's messages, near planbus's own for a no-op tool:
// a tool call and a tool result (JSON with ids, token, input and output),
// and a chain-100's plan state in KV.
const (
	floorCallBytes   = 320
	floorResultBytes = 256
	floorStateBytes  = 512
	floorEventBytes  = 300
	// A 5-tool plan as submitted and as stored with its defaults, its
	// timeout timer and its execution result.
	floorPlanBytes       = 600
	floorStoredPlanBytes = 1000
	floorTimerBytes      = 150
	floorExecutionBytes  = 1500
)

// BusConfig says how the bus floor is measured.
type BusConfig struct {
	// Dispatcher and Worker are two connections to the server, as a
	// dispatcher and a worker have: the pattern's messages cross from one
	// to the other.
	Dispatcher, Worker *bus.Conn
	// Samples of each trip after Samples/10 to warm up. Default 1000.
	Samples int
	// Steps of each bus-only chain round. Default 100 (chain-100).
	Steps int
	// Calls of each bus-only fan-out round. Default 1000 (fanout-1000).
	Calls int
	// Plans of each bus-only plans round. Default 1000
	// (many-plans-1000).
	Plans int
	// Rounds of each pattern after one to warm up; the median is kept.
	// Default 5.
	Rounds int
	// CPU is the clock of the system's CPU time; nil leaves CPU out.
	CPU CPUClock
}

func (c BusConfig) withDefaults() BusConfig {
	if c.Samples <= 0 {
		c.Samples = 1000
	}
	if c.Steps <= 0 {
		c.Steps = 100
	}
	if c.Calls <= 0 {
		c.Calls = 1000
	}
	if c.Plans <= 0 {
		c.Plans = 1000
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
	return c
}

// BusFloor is what the bus itself costs, measured on the server the
// workloads run on, with its sync setting: three server trips a chain
// step needs, and the message patterns of a chain step and of a fan-out
// done by a program with no planbus code.
type BusFloor struct {
	// Publish is a JetStream publish awaiting its acknowledgement, to a
	// stream like RESULTS; p50 and p99 of the samples.
	Publish [2]time.Duration
	// CAS is a KV update with the expected revision (compare-and-set).
	CAS [2]time.Duration
	// Delivery is a publish to a work-queue stream until the message
	// reaches a consumer that holds an open pull request.
	Delivery [2]time.Duration
	// Step is the median time per step of the bus-only chain (Steps
	// steps a round): result delivered to the dispatcher's consumer, KV
	// compare-and-set of the state, next call published to the work
	// queue and pulled by the worker, which publishes its result.
	Step time.Duration
	// StepCPU is the system's CPU time per bus-only chain step (0 if not
	// measured).
	StepCPU time.Duration
	// ToolsPerSec is the median throughput of the bus-only fan-out: Calls
	// calls published at once to the work queue, pulled by the worker,
	// each answered with a result, the results consumed and folded into
	// the state with one compare-and-set per batch received.
	ToolsPerSec float64
	// ToolCPU is the system's CPU time per bus-only fan-out call (0 if not
	// measured).
	ToolCPU time.Duration
	// EventsToolsPerSec and EventsToolCPU are the same fan-out with the
	// progress events planbus publishes for each call, on core NATS into
	// a memory stream like EVENTS: released (by the dispatcher, with the
	// call), started (by the worker) and succeeded (by the dispatcher,
	// with the result). They are planbus's full message set a tool.
	EventsToolsPerSec float64
	EventsToolCPU     time.Duration
	// PlansPerSec is the median throughput of the bus-only plans: Plans
	// 5-tool diamonds submitted at once, each with every message planbus
	// stores and sends for such a plan (plans, below). PlanCPU is the
	// system's CPU time per plan (0 if not measured).
	PlansPerSec float64
	PlanCPU     time.Duration
	Steps       int // a chain round's steps
	Calls       int // a fan-out round's calls
	Plans       int // a plans round's plans
}

// ThreeTrips is the sum of the p50s of the three trips on a chain step's
// critical path: result published (and delivered), state compare-and-set,
// next call delivered.
func (f *BusFloor) ThreeTrips() time.Duration {
	return f.Publish[0] + f.CAS[0] + f.Delivery[0]
}

// floorBus holds the streams, consumers and bucket of one measurement.
type floorBus struct {
	cfg     BusConfig
	d, w    jetstream.JetStream
	kv      jetstream.KeyValue
	results jetstream.Stream
	calls   jetstream.Stream
}

// MeasureBus measures the bus floor on the server cfg's connections reach.
// It declares the floor's streams and bucket with planbus's settings
// (file storage, the connection's replicas, direct gets, duplicate window,
// each message with a Nats-Msg-Id as planbus sends them) and deletes them
// before it returns.
func MeasureBus(ctx context.Context, cfg BusConfig) (*BusFloor, error) {
	cfg = cfg.withDefaults()
	if cfg.Dispatcher == nil || cfg.Worker == nil {
		return nil, errors.New("bench: bus floor: BusConfig.Dispatcher and BusConfig.Worker are required")
	}
	fb := &floorBus{cfg: cfg, d: cfg.Dispatcher.JS, w: cfg.Worker.JS}
	if err := fb.declare(ctx); err != nil {
		return nil, err
	}
	defer fb.remove()
	out := &BusFloor{Steps: cfg.Steps, Calls: cfg.Calls, Plans: cfg.Plans}
	var err error
	if out.Publish, err = fb.publishTrip(ctx); err != nil {
		return nil, err
	}
	if out.CAS, err = fb.casTrip(ctx); err != nil {
		return nil, err
	}
	if out.Delivery, err = fb.deliveryTrip(ctx); err != nil {
		return nil, err
	}
	if out.Step, out.StepCPU, err = fb.rounds(ctx, cfg.Steps, fb.chain); err != nil {
		return nil, err
	}
	span, cpu, err := fb.rounds(ctx, cfg.Calls, func(ctx context.Context, round string, n int) (time.Duration, time.Duration, error) {
		return fb.fanout(ctx, round, n, false)
	})
	if err != nil {
		return nil, err
	}
	out.ToolsPerSec, out.ToolCPU = 1/span.Seconds(), cpu
	span, cpu, err = fb.rounds(ctx, cfg.Calls, func(ctx context.Context, round string, n int) (time.Duration, time.Duration, error) {
		return fb.fanout(ctx, "e"+round, n, true)
	})
	if err != nil {
		return nil, err
	}
	out.EventsToolsPerSec, out.EventsToolCPU = 1/span.Seconds(), cpu
	if span, cpu, err = fb.rounds(ctx, cfg.Plans, fb.plans); err != nil {
		return nil, err
	}
	out.PlansPerSec, out.PlanCPU = 1/span.Seconds(), cpu
	return out, nil
}

// declare creates the floor's streams and bucket as bus.Conn.Declare
// creates planbus's.
func (fb *floorBus) declare(ctx context.Context) error {
	bc := fb.cfg.Dispatcher.Config.Defaults()
	sc := func(name, subjects string, ret jetstream.RetentionPolicy) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: name, Description: "planbus bench: the bus floor (deleted after it)",
			Subjects: []string{floorPrefix + subjects + ".>"}, Retention: ret, MaxAge: bc.Retention,
			Duplicates: bc.DuplicateWindow, Storage: jetstream.FileStorage, Replicas: bc.Replicas,
			MaxMsgSize: bc.MaxPayload, AllowDirect: true}
	}
	var err error
	if fb.results, err = fb.d.CreateOrUpdateStream(ctx, sc(floorResults, "results", jetstream.LimitsPolicy)); err != nil {
		return fmt.Errorf("bench: bus floor: stream %s: %w", floorResults, err)
	}
	if fb.calls, err = fb.d.CreateOrUpdateStream(ctx, sc(floorCalls, "calls", jetstream.WorkQueuePolicy)); err != nil {
		return fmt.Errorf("bench: bus floor: stream %s: %w", floorCalls, err)
	}
	ev := sc(floorEvents, "events", jetstream.LimitsPolicy)
	ev.Storage, ev.MaxBytes, ev.Discard, ev.Duplicates = jetstream.MemoryStorage, 32<<20, jetstream.DiscardOld, 0
	if _, err = fb.d.CreateOrUpdateStream(ctx, ev); err != nil {
		return fmt.Errorf("bench: bus floor: stream %s: %w", floorEvents, err)
	}
	fb.kv, err = fb.d.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: floorBucket, History: 1, TTL: bc.Retention,
		Storage: jetstream.FileStorage, Replicas: bc.Replicas, MaxValueSize: bc.MaxPayload})
	if err != nil {
		return fmt.Errorf("bench: bus floor: bucket %s: %w", floorBucket, err)
	}
	return nil
}

// remove deletes what declare created.
func (fb *floorBus) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = fb.d.DeleteStream(ctx, floorResults)
	_ = fb.d.DeleteStream(ctx, floorCalls)
	_ = fb.d.DeleteStream(ctx, floorEvents)
	_ = fb.d.DeleteKeyValue(ctx, floorBucket)
}

// percentiles returns p50 and p99 of ds.
func percentiles(ds []time.Duration) [2]time.Duration {
	s := sorted(ds)
	return [2]time.Duration{s[(len(s)-1)*50/100], s[(len(s)-1)*99/100]}
}

// sample runs trip Samples/10 times to warm up, then Samples times, and
// returns the p50 and p99 of the measured ones.
func (fb *floorBus) sample(ctx context.Context, what string, trip func(i int) (time.Duration, error)) ([2]time.Duration, error) {
	n := fb.cfg.Samples
	warm := max(n/10, 1)
	ds := make([]time.Duration, 0, n)
	for i := range warm + n {
		if err := ctx.Err(); err != nil {
			return [2]time.Duration{}, err
		}
		d, err := trip(i)
		if err != nil {
			return [2]time.Duration{}, fmt.Errorf("bench: bus floor: %s: %w", what, err)
		}
		if i >= warm {
			ds = append(ds, d)
		}
	}
	return percentiles(ds), nil
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// publishTrip: a publish to a limits stream awaiting its acknowledgement.
func (fb *floorBus) publishTrip(ctx context.Context) ([2]time.Duration, error) {
	data := payload(floorResultBytes)
	return fb.sample(ctx, "publish", func(i int) (time.Duration, error) {
		start := time.Now()
		_, err := fb.w.Publish(ctx, floorPrefix+"results.trip", data, jetstream.WithMsgID("trip-"+strconv.Itoa(i)))
		return time.Since(start), err
	})
}

// casTrip: a KV update with the revision last written.
func (fb *floorBus) casTrip(ctx context.Context) ([2]time.Duration, error) {
	data := payload(floorStateBytes)
	rev, err := fb.kv.Create(ctx, "state.trip", data)
	if err != nil {
		return [2]time.Duration{}, fmt.Errorf("bench: bus floor: create the state entry: %w", err)
	}
	return fb.sample(ctx, "compare-and-set", func(int) (time.Duration, error) {
		start := time.Now()
		r, err := fb.kv.Update(ctx, "state.trip", data, rev)
		rev = r
		return time.Since(start), err
	})
}

// consumer makes a durable pull consumer on stream for subject, set up as
// planbus's (explicit acks).
func consumer(ctx context.Context, js jetstream.JetStream, stream, name, subject string) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, FilterSubject: subject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 100000, MaxWaiting: 4096})
	if err != nil {
		return nil, fmt.Errorf("bench: bus floor: consumer %s: %w", name, err)
	}
	return c, nil
}

// consume delivers every message of c to handle until the returned stop
// is called, keeping pull requests of up to batch messages open as
// planbus's dispatcher and workers do.
func consume(c jetstream.Consumer, batch int, handle func(jetstream.Msg)) (stop func(), err error) {
	cc, err := c.Consume(handle, jetstream.PullMaxMessages(batch))
	if err != nil {
		return nil, fmt.Errorf("bench: bus floor: consume: %w", err)
	}
	return func() { cc.Stop(); <-cc.Closed() }, nil
}

// deliveryTrip: a publish to the work queue until a consumer with an open
// pull request has the message.
func (fb *floorBus) deliveryTrip(ctx context.Context) ([2]time.Duration, error) {
	subject := floorPrefix + "calls.trip"
	c, err := consumer(ctx, fb.w, floorCalls, "trip", subject)
	if err != nil {
		return [2]time.Duration{}, err
	}
	got := make(chan time.Time, 1)
	stop, err := consume(c, 64, func(m jetstream.Msg) {
		now := time.Now()
		_ = m.Ack()
		got <- now
	})
	if err != nil {
		return [2]time.Duration{}, err
	}
	defer stop()
	data := payload(floorCallBytes)
	return fb.sample(ctx, "work-queue delivery", func(i int) (time.Duration, error) {
		start := time.Now()
		if _, err := fb.d.Publish(ctx, subject, data, jetstream.WithMsgID("trip-"+strconv.Itoa(i))); err != nil {
			return 0, err
		}
		select {
		case t := <-got:
			return t.Sub(start), nil
		case <-time.After(10 * time.Second):
			return 0, errors.New("a call was not delivered within 10 s")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
}

// rounds runs pattern (n steps or calls) once to warm up and then
// cfg.Rounds times; it returns the median time per step or call and the
// CPU time per step or call over the measured rounds.
func (fb *floorBus) rounds(ctx context.Context, n int, pattern func(ctx context.Context, round string, n int) (span, cpu time.Duration, err error)) (time.Duration, time.Duration, error) {
	var spans []time.Duration
	var cpu time.Duration
	for r := -1; r < fb.cfg.Rounds; r++ {
		span, c, err := pattern(ctx, "r"+strconv.Itoa(r+1), n)
		if err != nil {
			return 0, 0, err
		}
		if r >= 0 {
			spans = append(spans, span/time.Duration(n))
			cpu += c
		}
	}
	return sorted(spans)[len(spans)/2], cpu / time.Duration(n*fb.cfg.Rounds), nil
}

// cpu reads the CPU clock; 0 without one.
func (fb *floorBus) cpu() (time.Duration, error) {
	if fb.cfg.CPU == nil {
		return 0, nil
	}
	return fb.cfg.CPU()
}

// timed measures the wall and CPU time of run.
func (fb *floorBus) timed(run func() error) (time.Duration, time.Duration, error) {
	c0, err := fb.cpu()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := run(); err != nil {
		return 0, 0, err
	}
	span := time.Since(start)
	c1, err := fb.cpu()
	return span, c1 - c0, err
}

// dropConsumers deletes a pattern's consumers once it is done.
func (fb *floorBus) dropConsumers(names ...[2]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range names {
		_ = fb.d.DeleteConsumer(ctx, n[0], n[1])
	}
}

// chain is the bus-only chain: what a chain step of planbus does on the
// bus, with no planbus code. The worker pulls call i from the work queue,
// publishes its result and acknowledges the call; the dispatcher's
// consumer gets the result, compare-and-sets the state, publishes call
// i+1 and acknowledges the result.
func (fb *floorBus) chain(ctx context.Context, round string, steps int) (time.Duration, time.Duration, error) {
	calls, results := floorPrefix+"calls.chain"+round, floorPrefix+"results.chain"+round
	callData, resultData, state := payload(floorCallBytes), payload(floorResultBytes), payload(floorStateBytes)
	key := "state.chain" + round
	rev, err := fb.kv.Create(ctx, key, state)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: bus-only chain: create the state: %w", err)
	}
	wc, err := consumer(ctx, fb.w, floorCalls, "chain-worker"+round, calls)
	if err != nil {
		return 0, 0, err
	}
	dc, err := consumer(ctx, fb.d, floorResults, "chain-dispatcher"+round, results)
	if err != nil {
		return 0, 0, err
	}
	defer fb.dropConsumers([2]string{floorCalls, "chain-worker" + round}, [2]string{floorResults, "chain-dispatcher" + round})
	fail := make(chan error, 1)
	done := make(chan struct{})
	report := func(err error) {
		select {
		case fail <- err:
		default:
		}
	}
	stopW, err := consume(wc, 128, func(m jetstream.Msg) {
		id := m.Headers().Get(jetstream.MsgIDHeader)
		if _, err := fb.w.Publish(ctx, results, resultData, jetstream.WithMsgID(id+"/result")); err != nil {
			report(fmt.Errorf("bench: bus-only chain: publish result: %w", err))
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return 0, 0, err
	}
	defer stopW()
	// The handler runs for one message at a time; step is read by the
	// timeout's error as well.
	var step atomic.Int64
	stopD, err := consume(dc, 512, func(m jetstream.Msg) {
		r, err := fb.kv.Update(ctx, key, state, rev)
		if err != nil {
			report(fmt.Errorf("bench: bus-only chain: state compare-and-set: %w", err))
			return
		}
		rev = r
		next := step.Add(1)
		if next == int64(steps) {
			_ = m.Ack()
			close(done)
			return
		}
		if _, err := fb.d.Publish(ctx, calls, callData, jetstream.WithMsgID("chain-"+round+"/"+strconv.FormatInt(next, 10))); err != nil {
			report(fmt.Errorf("bench: bus-only chain: publish call: %w", err))
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return 0, 0, err
	}
	defer stopD()
	return fb.timed(func() error {
		if _, err := fb.d.Publish(ctx, calls, callData, jetstream.WithMsgID("chain-"+round+"/0")); err != nil {
			return fmt.Errorf("bench: bus-only chain: publish the first call: %w", err)
		}
		select {
		case <-done:
			return nil
		case err := <-fail:
			return err
		case <-time.After(time.Duration(steps) * time.Second):
			return fmt.Errorf("bench: bus-only chain: %d of %d steps within %d s", step.Load(), steps, steps)
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// fanout is the bus-only fan-out: the dispatcher publishes n calls at
// once (asynchronously, then awaits every acknowledgement), the worker
// pulls them, publishes a result for each (asynchronously) and
// acknowledges the call; the dispatcher's consumer takes the results and
// one goroutine folds what has arrived into the state with one
// compare-and-set per batch, as planbus's dispatcher shards do. With
// events, each call also has planbus's three progress events published
// on core NATS: released and succeeded by the dispatcher, started by the
// worker.
func (fb *floorBus) fanout(ctx context.Context, round string, n int, events bool) (time.Duration, time.Duration, error) {
	calls, results := floorPrefix+"calls.fanout"+round, floorPrefix+"results.fanout"+round
	callData, resultData, state := payload(floorCallBytes), payload(floorResultBytes), payload(floorStateBytes)
	eventData, eventPrefix := payload(floorEventBytes), floorPrefix+"events.fanout"+round+"."
	event := func(conn *bus.Conn, typ string) {
		if events {
			_ = conn.NC.Publish(eventPrefix+typ, eventData)
		}
	}
	key := "state.fanout" + round
	rev, err := fb.kv.Create(ctx, key, state)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: bus-only fan-out: create the state: %w", err)
	}
	wc, err := consumer(ctx, fb.w, floorCalls, "fanout-worker"+round, calls)
	if err != nil {
		return 0, 0, err
	}
	dc, err := consumer(ctx, fb.d, floorResults, "fanout-dispatcher"+round, results)
	if err != nil {
		return 0, 0, err
	}
	defer fb.dropConsumers([2]string{floorCalls, "fanout-worker" + round}, [2]string{floorResults, "fanout-dispatcher" + round})
	fail := make(chan error, 1)
	stopW, err := consume(wc, 256, func(m jetstream.Msg) {
		event(fb.cfg.Worker, "tool.started")
		id := m.Headers().Get(jetstream.MsgIDHeader)
		if _, err := fb.w.PublishAsync(results, resultData, jetstream.WithMsgID(id+"/result")); err != nil {
			select {
			case fail <- fmt.Errorf("bench: bus-only fan-out: publish result: %w", err):
			default:
			}
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return 0, 0, err
	}
	defer stopW()
	var mu sync.Mutex
	arrived := 0
	wake := make(chan struct{}, 1)
	stopD, err := consume(dc, 512, func(m jetstream.Msg) {
		event(fb.cfg.Dispatcher, "tool.succeeded")
		mu.Lock()
		arrived++
		mu.Unlock()
		_ = m.Ack()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return 0, 0, err
	}
	defer stopD()
	return fb.timed(func() error {
		for i := range n {
			event(fb.cfg.Dispatcher, "tool.released")
			if _, err := fb.d.PublishAsync(calls, callData, jetstream.WithMsgID("fanout-"+round+"/"+strconv.Itoa(i))); err != nil {
				return fmt.Errorf("bench: bus-only fan-out: publish call: %w", err)
			}
		}
		select {
		case <-fb.d.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
		applied := 0
		deadline := time.After(time.Duration(n)*10*time.Millisecond + 10*time.Second)
		for applied < n {
			select {
			case <-wake:
			case err := <-fail:
				return err
			case <-deadline:
				return fmt.Errorf("bench: bus-only fan-out: %d of %d results in time", applied, n)
			case <-ctx.Done():
				return ctx.Err()
			}
			mu.Lock()
			now := arrived
			mu.Unlock()
			if now == applied {
				continue
			}
			r, err := fb.kv.Update(ctx, key, state, rev)
			if err != nil {
				return fmt.Errorf("bench: bus-only fan-out: state compare-and-set: %w", err)
			}
			rev, applied = r, now
		}
		return nil
	})
}

// floorPlanTools is the tools of a bus-only plan, a diamond A → B,C,D → E
// as many-plans-N's.
const floorPlanTools = 5

// floorShards is how many goroutines apply the bus-only plans' messages,
// each to the plans it owns, as planbus's dispatcher shards do.
const floorShards = 16

// floorPlan is what the bus-only plans' dispatcher keeps of a plan.
type floorPlan struct {
	rev   uint64          // its state's revision
	held  []jetstream.Msg // results of B, C and D, until all three are in
	timer string          // where to acknowledge its timeout timer's delivery, postponed
	ended bool
}

// plans is the bus-only many-plans pattern: n 5-tool diamonds (A → B,C,D
// → E) submitted at once, each with the messages planbus stores and
// sends for such a plan, counted on planbus's own run, and no planbus
// code. The client publishes the plan to a limits stream; the
// dispatcher's consumer takes it, creates the plan's key and its state's
// in KV, publishes its timeout timer to a work queue and call A with the
// events plan.started and tool.released, and acknowledges the plan once
// JetStream has them. The timer is delivered and postponed (a nak with a
// delay) and acknowledged when the plan ends. The worker takes each call,
// publishes tool.started and the result, and acknowledges the call; the
// dispatcher's results consumer publishes tool.succeeded for each result
// and compare-and-sets the state after A (releasing B, C and D), after
// the last of B, C and D (releasing E) and after E, when it publishes
// plan.succeeded and the execution result to a limits stream. A planner
// consumer takes each execution result, looks its request up in KV and
// acknowledges it; the client sees it on a subscription. That is 17
// events, 5 KV writes, 5 calls, 5 results, the plan, its timer and its
// execution result a plan. The dispatcher's work runs on floorShards
// goroutines, each owning the plans whose index it is given.
func (fb *floorBus) plans(ctx context.Context, round string, n int) (time.Duration, time.Duration, error) {
	// The round's own context: what still waits on its acknowledgements
	// (settle) stops when the round ends, a failed one too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr := newPlansRound(ctx, fb, round, n)
	specs := pr.consumerSpecs()
	cons, drop, err := pr.createConsumers(specs)
	if err != nil {
		return 0, 0, err
	}
	defer fb.dropConsumers(drop...)
	stopShards := pr.startShards()
	defer stopShards()
	unsubscribe, err := pr.watchExecutions()
	if err != nil {
		return 0, 0, err
	}
	defer unsubscribe()
	for k, sp := range specs {
		stop, err := consume(cons[k], 512, sp.handle)
		if err != nil {
			return 0, 0, err
		}
		defer stop()
	}
	span, cpu, err := fb.timed(pr.submit)
	if err != nil {
		return 0, 0, err
	}
	// Outside the clock: the last acknowledgements (of calls, and of
	// timers delivered after their plan ended) reach the server before
	// the consumers go.
	return span, cpu, fb.drained(ctx, pr.calls, pr.timers)
}

// plansRound is one round of the bus-only plans: its subjects and
// messages, the dispatcher's plans and shards, and how the round ends.
// Its handlers run on the consumers' goroutines; a plan is touched only
// by the shard that owns it.
type plansRound struct {
	fb *floorBus
	// ctx is the round's, kept here because the handlers the consumers
	// call have no context of their own; it ends with the round.
	ctx   context.Context
	round string
	n     int
	// Subject prefixes: a plan's index (and, for calls and results, its
	// tool) follows each.
	submitted, execs, results, calls, timers, events string
	// The messages' payloads, sized as planbus's.
	planDoc, storedPlan, state, callData, resultData, timerData, execData, eventData []byte

	plans  []floorPlan
	shards []chan func()
	fail   chan error    // the round's first failure
	ended  atomic.Int64  // execution results the client has seen
	all    chan struct{} // closed when the client has seen all n
}

func newPlansRound(ctx context.Context, fb *floorBus, round string, n int) *plansRound {
	return &plansRound{fb: fb, ctx: ctx, round: round, n: n,
		submitted: floorPrefix + "results.plans" + round + ".",
		execs:     floorPrefix + "results.exec" + round + ".",
		results:   floorPrefix + "results.res" + round + ".",
		calls:     floorPrefix + "calls.plan" + round + ".",
		timers:    floorPrefix + "calls.timer" + round + ".",
		events:    floorPrefix + "events.plans" + round + ".",
		planDoc:   payload(floorPlanBytes), storedPlan: payload(floorStoredPlanBytes), state: payload(floorStateBytes),
		callData: payload(floorCallBytes), resultData: payload(floorResultBytes), timerData: payload(floorTimerBytes),
		execData: payload(floorExecutionBytes), eventData: payload(floorEventBytes),
		plans: make([]floorPlan, n), fail: make(chan error, 1), all: make(chan struct{}),
	}
}

// plansConsumer is one of the round's consumers and the handler of what
// it delivers.
type plansConsumer struct {
	js                    jetstream.JetStream
	stream, name, subject string
	handle                func(jetstream.Msg)
}

// consumerSpecs lists the round's consumers in the order they are made
// and started: the dispatcher's for plans, results and timers, the
// worker's for calls, the planner's for execution results.
func (pr *plansRound) consumerSpecs() []plansConsumer {
	fb, round := pr.fb, pr.round
	return []plansConsumer{
		{fb.d, floorResults, "plans-dispatcher" + round, pr.submitted + ">", pr.onPlan},
		{fb.d, floorResults, "plans-results" + round, pr.results + ">", pr.onResult},
		{fb.d, floorCalls, "plans-timers" + round, pr.timers + ">", pr.onTimer},
		{fb.w, floorCalls, "plans-worker" + round, pr.calls + ">", pr.onCall},
		{fb.d, floorResults, "plans-planner" + round, pr.execs + ">", pr.onExecution},
	}
}

// createConsumers makes specs' consumers, in order; drop names them for
// dropConsumers. It stops at the first it cannot make.
func (pr *plansRound) createConsumers(specs []plansConsumer) (cons []jetstream.Consumer, drop [][2]string, err error) {
	cons = make([]jetstream.Consumer, len(specs))
	for k, sp := range specs {
		c, err := consumer(pr.ctx, sp.js, sp.stream, sp.name, sp.subject)
		if err != nil {
			return nil, nil, err
		}
		cons[k] = c
		drop = append(drop, [2]string{sp.stream, sp.name})
	}
	return cons, drop, nil
}

// startShards starts the dispatcher's shards, each running the work
// handed to it in order, and returns what stops them and waits until
// they are done.
func (pr *plansRound) startShards() (stop func()) {
	pr.shards = make([]chan func(), floorShards)
	var wg sync.WaitGroup
	for k := range pr.shards {
		pr.shards[k] = make(chan func(), 1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for work := range pr.shards[k] {
				work()
			}
		}()
	}
	return func() {
		for _, ch := range pr.shards {
			close(ch)
		}
		wg.Wait()
	}
}

// toShard hands work to the shard that owns plan i, so that one
// goroutine alone touches a plan.
func (pr *plansRound) toShard(i int, work func()) {
	pr.shards[i%floorShards] <- work
}

// planIndex splits a subject after prefix into the plan's id, its index
// (the id as a number) and what follows the id.
func planIndex(subject, prefix string) (id string, i int, rest string) {
	id, rest, _ = strings.Cut(strings.TrimPrefix(subject, prefix), ".")
	i, _ = strconv.Atoi(id)
	return id, i, rest
}

// report keeps the round's first failure; the round ends with it.
func (pr *plansRound) report(err error) {
	select {
	case pr.fail <- fmt.Errorf("bench: bus-only plans: %w", err):
	default:
	}
}

// event publishes a progress event of plan id on core NATS, as planbus
// does: not awaited, a lost one not reported.
func (pr *plansRound) event(conn *bus.Conn, id, typ string) {
	_ = conn.NC.Publish(pr.events+id+"."+typ, pr.eventData)
}

// pub publishes for the dispatcher without waiting for the
// acknowledgement; settle waits for it. A publish that cannot start is
// reported and returns nil.
func (pr *plansRound) pub(subject string, data []byte, msgID string) jetstream.PubAckFuture {
	f, err := pr.fb.d.PublishAsync(subject, data, jetstream.WithMsgID(msgID))
	if err != nil {
		pr.report(err)
		return nil
	}
	return f
}

// settle acknowledges ms once JetStream has stored fs, on a goroutine of
// its own so that the shard goes on; it gives up (ms unacknowledged) on a
// nil future, a failed publish or the round's end.
func (pr *plansRound) settle(fs []jetstream.PubAckFuture, ms ...jetstream.Msg) {
	go func() {
		for _, f := range fs {
			if f == nil {
				return
			}
			select {
			case <-f.Ok():
			case err := <-f.Err():
				pr.report(err)
				return
			case <-pr.ctx.Done():
				return
			}
		}
		for _, m := range ms {
			_ = m.Ack()
		}
	}()
}

// update compare-and-sets plan id's state; false (reported) when the
// revision was not the one p holds or the write failed.
func (pr *plansRound) update(id string, p *floorPlan) bool {
	r, err := pr.fb.kv.Update(pr.ctx, "state.plans"+pr.round+"."+id, pr.state, p.rev)
	if err != nil {
		pr.report(fmt.Errorf("state compare-and-set: %w", err))
		return false
	}
	p.rev = r
	return true
}

// onPlan is the dispatcher taking a submitted plan: its key and its
// state's created in KV, plan.started and tool.released, its timeout
// timer and call A published; the plan acknowledged once JetStream has
// both.
func (pr *plansRound) onPlan(m jetstream.Msg) {
	id, i, _ := planIndex(m.Subject(), pr.submitted)
	pr.toShard(i, func() {
		p := &pr.plans[i]
		if _, err := pr.fb.kv.Create(pr.ctx, "plan.plans"+pr.round+"."+id, pr.storedPlan); err != nil {
			pr.report(fmt.Errorf("create the plan's key: %w", err))
			return
		}
		rev, err := pr.fb.kv.Create(pr.ctx, "state.plans"+pr.round+"."+id, pr.state)
		if err != nil {
			pr.report(fmt.Errorf("create the state: %w", err))
			return
		}
		p.rev = rev
		pr.event(pr.fb.cfg.Dispatcher, id, "plan.started")
		pr.event(pr.fb.cfg.Dispatcher, id, "tool.released")
		pr.settle([]jetstream.PubAckFuture{pr.pub(pr.timers+id, pr.timerData, "timer/"+pr.round+"/"+id),
			pr.pub(pr.calls+id+".A", pr.callData, pr.round+"/"+id+"/A")}, m)
	})
}

// onTimer is the dispatcher taking a plan's timeout timer: acknowledged
// when the plan has ended, else postponed until it does.
func (pr *plansRound) onTimer(m jetstream.Msg) {
	_, i, _ := planIndex(m.Subject(), pr.timers)
	pr.toShard(i, func() {
		p := &pr.plans[i]
		if p.ended {
			_ = m.Ack()
			return
		}
		// As planbus does: the delivery is postponed, and acknowledged
		// through its reply subject when the plan ends (a nak leaves
		// the message pending; nats.go's Ack would refuse a message it
		// has nakked).
		_ = m.NakWithDelay(time.Minute)
		p.timer = m.Reply()
	})
}

// onResult is the dispatcher taking a tool's result: tool.succeeded,
// then what the diamond's shape makes of it.
func (pr *plansRound) onResult(m jetstream.Msg) {
	id, i, tool := planIndex(m.Subject(), pr.results)
	pr.toShard(i, func() {
		p := &pr.plans[i]
		pr.event(pr.fb.cfg.Dispatcher, id, "tool.succeeded")
		switch tool {
		case "A":
			pr.afterA(id, p, m)
		case "B", "C", "D":
			pr.afterBranch(id, p, m)
		default:
			pr.afterE(id, p, m)
		}
	})
}

// afterA stores A's result and releases B, C and D; A's result is
// acknowledged once JetStream has the three calls.
func (pr *plansRound) afterA(id string, p *floorPlan, m jetstream.Msg) {
	if !pr.update(id, p) {
		return
	}
	var fs []jetstream.PubAckFuture
	for _, t := range []string{"B", "C", "D"} {
		pr.event(pr.fb.cfg.Dispatcher, id, "tool.released")
		fs = append(fs, pr.pub(pr.calls+id+"."+t, pr.callData, pr.round+"/"+id+"/"+t))
	}
	pr.settle(fs, m)
}

// afterBranch holds the results of B, C and D until all three are in,
// then stores them with one compare-and-set and releases E; the three
// are acknowledged once JetStream has E's call.
func (pr *plansRound) afterBranch(id string, p *floorPlan, m jetstream.Msg) {
	if p.held = append(p.held, m); len(p.held) < 3 || !pr.update(id, p) {
		return
	}
	pr.event(pr.fb.cfg.Dispatcher, id, "tool.released")
	pr.settle([]jetstream.PubAckFuture{pr.pub(pr.calls+id+".E", pr.callData, pr.round+"/"+id+"/E")}, p.held...)
}

// afterE stores E's result and ends the plan: plan.succeeded, its timer
// acknowledged, its execution result published; E's result is
// acknowledged once JetStream has that.
func (pr *plansRound) afterE(id string, p *floorPlan, m jetstream.Msg) {
	if !pr.update(id, p) {
		return
	}
	pr.event(pr.fb.cfg.Dispatcher, id, "plan.succeeded")
	if p.timer != "" {
		_ = pr.fb.cfg.Dispatcher.NC.Publish(p.timer, []byte("+ACK"))
	}
	p.ended = true
	pr.settle([]jetstream.PubAckFuture{pr.pub(pr.execs+id, pr.execData, "exec/"+pr.round+"/"+id)}, m)
}

// onCall is the worker taking a call: tool.started, the result
// published, the call acknowledged.
func (pr *plansRound) onCall(m jetstream.Msg) {
	rest := strings.TrimPrefix(m.Subject(), pr.calls)
	pr.event(pr.fb.cfg.Worker, rest[:strings.IndexByte(rest, '.')], "tool.started")
	if _, err := pr.fb.w.PublishAsync(pr.results+rest, pr.resultData, jetstream.WithMsgID(pr.round+"/"+rest+"/result")); err != nil {
		pr.report(fmt.Errorf("publish result: %w", err))
		return
	}
	_ = m.Ack()
}

// onExecution is the planner taking an execution result: its request
// looked up in KV (there is none), the result acknowledged.
func (pr *plansRound) onExecution(m jetstream.Msg) {
	id, _, _ := planIndex(m.Subject(), pr.execs)
	if _, err := pr.fb.kv.Get(pr.ctx, "request.plans"+pr.round+"."+id); !errors.Is(err, jetstream.ErrKeyNotFound) {
		pr.report(fmt.Errorf("look the request up: %v", err))
		return
	}
	_ = m.Ack()
}

// watchExecutions subscribes the client to the execution results,
// closing pr.all when all n have come, and flushes so that the
// subscription is in place before the first plan goes out.
func (pr *plansRound) watchExecutions() (unsubscribe func(), err error) {
	nc := pr.fb.cfg.Worker.NC
	sub, err := nc.Subscribe(pr.execs+">", func(*nats.Msg) {
		if pr.ended.Add(1) == int64(pr.n) {
			close(pr.all)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bench: bus-only plans: subscribe: %w", err)
	}
	unsubscribe = func() { _ = sub.Unsubscribe() }
	if err := nc.Flush(); err != nil {
		unsubscribe()
		return nil, err
	}
	return unsubscribe, nil
}

// submit is the measured part of a round: the client submits the n plans
// at once, awaits the server's acknowledgements, and then waits until it
// has seen every plan's execution result, the round's first failure, a
// deadline that grows with n, or the end of the round's context.
func (pr *plansRound) submit() error {
	ctx, n := pr.ctx, pr.n
	futures := make([]jetstream.PubAckFuture, n)
	for i := range n {
		id := strconv.Itoa(i)
		f, err := pr.fb.w.PublishAsync(pr.submitted+id, pr.planDoc, jetstream.WithMsgID("plan/"+pr.round+"/"+id))
		if err != nil {
			return fmt.Errorf("bench: bus-only plans: publish a plan: %w", err)
		}
		futures[i] = f
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("bench: bus-only plans: publish a plan: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-pr.all:
		return nil
	case err := <-pr.fail:
		return err
	case <-time.After(time.Duration(n)*10*time.Millisecond + 30*time.Second):
		return fmt.Errorf("bench: bus-only plans: %d of %d plans ended in time", pr.ended.Load(), n)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drained waits until the work queue holds nothing on the subjects of
// prefixes, for up to 10 s. (A subject filter narrows a stream info's
// Subjects, not its message count.)
func (fb *floorBus) drained(ctx context.Context, prefixes ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		left := map[string]uint64{}
		for _, p := range prefixes {
			info, err := fb.calls.Info(context.WithoutCancel(ctx), jetstream.WithSubjectFilter(p+">"))
			if err != nil {
				return fmt.Errorf("bench: bus-only plans: %w", err)
			}
			maps.Copy(left, info.State.Subjects)
		}
		if len(left) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bench: bus-only plans: %d calls and timers never acknowledged: %v", len(left), left)
		}
	}
}

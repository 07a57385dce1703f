package dispatcher_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// probe is a skill that records what ran: every start and end per tool and
// attempt, and the most calls it saw running at once. Input {"ms": N}
// makes a call last N ms (or until its context ends).
type probe struct {
	mu       sync.Mutex
	running  int
	maxSeen  int
	starts   map[string]int // tool id -> calls started
	spans    map[string][2]time.Time
	started  chan string // tool ids, as they start
	finished chan string
}

func newProbe() *probe {
	return &probe{starts: map[string]int{}, spans: map[string][2]time.Time{},
		started: make(chan string, 1024), finished: make(chan string, 1024)}
}

func (p *probe) skill() skill.Skill {
	return skill.Skill{
		Manifest: planbus.SkillManifest{Name: "probe"},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			var in struct {
				Ms int `json:"ms"`
			}
			_ = json.Unmarshal(call.Input, &in)
			p.mu.Lock()
			p.running++
			p.maxSeen = max(p.maxSeen, p.running)
			p.starts[call.ToolID]++
			start := time.Now()
			p.mu.Unlock()
			p.started <- call.ToolID
			var err error
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			case <-ctx.Done():
				err = ctx.Err()
			}
			p.mu.Lock()
			p.running--
			p.spans[call.ToolID] = [2]time.Time{start, time.Now()}
			p.mu.Unlock()
			p.finished <- call.ToolID
			out, _ := json.Marshal(map[string]any{"tool": call.ToolID, "input": json.RawMessage(call.Input)})
			return skill.Result{Output: out}, err
		}),
	}
}

func (p *probe) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts[id]
}

type harness struct {
	t     *testing.T
	node  *node.Node
	conn  *bus.Conn
	probe *probe
}

type opts struct {
	workers, dispatchers, concurrency int
	ackWait, opTimeout                time.Duration
	extra                             []skill.Skill // served besides the built-ins and the probe
	deliveryLimit                     int
	// contend: every dispatcher consumes every partition, so they
	// contend for each plan's state.
	contend bool
}

func start(t *testing.T, o opts) *harness {
	t.Helper()
	if o.workers == 0 {
		o.workers = 2
	}
	if o.ackWait == 0 {
		o.ackWait = 30 * time.Second
	}
	// The smallest server planbus takes: the tests of what is too large
	// to carry build an eighth of the bytes.
	cfg := bustest.StartSmall(t)
	pr := newProbe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		Bus:          cfg,
		Dispatchers:  o.dispatchers,
		NoDispatcher: o.dispatchers < 0,
		// Chunks of two tools: every plan of more than four tools keeps its
		// state in chunks, so the tests run both ways of storing it.
		Dispatcher: dispatcher.Config{AckWait: o.ackWait, OpTimeout: o.opTimeout, DefaultMaxConcurrency: 8, DeliveryLimit: o.deliveryLimit,
			StateChunkTools: 2, EveryPartition: o.contend},
		Workers: o.workers,
		Worker:  workerConfig(pr, o),
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return &harness{t: t, node: n, conn: bustest.Dial(t, cfg), probe: pr}
}

func workerConfig(pr *probe, o opts) worker.Config {
	return worker.Config{
		Skills:       append(append(skills.Builtins(skills.BuiltinConfig{}), pr.skill()), o.extra...),
		Concurrency:  o.concurrency,
		AckWait:      o.ackWait,
		DrainTimeout: time.Second,
	}
}

// run submits a plan document and waits for its result, collecting events.
func (h *harness) run(doc string, timeout time.Duration) (*planbus.ExecutionResult, *eventLog) {
	h.t.Helper()
	log := &eventLog{}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := h.client().ExecutePlan(ctx, []byte(doc), log.add)
	if err != nil {
		h.t.Fatal(err)
	}
	return res, log
}

// submit starts a plan without waiting; the result arrives on the channel.
func (h *harness) submit(doc string, timeout time.Duration, onEvent func(planbus.Event)) <-chan *planbus.ExecutionResult {
	h.t.Helper()
	c := h.client()
	out := make(chan *planbus.ExecutionResult, 1)
	// A test that ends before its plan does stops the wait: the
	// goroutine is over before the test is.
	ended, end := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.t.Cleanup(func() { end(); <-done })
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(ended, timeout)
		defer cancel()
		res, err := c.ExecutePlan(ctx, []byte(doc), onEvent)
		if err != nil && ended.Err() == nil {
			h.t.Error(err)
		}
		out <- res
	}()
	return out
}

// client is a planbus client on the harness's connection.
func (h *harness) client() *client.Client {
	h.t.Helper()
	c, err := client.New(h.conn.NC)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

type eventLog struct {
	mu     sync.Mutex
	events []planbus.Event
}

func (l *eventLog) add(ev planbus.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) of(typ planbus.EventType, toolID string) []planbus.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []planbus.Event
	for _, ev := range l.events {
		if ev.Type == typ && (toolID == "" || ev.ToolID == toolID) {
			out = append(out, ev)
		}
	}
	return out
}

func tool(res *planbus.ExecutionResult, id string) planbus.ToolOutcome {
	for _, o := range res.Tools {
		if o.ToolID == id {
			return o
		}
	}
	return planbus.ToolOutcome{}
}

// consumerOf is the dispatcher consumer (of the shared durable's stream)
// that takes plan id's messages: its partition's.
func consumerOf(durable, planID string) string {
	return bus.PartitionConsumer(durable, bus.PartitionOf(planID, bus.DefaultPartitions))
}

// waitFor receives from ch until want is seen or the deadline passes.
func waitFor(t *testing.T, ch <-chan string, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("%q did not happen within %s", want, d)
		}
	}
}

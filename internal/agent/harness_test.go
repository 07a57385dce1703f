package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// agentWait bounds every wait of the agent tests.
const agentWait = 20 * time.Second

// gate is a skill that holds each call until the test lets it through:
// the test changes the world while a step runs. A call let through
// succeeds with its input as output and, when the input has members, as
// statePatch (as remember does).
type gate struct {
	entered   chan *skill.Call // each call as it starts
	release   chan struct{}    // one token lets one call through
	cancelled chan string      // the plan id of each call cancelled while held
}

func newGate() (*gate, skill.Skill) {
	g := &gate{entered: make(chan *skill.Call, 64), release: make(chan struct{}, 64), cancelled: make(chan string, 64)}
	return g, skill.Skill{
		Manifest: skill.Manifest{Name: "gate", Version: "1", Description: "holds each call until the test releases it"},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			g.entered <- call
			select {
			case <-g.release:
			case <-ctx.Done():
				g.cancelled <- call.PlanID
				return skill.Result{}, ctx.Err()
			}
			var in map[string]any
			_ = json.Unmarshal(call.Input, &in)
			res := skill.Result{Output: call.Input}
			if len(in) > 0 {
				res.StatePatch = call.Input
			}
			return res, nil
		}),
	}
}

// enter waits for the next call to reach the gate.
func (g *gate) enter(t *testing.T) *skill.Call {
	t.Helper()
	select {
	case c := <-g.entered:
		return c
	case <-time.After(agentWait):
		t.Fatal("no call reached the gate")
		return nil
	}
}

// open lets the call held at the gate through.
func (g *gate) open() { g.release <- struct{}{} }

// agentEvents collects the events of one agent, in order, and wakes
// whoever waits for one.
type agentEvents struct {
	mu     sync.Mutex
	all    []planbus.Event
	notify chan struct{}
}

// watchAgent subscribes to the events of agent id before it starts.
func watchAgent(t *testing.T, h *harness, id string) *agentEvents {
	t.Helper()
	e := &agentEvents{notify: make(chan struct{}, 1)}
	sub, err := h.conn.NC.Subscribe(bus.EventsOfRequest(id), func(m *nats.Msg) {
		var ev planbus.Event
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		e.mu.Lock()
		e.all = append(e.all, ev)
		e.mu.Unlock()
		select {
		case e.notify <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := h.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *agentEvents) snapshot() []planbus.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]planbus.Event(nil), e.all...)
}

// of lists the events of a type (and goal, if not empty).
func (e *agentEvents) of(typ planbus.EventType, goal string) []planbus.Event {
	var out []planbus.Event
	for _, ev := range e.snapshot() {
		if ev.Type == typ && (goal == "" || ev.Goal == goal) {
			out = append(out, ev)
		}
	}
	return out
}

// waitN waits until n events of the type (and goal) arrived and returns
// the nth.
func (e *agentEvents) waitN(t *testing.T, n int, typ planbus.EventType, goal string) planbus.Event {
	t.Helper()
	deadline := time.After(agentWait)
	for {
		if got := e.of(typ, goal); len(got) >= n {
			return got[n-1]
		}
		select {
		case <-e.notify:
		case <-deadline:
			t.Fatalf("no %s event #%d (goal %q) within %s; events: %s", typ, n, goal, agentWait, e.summary())
		}
	}
}

func (e *agentEvents) wait(t *testing.T, typ planbus.EventType, goal string) planbus.Event {
	t.Helper()
	return e.waitN(t, 1, typ, goal)
}

// summary lists the agent.* events for a failure message.
func (e *agentEvents) summary() string {
	var b strings.Builder
	for _, ev := range e.snapshot() {
		if strings.HasPrefix(string(ev.Type), "agent.") || ev.Type == planbus.EventPlanCancelled || ev.Type == planbus.EventToolFailed {
			fmt.Fprintf(&b, "\n  %s %s %s", ev.Type, ev.Goal, ev.Message)
		}
	}
	return b.String()
}

// startAgent starts an agent on planbus.agent.start.
func startAgent(t *testing.T, h *harness, doc string) planbus.Accepted {
	t.Helper()
	m, err := h.conn.NC.Request(bus.SubjectAgentStart, []byte(doc), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var acc planbus.Accepted
	if err := json.Unmarshal(m.Data, &acc); err != nil || acc.Status != "accepted" {
		t.Fatalf("start: %s", m.Data)
	}
	return acc
}

// agentCall calls an agent endpoint and decodes its answer into out; a
// rejection is returned as *planbus.Rejected.
func agentCall(t *testing.T, h *harness, subject string, body any, out any) *planbus.Rejected {
	t.Helper()
	data, _ := json.Marshal(body)
	m, err := h.conn.NC.Request(subject, data, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Service-Error-Code") != "" {
		var rej planbus.Rejected
		if err := json.Unmarshal(m.Data, &rej); err != nil {
			t.Fatalf("%s: %v %s", subject, err, m.Data)
		}
		return &rej
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		t.Fatalf("%s: %v %s", subject, err, m.Data)
	}
	return nil
}

func agentStatus(t *testing.T, h *harness, sid string) *planbus.AgentStatus {
	t.Helper()
	var st planbus.AgentStatus
	if rej := agentCall(t, h, bus.SubjectAgentStatus, planbus.AgentStatusRequest{SessionID: sid}, &st); rej != nil {
		t.Fatalf("status: %+v", rej.Error)
	}
	return &st
}

func stopAgent(t *testing.T, h *harness, sid string) planbus.AgentStopReply {
	t.Helper()
	var r planbus.AgentStopReply
	if rej := agentCall(t, h, bus.SubjectAgentStop, planbus.AgentStopRequest{SessionID: sid, Reason: "test over"}, &r); rej != nil {
		t.Fatalf("stop: %+v", rej.Error)
	}
	return r
}

// storedAgent is what the tests read of an agent's stored state.
type storedAgent struct {
	Status     string `json:"status"`
	SessionRev uint64 `json:"sessionRevision"`
	Planner    string `json:"planner"`
	Arbiter    struct {
		Current string `json:"current"`
		Running bool   `json:"running"`
	} `json:"arbiter"`
	Step *struct {
		PlanID string `json:"planId"`
		Action string `json:"action"`
	} `json:"step"`
}

// waitStored waits until the session's stored agent satisfies ok,
// watching its key.
func waitStored(t *testing.T, h *harness, sid string, what string, ok func(storedAgent) bool) storedAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentWait)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketAgents)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	var last storedAgent
	for {
		select {
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var st storedAgent
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				t.Fatal(err)
			}
			if last = st; ok(st) {
				return st
			}
		case <-ctx.Done():
			t.Fatalf("the agent of session %s is not %s within %s; last stored: %+v", sid, what, agentWait, last)
		}
	}
}

// patchWorld changes the session state as a tool's statePatch would and
// waits until the agent has acted on it.
func patchWorld(t *testing.T, h *harness, sid, doc string) {
	t.Helper()
	rev := setWorld(t, h, sid, doc)
	waitStored(t, h, sid, fmt.Sprintf("acting on session revision %d", rev), func(s storedAgent) bool { return s.SessionRev >= rev })
}

// setWorld changes the session state as a tool's statePatch would and
// returns its revision.
func setWorld(t *testing.T, h *harness, sid, doc string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentWait)
	defer cancel()
	st, err := session.Open(ctx, h.conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Patch(ctx, sid, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	return e.Revision()
}

// sessionState reads the session's state document.
func sessionState(t *testing.T, h *harness, sid string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentWait)
	defer cancel()
	st, err := session.Open(ctx, h.conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := st.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// startAgentNode is a node whose planner has the agent test domains and
// whose workers serve the built-ins and a gate.
func startAgentNode(t *testing.T, pc planner.Config) (*harness, *gate) {
	t.Helper()
	g, gs := newGate()
	if pc.DomainsDir == "" {
		pc.DomainsDir = "testdata/agents"
	}
	h := start(t, pc, append(simulated(t), gs))
	return h, g
}

// outcomeOf waits for the outcome of request id.
func outcomeOf(t *testing.T, h *harness, id string) *planbus.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentWait)
	defer cancel()
	o, err := h.c.Await(ctx, id)
	if err != nil {
		t.Fatalf("outcome of %s: %v", id, err)
	}
	return o
}

var errNoGoal = errors.New("no such goal")

// goalOf returns the named goal of a status.
func goalOf(st *planbus.AgentStatus, goal string) (planbus.AgentGoal, error) {
	for _, g := range st.Goals {
		if g.Goal == goal {
			return g, nil
		}
	}
	return planbus.AgentGoal{}, fmt.Errorf("%w: %s", errNoGoal, goal)
}

func jsonDecode(data []byte, v any) error { return json.Unmarshal(data, v) }

func zerologNop() zerolog.Logger { return zerolog.Nop() }

// harness is a node (a planner, a dispatcher, workers) on an embedded
// JetStream server, with a client of its own.
type harness struct {
	t    *testing.T
	node *node.Node
	conn *bus.Conn
	c    *client.Client
}

// simulated are the simulated skills the agent tests call.
func simulated(t *testing.T) []skill.Skill {
	t.Helper()
	return []skill.Skill{skills.Echo(), skills.Sleep(), skills.Fail(), skills.Remember()}
}

func start(t *testing.T, pc planner.Config, sk []skill.Skill) *harness {
	t.Helper()
	return startLogged(t, pc, sk, zerolog.Nop())
}

// startLogged is start with the node's components logging to log.
func startLogged(t *testing.T, pc planner.Config, sk []skill.Skill, log zerolog.Logger) *harness {
	t.Helper()
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 2, Planner: pc,
		Worker: worker.Config{Skills: sk, DrainTimeout: time.Second}}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn := bustest.Dial(t, cfg)
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, node: n, conn: conn, c: c}
}

// request runs a plan request to its outcome.
func (h *harness) request(doc string) (*planbus.Outcome, []planbus.Event) {
	h.t.Helper()
	var mu sync.Mutex
	var evs []planbus.Event
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := h.c.Run(ctx, []byte(doc), func(ev planbus.Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out, evs
}

// plannerStat is the planner's counter name, as `nats micro stats
// planbus-planner` shows it.
func plannerStat(t *testing.T, h *harness, name string) int64 {
	t.Helper()
	m, err := h.conn.NC.Request("$SRV.STATS."+bus.ServicePlanner, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Endpoints []struct {
			Data map[string]int64 `json:"data"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(m.Data, &stats); err != nil || len(stats.Endpoints) == 0 {
		t.Fatalf("stats %s: %v", m.Data, err)
	}
	v, ok := stats.Endpoints[0].Data[name]
	if !ok {
		t.Fatalf("no %s in stats %v", name, stats.Endpoints[0].Data)
	}
	return v
}

package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

const wait = time.Minute

// start runs a planbus node on a test server and returns a client of it.
func start(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	cfg := startNode(t)
	c, err := client.New(bustest.Dial(t, cfg).NC, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startNode runs a planbus node (a dispatcher, a planner, two workers of
// the built-in skills) on a test server and returns the server's config.
func startNode(t *testing.T) bus.Config {
	t.Helper()
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 2,
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{}), DrainTimeout: time.Second}}, bustest.Log())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return cfg
}

// events collects events, safe for concurrent use.
type events struct {
	mu  sync.Mutex
	all []planbus.Event
	ch  chan planbus.Event
}

func newEvents() *events { return &events{ch: make(chan planbus.Event, 4096)} }

func (e *events) add(ev planbus.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

func (e *events) keys() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		out = append(out, string(ev.Type)+" "+ev.ToolID+" "+ev.Time.Format(time.RFC3339Nano))
	}
	return out
}

func TestNewRefusesBadOptions(t *testing.T) {
	nc := bustest.Dial(t, bustest.StartBare(t)).NC
	for name, opt := range map[string]client.Option{
		"request timeout 0":    client.WithRequestTimeout(0),
		"poll interval 1ms":    client.WithPollInterval(time.Millisecond),
		"event buffer 0":       client.WithEventBuffer(0),
		"negative timeout":     client.WithRequestTimeout(-time.Second),
		"negative poll period": client.WithPollInterval(-time.Second),
	} {
		if _, err := client.New(nc, opt); !errors.Is(err, client.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := client.New(nil); !errors.Is(err, client.ErrInvalidOption) {
		t.Errorf("no connection: %v, want ErrInvalidOption", err)
	}
	if _, err := client.New(nc, client.WithRequestTimeout(time.Second), client.WithPollInterval(50*time.Millisecond),
		client.WithEventBuffer(10), client.WithLogger(slog.New(slog.DiscardHandler))); err != nil {
		t.Errorf("good options: %v", err)
	}
}

// A bare plan is submitted without waiting and without a change to the
// document; its request can then be awaited, its state read, and its past
// events watched after the end, the same as those seen live.
func TestSubmitPlanAwaitStatusAndWatch(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	doc := []byte(`{"planId": "p1", "sessionId": "s1", "tools": [
		{"toolId": "A", "skill": "echo", "input": {"n": 1}},
		{"toolId": "B", "skill": "sleep", "dependencies": ["A"], "input": {"ms": 50}}]}`)
	kept := bytes.Clone(doc)
	acc, err := c.SubmitPlanJSON(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, kept) {
		t.Errorf("SubmitPlan changed the document:\n%s", doc)
	}
	if acc.RequestID != "p1" || acc.SessionID != "s1" || acc.Status != "accepted" {
		t.Fatalf("accepted %+v, want request p1 of session s1", acc)
	}
	out, err := c.Await(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if !out.Success || out.Execution == nil || out.Execution.PlanID != "p1-1" {
		t.Fatalf("outcome %+v", out)
	}
	st, err := c.Status(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	r := st.Request
	if r.Status != planbus.StatusSucceeded || !r.BarePlan || r.Kind != "plan" || r.SessionID != "s1" || r.PlanID != "p1-1" || !r.Ended() {
		t.Errorf("request status %+v", r)
	}
	p := st.Plan
	if p == nil || p.State != planbus.PlanSucceeded || len(p.Tools) != 2 || p.Tools[1].Skill != "sleep" ||
		p.Tools[1].State != planbus.ToolSucceeded || p.Tools[1].At.IsZero() || p.FinishedAt.Before(p.StartedAt) {
		t.Errorf("plan status %+v", p)
	}
	if byPlan, err := c.Status(ctx, "p1-1"); err != nil || byPlan.Plan == nil || byPlan.Plan.RequestID != "p1" {
		t.Errorf("status by plan id: %+v, %v", byPlan, err)
	}
	if _, err := c.Status(ctx, "nothing"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("status of nothing: %v, want ErrNotFound", err)
	}
	if _, err := c.Status(ctx, "a.b"); err == nil {
		t.Error("status of an id with a dot: no error")
	}

	// A request run while watched live, then watched again after its
	// end: the same events, each once.
	live := newEvents()
	if _, err := c.Run(ctx, []byte(`{"requestId": "r2", "kind": "plan", "plan": {"tools": [
		{"toolId": "A", "skill": "echo"}, {"toolId": "B", "skill": "echo", "dependencies": ["A"]}]}}`), live.add); err != nil {
		t.Fatal(err)
	}
	past := newEvents()
	o, err := c.Watch(ctx, "r2", past.add)
	if err != nil || !o.Success {
		t.Fatalf("watch after the end: %+v, %v", o, err)
	}
	l, p2 := live.keys(), past.keys()
	slices.Sort(l)
	slices.Sort(p2)
	if !slices.Equal(l, p2) || len(l) < 8 {
		t.Errorf("events watched after the end differ from those seen live:\npast %q\nlive %q", p2, l)
	}
}

// A watch that attaches while a request runs sees the events before and
// after it attached, each once.
func TestWatchMidRunSeesEveryEventOnce(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	live := newEvents()
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, []byte(`{"requestId": "mid", "kind": "plan", "plan": {"tools": [
			{"toolId": "A", "skill": "echo"}, {"toolId": "S", "skill": "sleep", "dependencies": ["A"], "input": {"ms": 300}},
			{"toolId": "B", "skill": "echo", "dependencies": ["S"]}]}}`), live.add)
		done <- err
	}()
	for ev := range live.ch {
		if ev.Type == planbus.EventToolStarted && ev.ToolID == "S" {
			break
		}
	}
	watched := newEvents()
	o, err := c.Watch(ctx, "mid", watched.add)
	if err != nil || !o.Success {
		t.Fatalf("watch: %+v %v", o, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w, l := watched.keys(), live.keys()
	seen := map[string]bool{}
	for _, k := range w {
		if seen[k] {
			t.Errorf("event %q delivered twice", k)
		}
		seen[k] = true
	}
	slices.Sort(w)
	slices.Sort(l)
	if !slices.Equal(w, l) {
		t.Errorf("watched %q\nlive %q", w, l)
	}
}

// A request the planner refuses is a *RejectedError naming the field; an
// unknown id to cancel is ErrNotFound.
func TestRejectionsAndNotFound(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := c.SubmitRequest(ctx, []byte(`{"kind": "plan", "plan": {"tools": [{"toolId": "a", "skill": "teleport"}]}}`))
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Field != "/plan/tools/0/skill" || rej.Reply.Error.Code != planbus.CodeInvalidRequest {
		t.Errorf("unknown skill: %v, want a rejection at /plan/tools/0/skill", err)
	}
	if _, err := c.SubmitPlanJSON(ctx, []byte(`not json`)); err == nil {
		t.Error("a plan that is not JSON: no error")
	}
	if _, err := c.RunPlan(ctx, []byte(`{"tools": [{"toolId": "a", "skill": "echo", "dependencies": ["a"]}]}`), nil); !errors.As(err, &rej) {
		t.Errorf("self dependency: %v, want a rejection", err)
	}
	if _, err := c.Cancel(ctx, "ghost", ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("cancel ghost: %v, want ErrNotFound", err)
	}
	if _, err := c.Inspector().List(ctx, planbus.ListRequest{Status: "sideways"}); err == nil {
		t.Error("list with an unknown status: no error")
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := c.Await(short, "never"); !errors.Is(err, client.ErrNoResult) {
		t.Errorf("await of a request that never ends: %v, want ErrNoResult", err)
	}
}

// A planId names one plan: the same plan again returns the first's result
// without running it again; another plan under its id is refused and not
// published (the old result came back as the new plan's).
func TestExecutePlanRefusesAnotherPlanUnderItsID(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	first := []byte(`{"planId": "dup", "tools": [{"toolId": "a", "skill": "echo", "input": {"text": "first"}}]}`)
	res, err := c.ExecutePlan(ctx, first, nil)
	if err != nil || !res.Success {
		t.Fatalf("first: %+v %v", res, err)
	}
	again, err := c.ExecutePlan(ctx, first, nil)
	if err != nil || again.PlanID != "dup" || string(again.Tools[0].Output) != `{"text":"first"}` {
		t.Errorf("the same plan again: %+v %v, want the first's result", again, err)
	}
	second := []byte(`{"planId": "dup", "tools": [{"toolId": "a", "skill": "echo", "input": {"text": "second"}}, {"toolId": "b", "skill": "echo", "input": {}}]}`)
	if res, err := c.ExecutePlan(ctx, second, nil); !errors.Is(err, client.ErrPlanIDTaken) || !strings.Contains(err.Error(), "plan id dup names another plan") {
		t.Errorf("another plan under the id: %+v %v, want ErrPlanIDTaken", res, err)
	}
}

// ExecutePlan publishes a plan straight to the dispatchers, without a
// planner's request.
func TestExecutePlan(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	evs := newEvents()
	doc := []byte(`{"tools": [{"toolId": "A", "skill": "echo", "input": {"x": 1}}]}`)
	res, err := c.ExecutePlan(ctx, doc, evs.add)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.PlanID == "" || res.RequestID != res.PlanID || string(res.Tools[0].Output) != `{"x":1}` {
		t.Fatalf("result %+v", res)
	}
	if string(doc) != `{"tools": [{"toolId": "A", "skill": "echo", "input": {"x": 1}}]}` {
		t.Errorf("ExecutePlan changed the document: %s", doc)
	}
	if len(evs.keys()) < 4 {
		t.Errorf("events %q", evs.keys())
	}
	st, err := c.Status(ctx, res.PlanID)
	if err != nil || st.Request != nil || st.Plan == nil || st.Plan.State != planbus.PlanSucceeded {
		t.Errorf("status of a plan without a request: %+v, %v", st, err)
	}
	again := newEvents()
	if res2, err := c.WatchPlan(ctx, res.PlanID, again.add); err != nil || res2.PlanID != res.PlanID {
		t.Errorf("watch plan: %+v %v", res2, err)
	}
	if a, b := again.keys(), evs.keys(); len(a) != len(b) {
		t.Errorf("watch plan saw %d events, the run %d", len(a), len(b))
	}
}

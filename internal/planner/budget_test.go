package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/planner"
)

const runaway = `"program":"loop(?x) :- if(), do(loop(?x)).","goal":"loop(1)"`

// budgetRequest runs a request whose generation a budget ends; the
// harness's deadline on the outcome (two minutes) catches one that a
// budget does not end. How soon it ends is measured, not asserted here.
func (h *harness) budgetRequest(doc string) *planbus.Outcome {
	h.t.Helper()
	out, _ := h.request(doc)
	return out
}

// wantBudgetFailure checks an outcome ended by a generation budget: one
// attempt (not retried), the fallback, the code given.
func wantBudgetFailure(t *testing.T, out *planbus.Outcome, code planbus.Code) {
	t.Helper()
	if out.Success || out.Status != planbus.StatusFallback || out.Attempts != 1 || out.Error == nil || out.Error.Code != code ||
		out.Error.Category != planbus.CategoryPermanent {
		t.Fatalf("outcome %s after %d attempts, error %+v; want the fallback after 1 attempt with %s (permanent)", out.Status, out.Attempts, out.Error, code)
	}
	if h := out.History; len(h) != 1 || h[0].State != "generation_failed" || h[0].Error == nil || h[0].Error.Code != code {
		t.Errorf("history %+v, want one failed generation with %s", h, code)
	}
}

func TestRunawayHTNSearchEndsWithItsMemoryBudget(t *testing.T) {
	h := start(t, planner.Config{HTNMaxMemory: 32 << 20, GOAPMaxMemory: 32 << 20, GenMaxMemory: 64 << 20}, simulated(t))
	out := h.budgetRequest(`{"kind":"htn","htn":{` + runaway + `}}`)
	wantBudgetFailure(t, out, planbus.CodeHTNMemoryBudget)
	if !strings.Contains(out.Error.Message, "budget of 33554432") {
		t.Errorf("message %q does not name the planner's budget", out.Error.Message)
	}

	// A request may lower the budget.
	out = h.budgetRequest(`{"kind":"htn","htn":{` + runaway + `,"budget":{"memory":1048576}}}`)
	wantBudgetFailure(t, out, planbus.CodeHTNMemoryBudget)
	if !strings.Contains(out.Error.Message, "budget of 1048576") {
		t.Errorf("message %q does not name the request's budget", out.Error.Message)
	}
	out = h.budgetRequest(`{"kind":"htn","htn":{` + runaway + `,"budget":{"nodes":100}}}`)
	wantBudgetFailure(t, out, planbus.CodeHTNNodeBudget)
}

// TestSlowHTNSearchEndsWithItsTimeBudget: a search that needs little
// memory but never ends uses up the generation's time, which is as
// permanent as running out of memory.
func TestSlowHTNSearchEndsWithItsTimeBudget(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	var facts []string
	for i := range 400 {
		facts = append(facts, fmt.Sprintf("n(%d).", i))
	}
	// 400^3 condition answers are tried, each failing: minutes of work in
	// constant memory.
	program := strings.Join(facts, " ") + ` go :- if(n(?a), n(?b), n(?c), ==(?a, -1)), do(never).`
	doc, _ := json.Marshal(map[string]any{"kind": "htn", "htn": map[string]string{"program": program, "goal": "go"}})
	start := time.Now()
	out := h.budgetRequest(string(doc))
	wantBudgetFailure(t, out, "HTN_TIME_BUDGET")
	if took := time.Since(start); took < generator.GenerationTimeout {
		t.Errorf("outcome after %s, before the %s budget ran out", took, generator.GenerationTimeout)
	}
}

func TestGOAPNodeBudget(t *testing.T) {
	h := start(t, planner.Config{DomainsDir: "../../examples/goap"},
		simulated(t, "fetch(item,from)", "shop(item,budget)", "chop(tree,note)", "gather(what)", "market(item,amount)", "build(structure,logs)"))
	out := h.budgetRequest(`{"kind":"goap","goap":{"domain":"woodcutter","goal":"build-cabin","budget":{"nodes":1}}}`)
	wantBudgetFailure(t, out, planbus.CodeGOAPNodeBudget)
	out = h.budgetRequest(`{"kind":"goap","goap":{"domain":"woodcutter","goal":"build-cabin","budget":{"memory":65536}}}`)
	if !out.Success {
		t.Errorf("within a budget that fits: outcome %s, error %+v", out.Status, out.Error)
	}
}

// TestBudgetsAboveTheMaximumAreRefused: a request may lower the planner's
// budgets, not raise them; asking for more is refused, naming the field.
func TestBudgetsAboveTheMaximumAreRefused(t *testing.T) {
	h := start(t, planner.Config{HTNMaxMemory: 32 << 20, GOAPMaxNodes: 1000, DomainsDir: "../../examples/goap"}, simulated(t))
	for _, tc := range []struct{ doc, field, max string }{
		{`{"kind":"htn","htn":{` + runaway + `,"budget":{"memory":33554433}}}`, "/htn/budget/memory", "33554432"},
		{`{"kind":"goap","goap":{"domain":"woodcutter","budget":{"nodes":1001}}}`, "/goap/budget/nodes", "1000"},
		{`{"kind":"goap","goap":{"domain":"woodcutter","budget":{"memory":1099511627776}}}`, "/goap/budget/memory", "134217728"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := h.c.Run(ctx, []byte(tc.doc), nil)
		cancel()
		var rej *client.RejectedError
		if !errors.As(err, &rej) || rej.Reply.Error.Code != "INVALID_REQUEST" || rej.Reply.Error.Field != tc.field ||
			!strings.Contains(rej.Reply.Error.Message, tc.max) {
			t.Errorf("%s: got %v, want INVALID_REQUEST at %s naming the maximum %s", tc.doc, err, tc.field, tc.max)
		}
	}
}

// TestOversizeRequestIsRefusedAndNothingIsPublished: a request whose
// loop state (the request and the plan it runs) could not be stored is
// refused at the endpoint, naming its size and the limit, and leaves no
// trace in the REQUESTS stream or the loop state bucket.
func TestOversizeRequestIsRefusedAndNothingIsPublished(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	doc := `{"requestId":"r5","kind":"plan","input":"` + strings.Repeat("x", 5<<20) + `","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := h.c.Run(ctx, []byte(doc), nil)
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Code != "INVALID_REQUEST" {
		t.Fatalf("got %v, want INVALID_REQUEST", err)
	}
	msg := rej.Reply.Error.Message
	if !strings.Contains(msg, fmt.Sprint(len(doc))) || !strings.Contains(msg, fmt.Sprint(8<<20)) {
		t.Errorf("message %q does not name the request's size (%d) and the limit (%d)", msg, len(doc), 8<<20)
	}
	st, err := h.conn.JS.Stream(ctx, bus.StreamRequests)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("REQUESTS stream holds %d messages, want none", info.State.Msgs)
	}
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := kv.Keys(ctx); !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Errorf("loop states %v (%v), want none", keys, err)
	}
}

// publishRequest publishes a request straight to the REQUESTS stream, as
// a planner of an older version (or anyone allowed to) could, around the
// endpoint's checks, and returns a subscription to its outcome.
func (h *harness) publishRequest(id string, doc []byte) func() *planbus.Outcome {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h.t.Cleanup(cancel)
	sub, err := h.conn.NC.SubscribeSync(bus.OutcomeSubject(id))
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.conn.JS.Publish(ctx, bus.RequestSubject(id), doc); err != nil {
		h.t.Fatal(err)
	}
	return func() *planbus.Outcome {
		h.t.Helper()
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			h.t.Fatalf("no outcome for %s: %v", id, err)
		}
		var o planbus.Outcome
		if err := json.Unmarshal(m.Data, &o); err != nil {
			h.t.Fatal(err)
		}
		return &o
	}
}

// acks watches the acknowledgements a planner sends for the messages of
// one consumer (they are NATS messages on $JS.ACK.<stream>.<consumer>....)
// and returns a function that waits for the next one that settles a
// message: "+ACK", "-NAK" or "+TERM" (progress reports are skipped).
func (h *harness) acks(stream, consumer string) func() string {
	h.t.Helper()
	sub, err := h.conn.NC.SubscribeSync("$JS.ACK." + stream + "." + consumer + ".>")
	if err != nil {
		h.t.Fatal(err)
	}
	return func() string {
		h.t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				h.t.Fatalf("no acknowledgement on %s/%s: %v", stream, consumer, err)
			}
			body := string(m.Data)
			if strings.HasPrefix(body, "-NAK") {
				return "-NAK"
			}
			if body != "+WPI" {
				return body
			}
		}
	}
}

// TestRequestTooLargeToStoreEndsWithAnOutcome: a request that reaches the
// planner although its loop state cannot be stored ends at once with an
// outcome naming the sizes, instead of being redelivered forever.
func TestRequestTooLargeToStoreEndsWithAnOutcome(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	doc := `{"requestId":"huge","kind":"plan","input":"` + strings.Repeat("x", 8<<20-2<<10) + `","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`
	acks := h.acks(bus.StreamRequests, bus.ConsumerPlannerRequests)
	out := h.publishRequest("huge", []byte(doc))()
	if out.Success || out.Status != planbus.StatusFailed || out.Error == nil || out.Error.Code != planbus.CodeRequestTooLarge ||
		!strings.Contains(out.Error.Message, fmt.Sprint(len(doc))) {
		t.Fatalf("outcome %s, error %+v; want failed with %s naming the size %d", out.Status, out.Error, planbus.CodeRequestTooLarge, len(doc))
	}
	if a := acks(); a != "+ACK" {
		t.Errorf("the request's message was settled with %q, want +ACK: handled once, not handed back", a)
	}
}

// TestPlanTooLargeToStoreBesideItsRequest: a request that fits, with a
// plan that does not fit beside it in the loop state, fails its
// generation for good (PLAN_TOO_LARGE) and ends with the fallback.
func TestPlanTooLargeToStoreBesideItsRequest(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	pad := strings.Repeat("y", 4<<20)
	doc := `{"requestId":"bigplan","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"pad":"` + pad + `"}}]}}`
	acks := h.acks(bus.StreamRequests, bus.ConsumerPlannerRequests)
	out := h.publishRequest("bigplan", []byte(doc))()
	if out.Success || out.Error == nil || out.Error.Code != planbus.CodePlanTooLarge || out.Attempts != 1 {
		t.Fatalf("outcome %s after %d attempts, error %+v; want %s after 1", out.Status, out.Attempts, out.Error, planbus.CodePlanTooLarge)
	}
	if a := acks(); a != "+ACK" {
		t.Errorf("the request's message was settled with %q, want +ACK: handled once, not handed back", a)
	}
}

// TestUnhandleableMessagesEndAtTheDeliveryLimit: a request whose loop
// state cannot be read fails at every delivery; at the delivery limit it
// ends with a failed outcome (DELIVERY_LIMIT). An execution result of a
// request in that state is dropped and counted.
func TestUnhandleableMessagesEndAtTheDeliveryLimit(t *testing.T) {
	h := start(t, planner.Config{DeliveryLimit: 3}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"stuck", "stuck-exec"} {
		if _, err := kv.Put(ctx, id, []byte("not a loop state")); err != nil {
			t.Fatal(err)
		}
	}
	terminated, err := h.conn.NC.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED." + bus.StreamExecutions + "." + bus.ConsumerPlannerExecutions)
	if err != nil {
		t.Fatal(err)
	}
	acks := h.acks(bus.StreamRequests, bus.ConsumerPlannerRequests)

	outcome := h.publishRequest("stuck", []byte(`{"requestId":"stuck","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`))
	out := outcome()
	if out.Success || out.Status != planbus.StatusFailed || out.Error == nil || out.Error.Code != planbus.CodeDeliveryLimit ||
		!strings.Contains(out.Error.Message, "after 3 deliveries") {
		t.Fatalf("outcome %s, error %+v; want failed with %s after 3 deliveries", out.Status, out.Error, planbus.CodeDeliveryLimit)
	}
	for i, want := range []string{"-NAK", "-NAK", "+TERM"} {
		if got := acks(); !strings.HasPrefix(got, want) {
			t.Errorf("delivery %d settled with %q, want %s", i+1, got, want)
		}
	}

	res, _ := json.Marshal(planbus.ExecutionResult{PlanID: "stuck-exec-1", RequestID: "stuck-exec", State: planbus.PlanSucceeded, Success: true, Tools: []planbus.ToolOutcome{}})
	if _, err := h.conn.JS.Publish(ctx, bus.ExecutionSubject("stuck-exec-1"), res); err != nil {
		t.Fatal(err)
	}
	if _, err := terminated.NextMsgWithContext(ctx); err != nil {
		t.Fatalf("the execution result was not dropped: %v", err)
	}
	if got := plannerStat(t, h, "messagesDropped"); got != 2 {
		t.Errorf("messagesDropped %d, want 2 (the request and the execution result)", got)
	}
}

// plannerStat reads one counter from the planner's micro stats, as `nats
// micro stats planbus-planner` shows them.
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

// A plan as given does no search: it does not wait for a generation slot
// behind HTN or GOAP searches, which may each take their whole time
// budget.
func TestPlansDoNotWaitBehindSearches(t *testing.T) {
	h := start(t, planner.Config{GenConcurrency: 1}, simulated(t))
	var facts []string
	for i := range 400 {
		facts = append(facts, fmt.Sprintf("n(%d).", i))
	}
	program := strings.Join(facts, " ") + ` go :- if(n(?a), n(?b), n(?c), ==(?a, -1)), do(never).`
	doc, _ := json.Marshal(map[string]any{"requestId": "slow", "kind": "htn", "htn": map[string]string{"program": program, "goal": "go"}})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	generating := make(chan struct{})
	var once sync.Once
	slow := make(chan *planbus.Outcome, 1)
	go func() {
		o, _ := h.c.Watch(ctx, "slow", func(ev planbus.Event) {
			if ev.Type == planbus.EventRequestGenerating {
				once.Do(func() { close(generating) })
			}
		})
		slow <- o
	}()
	if _, err := h.c.SubmitRequest(ctx, doc); err != nil {
		t.Fatal(err)
	}
	select {
	case <-generating: // the search holds the only search slot
	case <-ctx.Done():
		t.Fatal("the search never began")
	}
	out, _ := h.request(`{"kind": "plan", "plan": {"tools": [{"toolId": "a", "skill": "echo", "input": {}}]}}`)
	if out.Status != planbus.StatusSucceeded {
		t.Fatalf("plan: %+v", out)
	}
	select {
	case o := <-slow:
		t.Fatalf("the search ended (%+v) before the plan beside it: the plan waited for its slot", o)
	default:
	}
	if o := <-slow; o == nil || o.Error == nil || o.Error.Code != "HTN_TIME_BUDGET" {
		t.Errorf("the search: %+v, want it ended by its time budget", o)
	}
}

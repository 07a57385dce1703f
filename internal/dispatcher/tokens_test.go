package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/skill"
)

// hold is a skill whose calls run until the test releases their tool (or
// their context ends), reporting each start and end.
type hold struct {
	mu      sync.Mutex
	gates   map[string]chan struct{} // tool id -> closed to let its calls finish
	started chan *skill.Call
	ended   chan holdEnd
}

type holdEnd struct {
	planID, toolID string
	cause          error // why the call's context ended; nil if released
}

func newHold() *hold {
	return &hold{gates: map[string]chan struct{}{}, started: make(chan *skill.Call, 64), ended: make(chan holdEnd, 64)}
}

func (h *hold) gate(toolID string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.gates[toolID]
	if !ok {
		g = make(chan struct{})
		h.gates[toolID] = g
	}
	return g
}

func (h *hold) release(toolID string) { close(h.gate(toolID)) }

func (h *hold) skill() skill.Skill {
	return skill.Skill{
		Manifest: planbus.SkillManifest{Name: "hold"},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			h.started <- call
			select {
			case <-h.gate(call.ToolID):
				h.ended <- holdEnd{call.PlanID, call.ToolID, nil}
				return skill.Result{Output: json.RawMessage(`{"real":"` + call.ToolID + `"}`)}, nil
			case <-ctx.Done():
				h.ended <- holdEnd{call.PlanID, call.ToolID, context.Cause(ctx)}
				return skill.Result{}, ctx.Err()
			}
		}),
	}
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not happen within 20s", what)
		var zero T
		return zero
	}
}

// key reads the dispatchers' key from its bucket, as an operator could.
func (h *harness) key() *token.Key {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketKeys)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := kv.Get(ctx, token.KVKey)
	if err != nil {
		h.t.Fatal(err)
	}
	k, err := token.Decode(e.Value())
	if err != nil {
		h.t.Fatal(err)
	}
	return k
}

// rejected is results_rejected as `nats micro stats planbus-dispatcher`
// shows it.
func (h *harness) rejected(ctx context.Context) (int64, error) {
	m, err := h.conn.NC.RequestWithContext(ctx, "$SRV.STATS."+bus.ServiceDispatcher, nil)
	if err != nil {
		return 0, err
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		return 0, err
	}
	for _, ep := range st.Endpoints {
		var data map[string]int64
		if err := json.Unmarshal(ep.Data, &data); err == nil {
			if n, ok := data["results_rejected"]; ok {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("no results_rejected in %s", m.Data)
}

// waitRejected waits until the dispatcher has rejected want results.
func (h *harness) waitRejected(want int64) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := h.rejected(ctx)
		if err == nil && n == want {
			return
		}
		if n > want {
			h.t.Fatalf("results_rejected %d, want %d", n, want)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			h.t.Fatalf("results_rejected %d (%v), want %d within 20s", n, err, want)
		}
	}
}

// toolStates reads a plan's stored state: each tool's state, by tool id.
func (h *harness) toolStates(planID string, ids ...string) map[string]planbus.ToolState {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := kv.Get(ctx, bus.StateKey(planID))
	if err != nil {
		h.t.Fatal(err)
	}
	var st execution.Stored
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]planbus.ToolState{}
	for i, id := range ids {
		out[id] = st.Tools[i].State
	}
	return out
}

// The forgery that finished a 20 s tool after 2 s: results published by
// someone who did not get the call. None of them finishes the running
// tool; each is counted; the real result then does, and only its output
// flows into the next tool.
func TestForgedResultsDoNotFinishARunningTool(t *testing.T) {
	hd := newHold()
	h := start(t, opts{extra: []skill.Skill{hd.skill()}})
	const planID = "forged-results"
	events := &eventLog{}
	done := h.submit(`{"planId":"`+planID+`","tools":[{"toolId":"slow","skill":"hold"},
		{"toolId":"next","skill":"echo","dependencies":["slow"],"input":{"from":{"$ref":"slow"}}}]}`, time.Minute, events.add)
	if c := receive(t, hd.started, "the slow tool starting"); c.ToolID != "slow" {
		t.Fatalf("%s started, want slow", c.ToolID)
	}

	key := h.key()
	otherKey, _, err := token.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	forged := func(tok string) []byte {
		r := planbus.ToolResult{PlanID: planID, RequestID: planID, ToolID: "slow", Skill: "hold", Attempt: 1,
			State: planbus.ToolSucceeded, Output: json.RawMessage(`{"FORGED":1}`), Token: tok}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	attempts := []struct {
		name string
		data []byte
		opts []jetstream.PublishOpt
	}{
		// The first also takes the message id results had before ids
		// carried a tag: it must not keep the real result out as a duplicate.
		{"no token, as from a worker that does not echo it", forged(""),
			[]jetstream.PublishOpt{jetstream.WithMsgID(planbus.IdempotencyKey(planID, "slow", 1))}},
		{"the example from the report", []byte(`{"planId":"` + planID + `","toolId":"slow","attempt":1,"state":"succeeded","output":{"FORGED":1}}`), nil},
		{"a token made up", forged(strings.Repeat("A", token.Len)), nil},
		{"a token under another key", forged(otherKey.Result(planID, "slow", 1)), nil},
		{"the token of another attempt", forged(key.Result(planID, "slow", 2)), nil},
		{"the token of another tool", forged(key.Result(planID, "next", 1)), nil},
		{"the plan's cancel token", forged(key.Cancel(planID)), nil},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, a := range attempts {
		if _, err := h.conn.JS.Publish(ctx, bus.ResultSubject(planID), a.data, a.opts...); err != nil {
			t.Fatalf("%s: publish: %v", a.name, err)
		}
	}
	h.waitRejected(int64(len(attempts)))
	if got := h.toolStates(planID, "slow", "next"); got["slow"] != planbus.ToolRunning || got["next"] != planbus.ToolPending {
		t.Fatalf("after %d forged results: slow %s, next %s; want running and pending", len(attempts), got["slow"], got["next"])
	}

	hd.release("slow")
	res := receive(t, done, "the plan's result")
	if res == nil || !res.Success {
		t.Fatalf("plan result %+v, want success", res)
	}
	if got, want := string(tool(res, "next").Output), `{"from":{"real":"slow"}}`; got != want {
		t.Errorf("next's output %s, want %s: only the real result flows on", got, want)
	}
	if got := events.of(planbus.EventToolSucceeded, "slow"); len(got) != 1 {
		t.Errorf("%d tool.succeeded events for slow, want 1", len(got))
	}
	if n, err := h.rejected(ctx); err != nil || n != int64(len(attempts)) {
		t.Errorf("results_rejected %d (%v) after the real result, want %d", n, err, len(attempts))
	}
}

// Anyone may publish on planbus.cancel.> while auth is off: cancels
// without the plan's cancel token neither stop its running call nor drop
// its later calls, and the dispatcher's own cancel (here of a required
// tool's failure) still stops the running sibling.
func TestForgedCancelsDoNotStopAPlan(t *testing.T) {
	hd := newHold()
	h := start(t, opts{workers: 1, extra: []skill.Skill{hd.skill()}})
	const planID = "forged-cancels"
	done := h.submit(`{"planId":"`+planID+`","tools":[{"toolId":"sibling","skill":"hold"},{"toolId":"first","skill":"hold"},
		{"toolId":"later","skill":"echo","dependencies":["first"],"input":{"n":1}},
		{"toolId":"doomed","skill":"fail","dependencies":["later"],"input":{"category":"permanent","message":"no"}}]}`, time.Minute, nil)
	key := h.key()
	// The sentinel is a call of no plan, published as a dispatcher would.
	sentinel := planbus.ToolCall{PlanID: "sentinel", RequestID: "sentinel", ToolID: "s", Skill: "hold", Attempt: 1, MaxAttempts: 1,
		Input: json.RawMessage(`{}`), TimeoutMs: 60000, IdempotencyKey: planbus.IdempotencyKey("sentinel", "s", 1),
		Token: key.Result("sentinel", "s", 1), CancelDigest: token.Digest(key.Cancel("sentinel"))}
	data, err := json.Marshal(sentinel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := h.conn.JS.Publish(ctx, bus.ToolSubject("hold"), data); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		receive(t, hd.started, "sibling, first and the sentinel starting")
	}

	otherKey, _, err := token.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cancelOf := func(planID, tok string) []byte {
		b, err := json.Marshal(planbus.Cancel{PlanID: planID, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, data := range [][]byte{nil, []byte(`{}`), cancelOf(planID, otherKey.Cancel(planID)),
		cancelOf(planID, key.Cancel("sentinel")), cancelOf(planID, token.Digest(key.Cancel(planID)))} {
		if err := h.conn.NC.Publish(bus.CancelSubject(planID), data); err != nil {
			t.Fatal(err)
		}
	}
	// The one worker handles cancels in the order this connection sent
	// them: when the sentinel's call ends on a real cancel sent after the
	// forged ones, those have been handled.
	if err := h.conn.NC.Publish(bus.CancelSubject("sentinel"), cancelOf("sentinel", key.Cancel("sentinel"))); err != nil {
		t.Fatal(err)
	}
	if end := receive(t, hd.ended, "the sentinel's call ending"); end.planID != "sentinel" || end.cause == nil {
		t.Fatalf("%s/%s ended (cause %v), want the sentinel's call cancelled first", end.planID, end.toolID, end.cause)
	}

	// first finishes and its dependents run: later (a call released after
	// the forged cancels) and doomed, whose failure ends the plan.
	hd.release("first")
	if end := receive(t, hd.ended, "first ending"); end.toolID != "first" || end.cause != nil {
		t.Fatalf("%s ended (cause %v), want first, released", end.toolID, end.cause)
	}
	res := receive(t, done, "the plan's result")
	if res == nil || res.State != planbus.PlanFailed {
		t.Fatalf("plan result %+v, want failed on doomed's permanent failure", res)
	}
	for id, want := range map[string]planbus.ToolState{"first": planbus.ToolSucceeded, "later": planbus.ToolSucceeded,
		"doomed": planbus.ToolFailed, "sibling": planbus.ToolCancelled} {
		if got := tool(res, id).State; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	// The dispatcher's cancel reached the worker and ended the sibling.
	if end := receive(t, hd.ended, "the sibling ending"); end.toolID != "sibling" || end.cause == nil {
		t.Errorf("%s ended (cause %v), want the sibling cancelled", end.toolID, end.cause)
	}
}

// In a cluster a dispatcher can read a plan's state from a replica that is
// behind and find none. A signed result for a plan whose state is not
// there yet is held back, not dropped: here it arrives before the plan
// starts, and finishes the plan's tool once the plan has started.
func TestResultBeforeItsPlansStateIsHeldBack(t *testing.T) {
	hd := newHold()
	h := start(t, opts{extra: []skill.Skill{hd.skill()}})
	const planID = "early-result"
	key := h.key()
	r := planbus.ToolResult{PlanID: planID, RequestID: planID, ToolID: "slow", Skill: "hold", Attempt: 1,
		State: planbus.ToolSucceeded, Output: json.RawMessage(`{"early":true}`), Token: key.Result(planID, "slow", 1)}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.conn.JS.Publish(ctx, bus.ResultSubject(planID), data); err != nil {
		t.Fatal(err)
	}
	// The dispatcher sees the result with no plan state, more than once.
	cons, err := h.conn.JS.Consumer(ctx, bus.StreamResults, consumerOf(bus.ConsumerDispatcherResults, planID))
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumRedelivered > 0 {
			break
		}
	}
	done := h.submit(`{"planId":"`+planID+`","tools":[{"toolId":"slow","skill":"hold"},
		{"toolId":"next","skill":"echo","dependencies":["slow"],"input":{"from":{"$ref":"slow"}}}]}`, time.Minute, nil)
	res := receive(t, done, "the plan's result")
	if res == nil || !res.Success {
		t.Fatalf("plan result %+v, want success with the early result", res)
	}
	if got, want := string(tool(res, "next").Output), `{"from":{"early":true}}`; got != want {
		t.Errorf("next's output %s, want %s", got, want)
	}
	if got := dispatcherStat(t, h, "messagesDropped"); got != 0 {
		t.Errorf("messagesDropped %d, want 0", got)
	}
}

// A result signed with its call's token that does not decode (a worker
// in another language put a lone surrogate escape in its output) fails
// its attempt with INVALID_RESULT: the plan moves on instead of waiting
// for the tool's timeout with the result dropped (issue 23).
func TestUndecodableSignedResultFailsItsAttempt(t *testing.T) {
	hd := newHold()
	h := start(t, opts{extra: []skill.Skill{hd.skill()}})
	const planID = "bad-text"
	done := h.submit(`{"planId":"`+planID+`","timeoutMs":120000,"tools":[{"toolId":"slow","skill":"hold","timeoutMs":120000,"retryPolicy":{"maxAttempts":1}}]}`, 2*time.Minute, nil)
	receive(t, hd.started, "the call starting")
	key := h.key()
	r := planbus.ToolResult{PlanID: planID, RequestID: planID, ToolID: "slow", Skill: "hold", Attempt: 1,
		State: planbus.ToolSucceeded, Output: json.RawMessage(`{"s":"x"}`), Token: key.Result(planID, "slow", 1)}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), `"s":"x"`, `"s":"\ud800"`, 1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.conn.JS.Publish(ctx, bus.ResultSubject(planID), data); err != nil {
		t.Fatal(err)
	}
	res := receive(t, done, "the plan's result")
	if res == nil || res.State != planbus.PlanFailed {
		t.Fatalf("plan result %+v, want failed", res)
	}
	if e := tool(res, "slow").Error; e == nil || e.Code != planbus.CodeInvalidResult || !strings.Contains(e.Message, "surrogate") {
		t.Errorf("slow's error %+v, want INVALID_RESULT naming the surrogate", e)
	}
	hd.release("slow")
}

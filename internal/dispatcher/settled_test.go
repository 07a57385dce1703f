package dispatcher_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// A call whose result was stored but whose acknowledgement was lost (the
// server died between them: a kill -9 of the server re-ran 4 of 811
// completed calls) comes back to a worker, which asks the dispatchers and
// does not run it again (issue 23).
func TestACallDeliveredAgainAfterItsResultIsNotRunAgain(t *testing.T) {
	h := start(t, opts{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := h.conn.JS
	// The first worker of skill once is the test: it advertises the skill,
	// takes the call, stores its result and never acknowledges the call.
	tc, done, cons := heldCall(t, h, "once", `{"planId":"ledger","tools":[{"toolId":"append","skill":"once"}]}`, time.Second)
	res, _ := json.Marshal(planbus.ToolResult{PlanID: tc.PlanID, RequestID: tc.RequestID, ToolID: tc.ToolID, Skill: "once",
		Attempt: tc.Attempt, State: planbus.ToolSucceeded, Output: json.RawMessage(`{"appended":1}`), Token: tc.Token,
		WorkerID: "test", StartedAt: time.Now(), FinishedAt: time.Now()})
	if _, err := js.Publish(ctx, bus.ResultSubject(tc.PlanID), res); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, done, "the plan's result"); r == nil || !r.Success {
		t.Fatalf("plan %+v, want it succeeded with the stored result", r)
	}
	// A real worker of once now gets the call again, after its ack wait.
	var ran atomic.Int64
	once := skill.Skill{Manifest: skill.Manifest{Name: "once", Description: "appends to a ledger: must run once"},
		Handler: skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) {
			ran.Add(1)
			return skill.Result{Output: json.RawMessage(`{"appended":2}`)}, nil
		})}
	w, err := worker.New(bustest.Dial(t, h.node.Bus).NC, worker.Config{Skills: []skill.Skill{once}, DrainTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	var runErr error
	go func() { runErr = w.Run(wctx); close(stopped) }()
	defer func() { stop(); <-stopped }()
	// The call is settled (acknowledged by the worker, so gone from the
	// work queue) without running.
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the call was not settled: %+v", info)
		case <-stopped:
			t.Fatalf("the worker stopped: %v", runErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the call ran %d times again after its result was stored", n)
	}
	if n := dispatcherStat(t, h, "callsSettled"); n != 1 {
		t.Errorf("callsSettled %d, want 1", n)
	}
}

// Only the holder of a call may ask: a query without its token is
// refused.
func TestSettledNeedsTheCallsToken(t *testing.T) {
	h := start(t, opts{})
	q, _ := json.Marshal(planbus.SettledQuery{PlanID: "p", ToolID: "t", Attempt: 1, Token: "x"})
	m, err := h.conn.NC.Request(bus.SubjectCallSettled, q, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "403" {
		t.Errorf("answer %s (code %q), want 403", m.Data, code)
	}
}

// A replica that is behind (a node just back from a partition) answers a
// direct get of a plan started while it was away with "no such key". The
// settled check must not take that for a plan that ended: a chaos run
// lost calls that way, each worker told "the plan has no state: it
// ended" and dropping the call of a plan that had just started.
func TestSettledIsNotMisledByAReplicaThatIsBehind(t *testing.T) {
	h := start(t, opts{})
	tc, _, _ := heldCall(t, h, "held", `{"planId":"behind","tools":[{"toolId":"t","skill":"held"}]}`, time.Minute)
	bustest.ReplicaBehind(t, h.conn, bus.BucketPlans)

	q, _ := json.Marshal(planbus.SettledQuery{PlanID: tc.PlanID, ToolID: tc.ToolID, Attempt: tc.Attempt, Token: tc.Token})
	for i := range 40 {
		r, err := h.conn.NC.Request(bus.SubjectCallSettled, q, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := r.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Fatalf("answer %d: error %s %s", i, code, r.Header.Get("Nats-Service-Error"))
		}
		var reply planbus.SettledReply
		if err := json.Unmarshal(r.Data, &reply); err != nil {
			t.Fatalf("answer %d: %s: %v", i, r.Data, err)
		}
		if reply.Settled {
			t.Fatalf("answer %d: settled (%s) for the running call of a running plan", i, reply.Why)
		}
	}
}

// heldCall advertises skill with the test as its only worker, submits
// plan (one tool of skill) and takes its call without acknowledging it,
// the consumer's AckWait ackWait: the test holds the call. It returns the
// call, the plan's outcome to come and the skill's consumer.
func heldCall(t *testing.T, h *harness, skill, plan string, ackWait time.Duration) (planbus.ToolCall, <-chan *planbus.ExecutionResult, jetstream.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := h.conn.JS
	manifest, _ := json.Marshal(planbus.SkillManifest{Name: skill, Description: "calls the test holds"})
	skillsKV, err := js.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := skillsKV.Put(ctx, skill, manifest); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamTools, jetstream.ConsumerConfig{
		Durable: bus.SkillConsumer(skill), FilterSubject: bus.ToolSubject(skill), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, MaxDeliver: bus.ConsumerMaxDeliver(5), MaxWaiting: 4096, MaxAckPending: 100000, // as a worker makes it
	})
	if err != nil {
		t.Fatal(err)
	}
	done := h.submit(plan, time.Minute, nil)
	m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	if err != nil {
		t.Fatalf("the call: %v", err)
	}
	var tc planbus.ToolCall
	if err := json.Unmarshal(m.Data(), &tc); err != nil {
		t.Fatal(err)
	}
	return tc, done, cons
}

package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/token"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

func TestCallIsRunReportedAndAcknowledged(t *testing.T) {
	e := newEnv(t)
	events := e.subscribe(bus.SubjectEventsAll)
	w := e.startWorker(worker.Config{ID: "w-1", Skills: []skill.Skill{skills.Echo()}})

	tc := newCall("p1", "greet", "echo", `{"greeting":"hello"}`)
	e.publish(tc)
	res, msg := e.result("p1")

	if err := schemas.Validate(schemas.ToolResult, msg.Data()); err != nil {
		t.Errorf("result breaks its schema: %v: %s", err, msg.Data())
	}
	if res.Token != tc.Token {
		t.Errorf("result token %q, want the call's %q", res.Token, tc.Token)
	}
	if got, want := msg.Headers().Get(jetstream.MsgIDHeader), token.MsgID("p1/greet/1", tc.Token); got != want {
		t.Errorf("result Nats-Msg-Id %q, want %q", got, want)
	}
	if res.State != planbus.ToolSucceeded || string(res.Output) != `{"greeting":"hello"}` || res.Error != nil {
		t.Errorf("result %s output %s error %+v, want succeeded with the input echoed", res.State, res.Output, res.Error)
	}
	type identity struct {
		planID, requestID, toolID, skill string
		attempt                          int
		workerID                         string
	}
	want := identity{"p1", "req-p1", "greet", "echo", 1, w.ID()}
	got := identity{res.PlanID, res.RequestID, res.ToolID, res.Skill, res.Attempt, res.WorkerID}
	if got != want {
		t.Errorf("result identity %+v, want %+v", got, want)
	}
	if res.StartedAt.IsZero() || res.FinishedAt.Before(res.StartedAt) {
		t.Errorf("result times started %v finished %v", res.StartedAt, res.FinishedAt)
	}

	ev := receive(t, events, "the tool.started event")
	if got, want := ev.Subject, bus.EventSubject("req-p1", planbus.EventToolStarted); got != want {
		t.Errorf("event on %s, want %s", got, want)
	}
	var started planbus.Event
	if err := json.Unmarshal(ev.Data, &started); err != nil {
		t.Fatal(err)
	}
	if started.ToolID != "greet" || started.WorkerID != w.ID() || started.Attempt != 1 || started.PlanID != "p1" {
		t.Errorf("tool.started event %+v", started)
	}

	ci := e.waitSettled("echo")
	if ci.NumRedelivered != 0 {
		t.Errorf("%d calls redelivered, want 0", ci.NumRedelivered)
	}
	if n := e.resultCount("p1"); n != 1 {
		t.Errorf("%d results for p1, want 1", n)
	}
}

// advisoryTerminated prefixes the subjects of the server's advisories about
// messages a consumer's client terminated.
const advisoryTerminated = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED"

// An invalid call can never succeed, so it is terminated rather than left
// to be redelivered, and the worker goes on serving.
func TestInvalidCallIsTerminatedAndTheWorkerServesOn(t *testing.T) {
	attemptZero := newCall("bad", "t", "echo", `{}`)
	attemptZero.Attempt = 0
	tests := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"not JSON", []byte(`{"planId": "bad`), "invalid tool call: "},
		{"schema violation", marshal(t, attemptZero), "invalid tool call: at /attempt: "},
		{"another skill's call", marshal(t, newCall("bad", "t", "sleep", `{"ms":1}`)), "tool call for skill sleep on the queue of echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			terminated := e.subscribe(advisoryTerminated + "." + bus.StreamTools + "." + bus.SkillConsumer("echo"))
			e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}})

			e.publishRaw("echo", tt.data)
			e.publish(newCall("good", "t", "echo", `{"n":1}`))

			adv := receive(t, terminated, "the termination advisory")
			var a struct {
				StreamSeq uint64 `json:"stream_seq"`
				Reason    string `json:"reason"`
			}
			if err := json.Unmarshal(adv.Data, &a); err != nil {
				t.Fatal(err)
			}
			if a.StreamSeq != 1 || !strings.HasPrefix(a.Reason, tt.reason) {
				t.Errorf("terminated message %d with reason %q, want message 1 with a reason starting %q", a.StreamSeq, a.Reason, tt.reason)
			}
			if res, _ := e.result("good"); res.State != planbus.ToolSucceeded {
				t.Errorf("the valid call after it: %s %+v, want succeeded", res.State, res.Error)
			}
			e.waitSettled("echo")
			// Results are published before calls are settled, so none for
			// the bad call can still come.
			if n := e.allResults(); n != 1 {
				t.Errorf("%d results in all, want 1 (none for the invalid call)", n)
			}
		})
	}
}

// A call the worker cannot decode, but which names its plan, tool,
// attempt and token, fails at once with INVALID_CALL: its plan moves on
// instead of waiting for its timeout (issue 23: a lone surrogate in an
// input was dropped in silence).
func TestUndecodableCallFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}})
	tc := newCall("surrogate", "t", "echo", `{"s":"x"}`)
	data := []byte(strings.Replace(string(marshal(t, tc)), `"s":"x"`, `"s":"\ud800"`, 1))
	if !strings.Contains(string(data), `\ud800`) {
		t.Fatalf("no surrogate in %s", data)
	}
	e.publishRaw("echo", data)
	res, _ := e.result("surrogate")
	if res.State != planbus.ToolFailed || res.Error == nil || res.Error.Code != planbus.CodeInvalidCall ||
		res.Error.Category != planbus.CategoryInvalidInput || !strings.Contains(res.Error.Message, "surrogate") {
		t.Fatalf("result %s %+v; want failed, INVALID_CALL, invalid_input, naming the surrogate", res.State, res.Error)
	}
	if res.Token != tc.Token || res.Attempt != 1 || res.ToolID != "t" {
		t.Errorf("result names %s#%d with token %q; want the call's", res.ToolID, res.Attempt, res.Token)
	}
	e.waitSettled("echo")
}

// A call whose workers keep dying would otherwise loop forever: after
// MaxDeliver deliveries the worker that gets it next reports it failed
// without running it.
func TestCallDeliveredTooOftenFailsWithWorkerCrash(t *testing.T) {
	e := newEnv(t)
	doomed := newGate("doomed")
	cfg := worker.Config{AckWait: 300 * time.Millisecond, MaxDeliver: 1, DrainTimeout: 100 * time.Millisecond}

	cfgA := cfg
	cfgA.ID, cfgA.Skills = "dies", []skill.Skill{doomed.skill()}
	a := e.startWorker(cfgA)
	e.publish(newCall("p1", "t", "doomed", `{}`))
	receive(t, doomed.started, "the call starting on the first worker")

	var ranOnB atomic.Int64
	cfgB := cfg
	cfgB.ID, cfgB.Skills = "survives", []skill.Skill{counting("doomed", &ranOnB)}
	e.startWorker(cfgB)
	a.nc.Close() // the first worker dies mid-call: no ack, no heartbeat

	res, _ := e.result("p1")
	if res.State != planbus.ToolFailed || res.Error == nil || res.Error.Code != planbus.CodeWorkerCrash || res.Error.Category != planbus.CategoryInternal {
		t.Fatalf("result %s %+v, want failed with WORKER_CRASH (internal)", res.State, res.Error)
	}
	if res.WorkerID != "survives" {
		t.Errorf("reported by %q, want the surviving worker", res.WorkerID)
	}
	if n := ranOnB.Load(); n != 0 {
		t.Errorf("the second worker ran the call %d times, want 0: it had used up its deliveries", n)
	}
	e.waitSettled("doomed")
}

// Heartbeats keep a call that outlives AckWait from being given to a second
// worker.
func TestLongCallIsNotRedelivered(t *testing.T) {
	e := newEnv(t)
	var starts atomic.Int64
	slow := skillOf("slow", func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		starts.Add(1)
		select {
		case <-time.After(3 * time.Second): // the call's work, three times AckWait
		case <-ctx.Done():
			return skill.Result{}, ctx.Err()
		}
		return skill.Result{Output: call.Input}, nil
	})
	for range 2 {
		// An AckWait long enough that a loaded machine still gets a
		// heartbeat (every third of it) out in time.
		e.startWorker(worker.Config{Skills: []skill.Skill{slow}, AckWait: time.Second})
	}
	e.publish(newCall("p1", "t", "slow", `{}`))
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	ci := e.waitSettled("slow")
	if n := starts.Load(); n != 1 {
		t.Errorf("the call started %d times, want 1", n)
	}
	if ci.Delivered.Consumer != 1 {
		t.Errorf("delivered %d times, want once", ci.Delivered.Consumer)
	}
}

// A worker that asks the dispatchers whether a call may already have run
// keeps the call, with heartbeats, until the answer comes: a question that
// outlasted the ack wait let the call go to another worker, which asked
// too, got the same answer, and both ran it (soak, issue 23: a server
// restart held the first answer for 13 s).
func TestACallIsKeptWhileTheWorkerAsksWhetherItRan(t *testing.T) {
	e := newEnv(t)
	questions := make(chan *nats.Msg, 16)
	sub, err := e.conn.NC.ChanSubscribe(bus.SubjectCallSettled, questions)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	var starts atomic.Int64
	once := skillOf("once", func(_ context.Context, call *skill.Call) (skill.Result, error) {
		starts.Add(1)
		return skill.Result{Output: call.Input}, nil
	})
	// Stored before the worker starts, the call is asked about (it may
	// have gone to another worker before a server crash).
	e.publish(newCall("p1", "t", "once", `{}`))
	const ackWait = time.Second
	e.startWorker(worker.Config{Skills: []skill.Skill{once}, AckWait: ackWait})
	var q *nats.Msg
	select {
	case q = <-questions:
	case <-time.After(wait):
		t.Fatal("the worker did not ask whether the call already ran")
	}
	// The answer comes after four ack waits: a dispatcher busy, or its
	// server just back from a crash.
	select {
	case extra := <-questions:
		t.Fatalf("asked again while the first question waits: %s", extra.Data)
	case <-time.After(4 * ackWait):
	}
	if err := q.Respond([]byte(`{"settled":false,"why":"no result of the attempt is stored"}`)); err != nil {
		t.Fatal(err)
	}
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	ci := e.waitSettled("once")
	if n := starts.Load(); n != 1 || ci.Delivered.Consumer != 1 {
		t.Errorf("the call started %d times and was delivered %d times, want once and once: "+
			"its ack wait ran out while the worker asked about it", n, ci.Delivered.Consumer)
	}
}

// A worker left without an AckWait takes its skill's consumer's, and every
// worker heartbeats to the consumer's current one: a worker given a short
// AckWait that joins and leaves must not make the others' long calls run
// again (their heartbeats followed their own AckWait).
func TestWorkersHeartbeatToTheConsumersAckWait(t *testing.T) {
	defer worker.SetAckWaitRefresh(200 * time.Millisecond)()
	e := newEnv(t)
	var starts atomic.Int64
	slow := skillOf("slow", func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		starts.Add(1)
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return skill.Result{}, ctx.Err()
		}
		return skill.Result{Output: call.Input}, nil
	})
	var bLog, aLog bustest.SyncBuffer
	e.startWorker(worker.Config{ID: "b", Skills: []skill.Skill{slow}}, worker.WithLogger(jsonLog(&bLog, slog.LevelDebug)))
	ackWait := func() time.Duration {
		var d time.Duration
		e.waitConsumer("slow", func(ci *jetstream.ConsumerInfo) bool { d = ci.Config.AckWait; return true })
		return d
	}
	if d := ackWait(); d != 30*time.Second {
		t.Fatalf("the consumer's ack wait is %s, want the default 30s", d)
	}
	a := e.startWorker(worker.Config{ID: "a", Skills: []skill.Skill{slow}, AckWait: 600 * time.Millisecond}, worker.WithLogger(jsonLog(&aLog, slog.LevelDebug)))
	if !strings.Contains(aLog.String(), "changes the ack wait of the skill's consumer") {
		t.Errorf("the worker given another AckWait did not say it changes the consumer's:\n%s", aLog.String())
	}
	if err := a.stop(t, wait); err != nil {
		t.Fatal(err)
	}
	e.eventually("worker b heartbeating to the consumer's new ack wait", func(context.Context) (bool, string) {
		return strings.Contains(bLog.String(), "has another ack wait now"), bLog.String()
	})
	// A worker started now without an AckWait keeps the consumer's.
	e.startWorker(worker.Config{ID: "c", Skills: []skill.Skill{slow}})
	if d := ackWait(); d != 600*time.Millisecond {
		t.Errorf("after a worker without an AckWait started, the consumer's is %s, want 600ms kept", d)
	}
	e.publish(newCall("p1", "t", "slow", `{}`))
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	ci := e.waitSettled("slow")
	if n := starts.Load(); n != 1 || ci.Delivered.Consumer != 1 {
		t.Errorf("the 2 s call started %d times and was delivered %d times under a 600ms ack wait, want once and once", n, ci.Delivered.Consumer)
	}
}

// A call delivered again to the worker that runs it (its heartbeat came
// late: here the consumer's ack wait was shortened behind the worker's
// back) is not run a second time; the first run's result settles it.
func TestARedeliveryOfARunningCallIsNotRunAgain(t *testing.T) {
	defer worker.SetAckWaitRefresh(time.Hour)()
	e := newEnv(t)
	var starts atomic.Int64
	slow := skillOf("slow", func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		starts.Add(1)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return skill.Result{}, ctx.Err()
		}
		return skill.Result{Output: call.Input}, nil
	})
	e.startWorker(worker.Config{Skills: []skill.Skill{slow}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cons, err := e.conn.JS.Consumer(ctx, bus.StreamTools, bus.SkillConsumer("slow"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	cfg.AckWait = 250 * time.Millisecond
	if _, err := e.conn.JS.UpdateConsumer(ctx, bus.StreamTools, cfg); err != nil {
		t.Fatal(err)
	}
	e.publish(newCall("p1", "t", "slow", `{}`))
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	ci := e.waitSettled("slow")
	// NumRedelivered counts pending messages only; the consumer's
	// sequence counts every delivery.
	if ci.Delivered.Consumer < 2 {
		t.Fatalf("the call was delivered %d times, not again: the test did not test anything", ci.Delivered.Consumer)
	}
	if n := starts.Load(); n != 1 || e.resultCount("p1") != 1 {
		t.Errorf("the call started %d times for %d results, want once for one", n, e.resultCount("p1"))
	}
}

// An output cap the server's messages cannot carry is refused at New.
func TestOutputCapOverTheServersMaxPayload(t *testing.T) {
	e := newEnv(t)
	nc := bustest.Dial(t, e.cfg).NC
	_, err := worker.New(nc, worker.Config{Skills: []skill.Skill{skills.Echo()}, OutputCap: int(nc.MaxPayload())})
	if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), "OutputCap") {
		t.Errorf("New with an output cap of the whole max payload: %v, want an ErrInvalidConfig naming OutputCap", err)
	}
}

// A stopping worker lets its running calls finish and reports them before
// Run returns.
func TestStopLetsRunningCallsFinish(t *testing.T) {
	e := newEnv(t)
	stopping := make(chan struct{})
	started := make(chan struct{}, 1)
	work := skillOf("work", func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		started <- struct{}{}
		<-stopping
		select { // the call's work, which goes on after the stop is asked for
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return skill.Result{}, ctx.Err()
		}
		return skill.Result{Output: json.RawMessage(`{"done":true}`)}, nil
	})
	w := e.startWorker(worker.Config{Skills: []skill.Skill{work}, DrainTimeout: wait})
	e.publish(newCall("p1", "t", "work", `{}`))
	receive(t, started, "the call starting")

	close(stopping) // the call works on for 300ms from here, while Run's context ends at once
	if err := w.stop(t, wait+10*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// No waiting: Run must not have returned before the result was stored.
	if n := e.resultCount("p1"); n != 1 {
		t.Fatalf("%d results when Run returned, want 1", n)
	}
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded || string(res.Output) != `{"done":true}` {
		t.Errorf("result %s %s %+v, want succeeded", res.State, res.Output, res.Error)
	}
	e.waitSettled("work")
}

// Calls still running when the drain time is up are cancelled and handed
// back, and another worker runs them.
func TestDrainTimeoutHandsCallsBack(t *testing.T) {
	e := newEnv(t)
	stuck := newGate("job")
	a := e.startWorker(worker.Config{ID: "leaving", Skills: []skill.Skill{stuck.skill()}, DrainTimeout: 200 * time.Millisecond})
	e.publish(newCall("p1", "t", "job", `{"n":7}`))
	receive(t, stuck.started, "the call starting on the leaving worker")

	var ranOnB atomic.Int64
	e.startWorker(worker.Config{ID: "staying", Skills: []skill.Skill{counting("job", &ranOnB)}})
	if err := a.stop(t, wait); err != nil {
		t.Fatalf("Run: %v", err)
	}
	end := receive(t, stuck.ended, "the leaving worker's call ending")
	if !errors.Is(end.cause, worker.ErrShuttingDown) {
		t.Errorf("the call on the leaving worker ended with cause %v, want worker.ErrShuttingDown", end.cause)
	}

	res, _ := e.result("p1")
	if res.State != planbus.ToolSucceeded || res.WorkerID != "staying" || string(res.Output) != `{"n":7}` {
		t.Errorf("result %s by %q output %s error %+v, want succeeded by the staying worker", res.State, res.WorkerID, res.Output, res.Error)
	}
	if n := ranOnB.Load(); n != 1 {
		t.Errorf("the staying worker ran the call %d times, want 1", n)
	}
	e.waitSettled("job")
	if n := e.resultCount("p1"); n != 1 {
		t.Errorf("%d results, want 1 (the leaving worker reports nothing)", n)
	}
}

func TestCancelStopsOnlyThatPlansCalls(t *testing.T) {
	e := newEnv(t)
	g := newGate("block")
	e.startWorker(worker.Config{Skills: []skill.Skill{g.skill()}})
	e.publish(newCall("doomed", "t", "block", `{}`))
	e.publish(newCall("other", "t", "block", `{"plan":"other"}`))
	for range 2 {
		receive(t, g.started, "both calls starting")
	}

	e.cancel("doomed")
	end := receive(t, g.ended, "the cancelled call ending")
	if end.call.PlanID != "doomed" || !errors.Is(end.cause, worker.ErrPlanEnded) {
		t.Fatalf("plan %s's call ended (cause %v), want the cancelled plan's call to end first, with worker.ErrPlanEnded", end.call.PlanID, end.cause)
	}
	// A call of the cancelled plan that arrives later is not run.
	e.publish(newCall("doomed", "late", "block", `{}`))

	g.release()
	if res, _ := e.result("other"); res.State != planbus.ToolSucceeded || string(res.Output) != `{"plan":"other"}` {
		t.Errorf("the other plan's call: %s %s %+v, want succeeded", res.State, res.Output, res.Error)
	}
	e.waitSettled("block")
	if n := e.resultCount("doomed"); n != 0 {
		t.Errorf("%d results for the cancelled plan, want 0", n)
	}
	if n := g.starts.Load(); n != 2 {
		t.Errorf("%d calls started, want 2 (the late call of the cancelled plan is dropped)", n)
	}
}

// Anyone may publish on planbus.cancel.> while auth is off. Only a cancel
// that reveals the plan's cancel token, whose digest the calls carry,
// stops a call or drops the plan's later calls.
func TestForgedCancelsStopNothing(t *testing.T) {
	e := newEnv(t)
	g := newGate("block")
	e.startWorker(worker.Config{Skills: []skill.Skill{g.skill()}})
	e.publish(newCall("victim", "t", "block", `{}`))
	e.publish(newCall("sentinel", "t", "block", `{}`))
	for range 2 {
		receive(t, g.started, "both calls starting")
	}

	otherKey, _, err := token.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	real := key.Cancel("victim")
	forged := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"two bytes", []byte(`{}`)},
		{"not JSON", []byte(`cancel!`)},
		{"no token", marshal(t, map[string]string{"planId": "victim"})},
		{"a token under another key", marshal(t, planbus.Cancel{PlanID: "victim", Token: otherKey.Cancel("victim")})},
		{"another plan's token", marshal(t, planbus.Cancel{PlanID: "victim", Token: key.Cancel("sentinel")})},
		{"the digest the calls carry", marshal(t, planbus.Cancel{PlanID: "victim", Token: token.Digest(real)})},
		{"the call's result token", marshal(t, planbus.Cancel{PlanID: "victim", Token: key.Result("victim", "t", 1)})},
		{"too large", marshal(t, map[string]string{"planId": "victim", "cancelToken": real, "pad": strings.Repeat("x", 4096)})},
	}
	for _, f := range forged {
		e.cancelRaw("victim", f.data)
	}
	// The worker handles cancels one at a time in the order they were
	// sent: once the real cancel of the sentinel has ended its call, every
	// forged one above has been handled.
	e.cancel("sentinel")
	if end := receive(t, g.ended, "the sentinel's call ending"); end.call.PlanID != "sentinel" || end.cause == nil {
		t.Fatalf("plan %s's call ended (cause %v), want the sentinel's, cancelled, before any other", end.call.PlanID, end.cause)
	}

	// The victim's call runs on, and a later call of its plan runs too.
	e.publish(newCall("victim", "later", "block", `{"later":true}`))
	if c := receive(t, g.started, "the later call starting"); c.PlanID != "victim" || c.ToolID != "later" {
		t.Fatalf("call %s/%s started, want victim/later", c.PlanID, c.ToolID)
	}
	g.release()
	for range 2 {
		if end := receive(t, g.ended, "the victim's calls ending"); end.cause != nil || end.call.PlanID != "victim" {
			t.Errorf("call %s/%s ended with cause %v, want the victim's calls to finish", end.call.PlanID, end.call.ToolID, end.cause)
		}
	}
	e.waitSettled("block")
	if n := e.resultCount("victim"); n != 2 {
		t.Errorf("%d results for the victim's plan, want 2: forged cancels stop nothing", n)
	}
	if n := e.resultCount("sentinel"); n != 0 {
		t.Errorf("%d results for the cancelled sentinel, want 0", n)
	}
}

// A worker that has no call of a plan when its cancel arrives still drops
// the plan's calls that come later: they were queued before it ended. A
// forged cancel that comes after the real one does not undo it.
func TestCancelBeforeTheCallDropsIt(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Int64
	g := newGate("block")
	e.startWorker(worker.Config{Skills: []skill.Skill{counting("count", &ran), g.skill()}})
	e.publish(newCall("sentinel", "t", "block", `{}`))
	receive(t, g.started, "the sentinel's call starting")

	otherKey, _, err := token.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	e.cancel("ended")
	e.cancelRaw("ended", marshal(t, planbus.Cancel{PlanID: "ended", Token: otherKey.Cancel("ended")}))
	e.cancelRaw("live", marshal(t, planbus.Cancel{PlanID: "live", Token: otherKey.Cancel("live")}))
	// Cancels are handled in order: once the sentinel's call has ended,
	// so have the cancels above.
	e.cancel("sentinel")
	receive(t, g.ended, "the sentinel's call ending")

	e.publish(newCall("ended", "queued", "count", `{}`))
	e.publish(newCall("live", "t", "count", `{"live":1}`))
	if res, _ := e.result("live"); res.State != planbus.ToolSucceeded {
		t.Errorf("the live plan's call after a forged cancel: %s %+v, want succeeded", res.State, res.Error)
	}
	e.waitSettled("count")
	if n := e.resultCount("ended"); n != 0 {
		t.Errorf("%d results for the ended plan, want 0", n)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("%d calls ran, want 1 (the ended plan's call is dropped)", n)
	}
}

func TestOutputCap(t *testing.T) {
	e := newEnv(t)
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}, OutputCap: 64})
	tests := []struct {
		plan  string
		size  int
		state planbus.ToolState
		code  planbus.Code
	}{
		{"at-the-cap", 64, planbus.ToolSucceeded, ""},
		{"one-byte-over", 65, planbus.ToolFailed, "OUTPUT_TOO_LARGE"},
	}
	for _, tt := range tests {
		t.Run(tt.plan, func(t *testing.T) {
			input := `{"s":"` + strings.Repeat("x", tt.size-len(`{"s":""}`)) + `"}` // echo's output is its input
			e.publish(newCall(tt.plan, "t", "echo", input))
			res, _ := e.result(tt.plan)
			var code planbus.Code
			if res.Error != nil {
				code = res.Error.Code
			}
			if res.State != tt.state || code != tt.code {
				t.Errorf("result %s %q, want %s %q", res.State, code, tt.state, tt.code)
			}
			if tt.code != "" && (res.Output != nil || res.Error.Category != planbus.CategoryPermanent) {
				t.Errorf("output %s category %s, want no output and a permanent error", res.Output, res.Error.Category)
			}
		})
	}
}

func TestOutputThatIsNotJSONFails(t *testing.T) {
	e := newEnv(t)
	garbled := skillOf("garbled", func(context.Context, *skill.Call) (skill.Result, error) {
		return skill.Result{Output: json.RawMessage(`{"half":`)}, nil
	})
	e.startWorker(worker.Config{Skills: []skill.Skill{garbled}})
	e.publish(newCall("p1", "t", "garbled", `{}`))
	if res, _ := e.result("p1"); res.State != planbus.ToolFailed || errorCode(res) != "OUTPUT_NOT_JSON" {
		t.Errorf("result %s %s, want failed OUTPUT_NOT_JSON", res.State, errorCode(res))
	}
}

// What a handler returns that a result cannot carry (a category that is
// not planbus's, no code, error output that is not JSON, a state patch
// that is not an object) is reported once, as a result the dispatcher
// accepts: neither dropped by it, which left the plan waiting for its
// timeout, nor run again and again because the result could not be
// encoded.
func TestWhatAResultCannotCarryIsMadeValid(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name          string
		out           skill.Result
		err           error
		state         planbus.ToolState
		code          planbus.Code
		cat           planbus.Category
		output, inMsg string
	}{
		{name: "unknown-category", err: skill.Failf("BAD_CAT", "bogus", "bad category"),
			state: planbus.ToolFailed, code: "BAD_CAT", cat: planbus.CategoryInternal, inMsg: `category "bogus"`},
		{name: "no-category", err: &skill.Error{Code: "NOCAT", Message: "no category"},
			state: planbus.ToolFailed, code: "NOCAT", cat: planbus.CategoryInternal, inMsg: "no category"},
		{name: "no-code", err: skill.Permanent("", "no code"),
			state: planbus.ToolFailed, code: planbus.CodeToolFailed, cat: planbus.CategoryPermanent, inMsg: "no code"},
		{name: "error-output-not-json", err: &skill.Error{Code: "ERROUT", Category: planbus.CategoryPermanent, Message: "bad output", Output: json.RawMessage("exit 2: not found")},
			state: planbus.ToolFailed, code: "ERROUT", cat: planbus.CategoryPermanent, output: `"exit 2: not found"`},
		{name: "patch-not-an-object", out: skill.Result{Output: json.RawMessage(`1`), StatePatch: json.RawMessage(`[1,2]`)},
			state: planbus.ToolFailed, code: "INVALID_STATE_PATCH", cat: planbus.CategoryInternal},
		{name: "patch-not-json", out: skill.Result{Output: json.RawMessage(`1`), StatePatch: json.RawMessage(`nope`)},
			state: planbus.ToolFailed, code: "INVALID_STATE_PATCH", cat: planbus.CategoryInternal},
		{name: "patch-an-object", out: skill.Result{Output: json.RawMessage(`1`), StatePatch: json.RawMessage(` {"k":1}`)},
			state: planbus.ToolSucceeded, code: "<no error>", output: `1`},
	}
	runs := map[string]*atomic.Int64{}
	var sks []skill.Skill
	for _, tt := range tests {
		n := &atomic.Int64{}
		runs[tt.name] = n
		sks = append(sks, skillOf(tt.name, func(context.Context, *skill.Call) (skill.Result, error) {
			n.Add(1)
			return tt.out, tt.err
		}))
	}
	e.startWorker(worker.Config{Skills: sks})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.publish(newCall(tt.name, "t", tt.name, `{}`))
			res, msg := e.result(tt.name)
			if _, err := wire.DecodeResult(msg.Data()); err != nil {
				t.Fatalf("the dispatcher would drop the result: %v\n%s", err, msg.Data())
			}
			if res.State != tt.state || errorCode(res) != tt.code || (res.Error != nil && res.Error.Category != tt.cat) {
				t.Errorf("result %s %+v, want %s %s (%s)", res.State, res.Error, tt.state, tt.code, tt.cat)
			}
			if tt.inMsg != "" && !strings.Contains(res.Error.Message, tt.inMsg) {
				t.Errorf("message %q does not say %q", res.Error.Message, tt.inMsg)
			}
			if string(res.Output) != tt.output {
				t.Errorf("output %s, want %s", res.Output, tt.output)
			}
			e.waitSettled(tt.name)
			if n := runs[tt.name].Load(); n != 1 || e.resultCount(tt.name) != 1 {
				t.Errorf("the handler ran %d times for %d results, want once for one", n, e.resultCount(tt.name))
			}
		})
	}
}

func TestPanickingSkillFailsTheCallAndTheWorkerSurvives(t *testing.T) {
	e := newEnv(t)
	boom := skillOf("boom", func(context.Context, *skill.Call) (skill.Result, error) {
		panic("the skill blew up")
	})
	w := e.startWorker(worker.Config{Skills: []skill.Skill{boom, skills.Echo()}})
	e.publish(newCall("p1", "t", "boom", `{}`))
	res, _ := e.result("p1")
	if res.State != planbus.ToolFailed || errorCode(res) != planbus.CodeToolPanic || res.Error.Category != planbus.CategoryInternal {
		t.Fatalf("result %s %+v, want failed with TOOL_PANIC (internal)", res.State, res.Error)
	}
	if !strings.Contains(res.Error.Message, "the skill blew up") {
		t.Errorf("panic message %q does not say what the panic was", res.Error.Message)
	}
	e.waitSettled("boom")

	e.publish(newCall("p2", "t", "echo", `{"still":"here"}`))
	if res, _ := e.result("p2"); res.State != planbus.ToolSucceeded || res.WorkerID != w.ID() {
		t.Errorf("the next call: %s by %q, want succeeded by %q", res.State, res.WorkerID, w.ID())
	}
}

func TestMicroService(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(worker.Config{ID: "svc-worker", Skills: []skill.Skill{skills.Echo(), skills.Sleep()}, Version: "1.2.3"})
	e.waitService(w.ID())
	request := func(t *testing.T, subject, data string) ([]byte, string) {
		t.Helper()
		m, err := e.conn.NC.Request(subject, []byte(data), wait)
		if err != nil {
			t.Fatalf("request %s: %v", subject, err)
		}
		return m.Data, m.Header.Get(micro.ErrorCodeHeader)
	}

	t.Run("invoke", func(t *testing.T) {
		data, code := request(t, "planbus.invoke.echo", `{"x":1}`)
		if code != "" {
			t.Fatalf("error %s: %s", code, data)
		}
		var res planbus.ToolResult
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("reply is not a result: %v: %s", err, data)
		}
		if res.State != planbus.ToolSucceeded || string(res.Output) != `{"x":1}` || res.Skill != "echo" || res.WorkerID != w.ID() {
			t.Errorf("reply %s", data)
		}
		// A direct invocation belongs to no plan, so it has no token to
		// echo; in every other field the reply is a result.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatal(err)
		}
		if tok, ok := fields["token"]; ok {
			t.Errorf("reply carries a token %s", tok)
		}
		fields["token"] = marshal(t, strings.Repeat("A", token.Len))
		if err := schemas.Validate(schemas.ToolResult, marshal(t, fields)); err != nil {
			t.Errorf("reply breaks the result schema: %v", err)
		}
	})
	t.Run("invoke with input that is not an object", func(t *testing.T) {
		if data, code := request(t, "planbus.invoke.echo", `[1]`); code != "400" {
			t.Errorf("error code %q (%s), want 400", code, data)
		}
	})
	t.Run("invoke reports skill errors in the result", func(t *testing.T) {
		data, _ := request(t, "planbus.invoke.sleep", `{"ms":-1}`)
		var res planbus.ToolResult
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("reply is not a result: %v: %s", err, data)
		}
		if res.State != planbus.ToolFailed || errorCode(res) != planbus.CodeInvalidInput {
			t.Errorf("result %s %s, want failed INVALID_INPUT", res.State, errorCode(res))
		}
	})
	t.Run("info", func(t *testing.T) {
		data, _ := request(t, "$SRV.INFO."+bus.ServiceToolworker, "")
		var info struct {
			Name      string            `json:"name"`
			Version   string            `json:"version"`
			Metadata  map[string]string `json:"metadata"`
			Endpoints []struct {
				Name     string            `json:"name"`
				Subject  string            `json:"subject"`
				Metadata map[string]string `json:"metadata"`
			} `json:"endpoints"`
		}
		if err := json.Unmarshal(data, &info); err != nil {
			t.Fatalf("info: %v: %s", err, data)
		}
		if info.Name != bus.ServiceToolworker || info.Version != "1.2.3" || info.Metadata["worker"] != "svc-worker" {
			t.Errorf("service %s %s metadata %v", info.Name, info.Version, info.Metadata)
		}
		endpoints := map[string]string{}
		for _, ep := range info.Endpoints {
			endpoints[ep.Name] = ep.Subject + " " + ep.Metadata["stream_subject"]
		}
		want := map[string]string{
			"echo":  "planbus.invoke.echo planbus.tools.echo",
			"sleep": "planbus.invoke.sleep planbus.tools.sleep",
		}
		if len(endpoints) != len(want) || endpoints["echo"] != want["echo"] || endpoints["sleep"] != want["sleep"] {
			t.Errorf("endpoints %v, want %v", endpoints, want)
		}
	})
	t.Run("ping", func(t *testing.T) {
		data, _ := request(t, "$SRV.PING."+bus.ServiceToolworker, "")
		if !strings.Contains(string(data), `"name":"`+bus.ServiceToolworker+`"`) {
			t.Errorf("ping reply %s", data)
		}
	})
	t.Run("stats count calls from the queue", func(t *testing.T) {
		e.publish(newCall("p1", "t", "echo", `{}`))
		e.result("p1")
		e.waitSettled("echo")
		data, _ := request(t, "$SRV.STATS."+bus.ServiceToolworker, "")
		type endpointStats struct {
			Name string           `json:"name"`
			Data map[string]int64 `json:"data"`
		}
		var stats struct {
			Endpoints []endpointStats `json:"endpoints"`
		}
		if err := json.Unmarshal(data, &stats); err != nil {
			t.Fatalf("stats: %v: %s", err, data)
		}
		i := slices.IndexFunc(stats.Endpoints, func(ep endpointStats) bool { return ep.Name == "echo" })
		if i < 0 {
			t.Fatalf("no stats of echo: %s", data)
		}
		if d := stats.Endpoints[i].Data; d["received"] != 1 || d["succeeded"] != 1 || d["failed"] != 0 || d["running"] != 0 {
			t.Errorf("echo stats %v, want one call received and succeeded", d)
		}
	})
}

func TestConfigErrorsNameTheField(t *testing.T) {
	nc := bustest.Dial(t, bustest.Start(t)).NC
	echo := skills.Echo()
	badSchema := skill.Skill{Manifest: skill.Manifest{Name: "broken", InputSchema: json.RawMessage(`{"type":5}`)}, Handler: echo.Handler}
	badOutSchema := skill.Skill{Manifest: skill.Manifest{Name: "broken", OutputSchema: json.RawMessage(`{"type":5}`)}, Handler: echo.Handler}
	badName := skill.Skill{Manifest: skill.Manifest{Name: "word count"}, Handler: echo.Handler}
	badManifest := skill.Skill{Manifest: skill.Manifest{Name: "neg", TimeoutMs: -5}, Handler: echo.Handler}
	tests := []struct {
		name  string
		nc    *nats.Conn
		cfg   worker.Config
		field string
	}{
		{"no skills", nc, worker.Config{}, "Skills"},
		{"unnamed skill", nc, worker.Config{Skills: []skill.Skill{echo, {Handler: echo.Handler}}}, "Skills[1]: a skill has no name"},
		{"skill without handler", nc, worker.Config{Skills: []skill.Skill{{Manifest: echo.Manifest}}}, "Skills[0]: a skill has no name or no handler"},
		{"skill twice", nc, worker.Config{Skills: []skill.Skill{echo, echo}}, `Skills: skill "echo" listed twice`},
		{"name that is not a subject token", nc, worker.Config{Skills: []skill.Skill{badName}}, `Skills[0]: skill "word count": manifest at /name`},
		{"manifest against its schema", nc, worker.Config{Skills: []skill.Skill{echo, badManifest}}, `Skills[1]: skill "neg": manifest at /timeoutMs`},
		{"concurrency", nc, worker.Config{Skills: []skill.Skill{echo}, Concurrency: -1}, "Concurrency: -1"},
		{"ack wait", nc, worker.Config{Skills: []skill.Skill{echo}, AckWait: 50 * time.Millisecond}, "AckWait: 50ms"},
		{"max deliver", nc, worker.Config{Skills: []skill.Skill{echo}, MaxDeliver: -2}, "MaxDeliver: -2"},
		{"drain timeout", nc, worker.Config{Skills: []skill.Skill{echo}, DrainTimeout: -time.Second}, "DrainTimeout: -1s"},
		{"output cap", nc, worker.Config{Skills: []skill.Skill{echo}, OutputCap: -1}, "OutputCap: -1"},
		{"input schema", nc, worker.Config{Skills: []skill.Skill{badSchema}}, "Skills: skill: broken: input schema"},
		{"output schema", nc, worker.Config{Skills: []skill.Skill{badOutSchema}}, "Skills: skill: broken: output schema"},
		{"no connection", nil, worker.Config{Skills: []skill.Skill{echo}}, "no NATS connection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := worker.New(tt.nc, tt.cfg)
			if err == nil {
				t.Fatalf("no error, want one naming %s", tt.field)
			}
			if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q, want worker.ErrInvalidConfig naming %q", err, tt.field)
			}
		})
	}
	t.Run("nil middleware", func(t *testing.T) {
		_, err := worker.New(nc, worker.Config{Skills: []skill.Skill{echo}}, worker.WithMiddleware(skill.Recover, nil))
		if !errors.Is(err, worker.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithMiddleware: middleware 2 of 2 is nil") {
			t.Errorf("error %v, want worker.ErrInvalidConfig naming the nil middleware", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		w, err := worker.New(nc, worker.Config{Skills: []skill.Skill{echo}})
		if err != nil {
			t.Fatalf("a config with just skills: %v", err)
		}
		if w.ID() == "" {
			t.Errorf("no default worker id")
		}
	})
}

// Ready is closed once the worker serves, so a request to its service
// right after Ready should be answered.
func TestServiceAnswersOnceReady(t *testing.T) {
	for range 8 {
		e := newEnv(t)
		e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}})
		if _, err := e.conn.NC.Request("planbus.invoke.echo", []byte(`{}`), wait); err != nil {
			t.Fatalf("request right after Ready: %v", err)
		}
	}
}

// A worker holds no more calls of a skill than its concurrency: the rest
// stay on the queue, where another worker can take them.
func TestConcurrencyBoundsCallsHeld(t *testing.T) {
	e := newEnv(t)
	g := newGate("held")
	e.startWorker(worker.Config{Skills: []skill.Skill{g.skill()}, Concurrency: 2})
	for i := range 5 {
		e.publish(newCall(fmt.Sprintf("p%d", i), "t", "held", `{}`))
	}
	for range 2 {
		receive(t, g.started, "a call starting")
	}
	e.waitConsumer("held", func(ci *jetstream.ConsumerInfo) bool { return ci.NumAckPending == 2 && ci.NumPending == 3 })
	if n := g.starts.Load(); n != 2 {
		t.Errorf("%d calls started, want 2", n)
	}
	g.release()
	for i := range 5 {
		if res, _ := e.result(fmt.Sprintf("p%d", i)); res.State != planbus.ToolSucceeded {
			t.Errorf("call %d: %s %+v", i, res.State, res.Error)
		}
	}
	e.waitSettled("held")
}

func TestCallTimeout(t *testing.T) {
	e := newEnv(t)
	g := newGate("stuck")
	e.startWorker(worker.Config{Skills: []skill.Skill{g.skill()}})
	tc := newCall("p1", "t", "stuck", `{}`)
	tc.TimeoutMs = 100
	e.publish(tc)
	res, _ := e.result("p1")
	if res.State != planbus.ToolTimeout || errorCode(res) != planbus.CodeToolTimeout || res.Error.Category != planbus.CategoryTimeout {
		t.Errorf("result %s %+v, want timeout with TOOL_TIMEOUT", res.State, res.Error)
	}
	if end := receive(t, g.ended, "the call ending"); !errors.Is(end.cause, context.DeadlineExceeded) {
		t.Errorf("the call's context ended with %v, want its deadline", end.cause)
	}
	e.waitSettled("stuck")
}

// A call delivered again after its result was stored (its ack was lost)
// runs again, but its second result has the same id and is dropped.
func TestRepeatedCallHasOneResult(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int64
	e.startWorker(worker.Config{Skills: []skill.Skill{counting("count", &runs)}})
	tc := newCall("p1", "t", "count", `{}`)
	data, err := json.Marshal(tc)
	if err != nil {
		t.Fatal(err)
	}
	// Different message ids get both past the queue's de-duplication, as
	// a call published again after the server forgot the first one's id
	// would. The worker knows the call by its plan, tool, attempt and
	// token: the second message waits for the first one's run, or comes
	// after it was settled, and is acknowledged, not run.
	e.publishRaw("count", data, jetstream.WithMsgID("first"))
	e.publishRaw("count", data, jetstream.WithMsgID("second"))
	e.waitSettled("count")
	if n := runs.Load(); n != 1 {
		t.Fatalf("the call ran %d times, want once", n)
	}
	if n := e.resultCount("p1"); n != 1 {
		t.Errorf("%d results, want 1", n)
	}
}

func TestSkillsAreAdvertised(t *testing.T) {
	e := newEnv(t)
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Sleep()}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	kv, err := e.conn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "sleep")
	if err != nil {
		t.Fatalf("sleep is not advertised: %v", err)
	}
	var m skill.Manifest
	if err := json.Unmarshal(entry.Value(), &m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "sleep" || len(m.InputSchema) == 0 {
		t.Errorf("advertised manifest %s", entry.Value())
	}
}

// A worker whose skill is advertised with another manifest (another
// program's skill of the same name, or another version) says so: its calls
// would be shared with the other's workers. The same manifest again (a
// restart) says nothing.
func TestAnotherManifestForTheSameSkillIsNamed(t *testing.T) {
	e := newEnv(t)
	var first, same, other bustest.SyncBuffer
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}}, worker.WithLogger(jsonLog(&first, slog.LevelDebug)))
	e.startWorker(worker.Config{Skills: []skill.Skill{skills.Echo()}}, worker.WithLogger(jsonLog(&same, slog.LevelDebug)))
	mine := skillOf("echo", func(context.Context, *skill.Call) (skill.Result, error) { return skill.Result{}, nil })
	mine.Manifest.Version = "mine"
	e.startWorker(worker.Config{Skills: []skill.Skill{mine}}, worker.WithLogger(jsonLog(&other, slog.LevelDebug)))
	for name, l := range map[string]*bustest.SyncBuffer{"the first": &first, "the same manifest again": &same} {
		if strings.Contains(l.String(), "another manifest") {
			t.Errorf("%s warned of another manifest:\n%s", name, l.String())
		}
	}
	if !strings.Contains(other.String(), "advertised with another manifest") || !strings.Contains(other.String(), `"version":"mine"`) {
		t.Errorf("the worker with another manifest for echo did not say so:\n%s", other.String())
	}
}

// A worker started before planbus (its own process, first up in a compose
// file) waits for the streams, saying so, and serves once a planner or
// dispatcher has made them; one whose context ends first says what was
// missing.
func TestRunWaitsForPlanbus(t *testing.T) {
	cfg := bustest.StartBare(t)
	e := &env{t: t, cfg: cfg, conn: bustest.Dial(t, cfg)}
	var logs bustest.SyncBuffer
	nc := bustest.Dial(t, cfg).NC
	w, err := worker.New(nc, worker.Config{Skills: []skill.Skill{skills.Echo()}}, worker.WithLogger(jsonLog(&logs, slog.LevelDebug)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	e.eventually("the worker saying it waits", func(context.Context) (bool, string) {
		return strings.Contains(logs.String(), "waiting for planbus: bucket planbus-skills is not there yet"), logs.String()
	})
	dctx, dcancel := context.WithTimeout(context.Background(), wait)
	defer dcancel()
	if err := e.conn.Declare(dctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("Run returned %v before it served", err)
	case <-time.After(wait):
		t.Fatal("the worker did not serve after the streams were made")
	}
	e.publish(newCall("p1", "t", "echo", `{"x":1}`))
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Errorf("result %s %+v, want succeeded", res.State, res.Error)
	}

	bare := bustest.StartBare(t)
	w2, err := worker.New(bustest.Dial(t, bare).NC, worker.Config{Skills: []skill.Skill{skills.Echo()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := w2.Run(ctx2); err == nil || !strings.Contains(err.Error(), "bucket planbus-skills: not there") {
		t.Errorf("Run with no planbus until its context ended: %v, want an error naming the bucket", err)
	}
}

// A call whose input breaks its skill's input schema fails without the
// handler running.
func TestInputIsCheckedAgainstTheSkillsSchema(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int64
	typed := counting("typed", &runs)
	typed.Manifest.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	e.startWorker(worker.Config{Skills: []skill.Skill{typed}})

	e.publish(newCall("bad", "t", "typed", `{"n":"seven"}`))
	res, _ := e.result("bad")
	if res.State != planbus.ToolFailed || errorCode(res) != planbus.CodeInvalidInput || res.Error.Category != planbus.CategoryInvalidInput {
		t.Errorf("result %s %+v, want failed INVALID_INPUT", res.State, res.Error)
	}
	if res.Error != nil && !strings.Contains(res.Error.Message, "/n") {
		t.Errorf("message %q does not name the bad field /n", res.Error.Message)
	}
	e.publish(newCall("good", "t", "typed", `{"n":7}`))
	if res, _ := e.result("good"); res.State != planbus.ToolSucceeded {
		t.Errorf("a call with valid input: %s %+v", res.State, res.Error)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1 (only for the valid input)", n)
	}
}

// A handler gets the call's metadata, input and timeout, and none of the
// tokens of the message it came in.
func TestHandlerGetsTheCallsMetadata(t *testing.T) {
	e := newEnv(t)
	got := make(chan skill.Call, 1)
	var deadline time.Duration
	e.startWorker(worker.Config{ID: "w-1", Skills: []skill.Skill{skillOf("probe", func(ctx context.Context, call *skill.Call) (skill.Result, error) {
		if d, ok := ctx.Deadline(); ok {
			deadline = time.Until(d)
		}
		got <- *call
		return skill.Result{}, nil
	})}})

	tc := newCall("p1", "look", "probe", `{"n":1}`)
	tc.Attempt, tc.MaxAttempts, tc.TimeoutMs = 2, 3, 30_000
	tc.IdempotencyKey, tc.Token = planbus.IdempotencyKey("p1", "look", 2), key.Result("p1", "look", 2)
	e.publish(tc)
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	call := receive(t, got, "the handler's call")
	want := skill.Call{PlanID: "p1", RequestID: "req-p1", ToolID: "look", Skill: "probe", Attempt: 2, MaxAttempts: 3,
		Input: json.RawMessage(`{"n":1}`), Timeout: 30 * time.Second, ReleasedAt: call.ReleasedAt}
	if diff := cmp.Diff(want, call); diff != "" {
		t.Errorf("handler's call (-want +got):\n%s", diff)
	}
	if !call.ReleasedAt.Equal(tc.ReleasedAt) {
		t.Errorf("ReleasedAt %v, want the message's %v", call.ReleasedAt, tc.ReleasedAt)
	}
	if k := call.IdempotencyKey(); k != tc.IdempotencyKey {
		t.Errorf("IdempotencyKey %q, want the message's %q", k, tc.IdempotencyKey)
	}
	if deadline <= 0 || deadline > 30*time.Second {
		t.Errorf("ctx's deadline %v away, want at most the call's 30s", deadline)
	}
}

// A server that crashed can come back with a stream's sequences rolled
// back (nats-server's file store, after a kill -9: a call acknowledged a
// moment before the crash and the first call stored after it had the same
// sequence), so the sequence of a call delivered again is not what a
// worker knows it by: a new call with the sequence of one this worker
// settled runs. The rollback is made here by creating the stream again
// from the sequence of the settled call.
func TestACallWithTheSequenceOfOneSettledBeforeRuns(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int64
	e.startWorker(worker.Config{Skills: []skill.Skill{counting("count", &runs)}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	e.publish(newCall("p1", "t", "count", `{}`))
	if res, _ := e.result("p1"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	e.waitSettled("count")

	st, err := e.conn.JS.Stream(ctx, bus.StreamTools)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := e.conn.JS.Consumer(ctx, bus.StreamTools, bus.SkillConsumer("count"))
	if err != nil {
		t.Fatal(err)
	}
	settledSeq := cons.CachedInfo().AckFloor.Stream
	scfg, ccfg := st.CachedInfo().Config, cons.CachedInfo().Config
	if err := e.conn.JS.DeleteStream(ctx, bus.StreamTools); err != nil {
		t.Fatal(err)
	}
	scfg.FirstSeq = settledSeq
	if _, err := e.conn.JS.CreateStream(ctx, scfg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.JS.CreateConsumer(ctx, bus.StreamTools, ccfg); err != nil {
		t.Fatal(err)
	}
	e.publish(newCall("p2", "t", "count", `{}`))
	if res, _ := e.result("p2"); res.State != planbus.ToolSucceeded {
		t.Fatalf("result %s %+v, want succeeded", res.State, res.Error)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}
}

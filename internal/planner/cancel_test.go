package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/skill"
)

// hold is a skill that runs until its context ends, and says on stopped
// when it did (the worker cancelled the call).
func hold(started, stopped chan<- string) skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{Name: "hold", TimeoutMs: 60000},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			started <- call.PlanID + "/" + call.ToolID
			<-ctx.Done()
			stopped <- call.PlanID + "/" + call.ToolID
			return skill.Result{}, ctx.Err()
		}),
	}
}

// watchEvents follows a request's events in the background until the test
// ends.
func (h *harness) watchEvents(requestID string) *events {
	h.t.Helper()
	all := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	go func() { _, _ = h.c.Watch(ctx, requestID, all.add) }()
	return all
}

// waitFor waits until an event of type typ (and tool, if not empty) has
// arrived.
func (e *events) waitFor(t *testing.T, typ planbus.EventType, tool string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, ev := range e.of(typ) {
			if tool == "" || ev.ToolID == tool {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event of %q within 30s", typ, tool)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) await(requestID string) *planbus.Outcome {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := h.c.Await(ctx, requestID)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) cancel(id, reason string) *planbus.CancelReply {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := h.c.Cancel(ctx, id, reason)
	if err != nil {
		h.t.Fatalf("cancel %s: %v", id, err)
	}
	return reply
}

func (h *harness) submit(doc string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acc, err := h.c.SubmitRequest(ctx, []byte(doc))
	if err != nil {
		h.t.Fatal(err)
	}
	return acc.RequestID
}

func toolStates(res *planbus.ExecutionResult) map[string]string {
	out := map[string]string{}
	for _, o := range res.Tools {
		out[o.ToolID] = string(o.State) + "/" + string(o.Reason)
	}
	return out
}

// A cancel of a running request stops its plan: the running call's
// context is cancelled on the worker, the plan ends cancelled with the
// running tool cancelled and the pending ones skipped (reason cancelled),
// and the request ends cancelled without a replan or fallback, with an
// event for each.
func TestCancelStopsARunningRequest(t *testing.T) {
	started, stopped := make(chan string, 4), make(chan string, 4)
	h := start(t, planner.Config{}, append(simulated(t), hold(started, stopped)))
	id := h.submit(`{"requestId":"c1","kind":"plan","maxAttempts":3,"plan":{"tools":[
		{"toolId":"S","skill":"hold"},
		{"toolId":"T","skill":"sleep","input":{"ms":30000}},
		{"toolId":"D","skill":"echo","dependencies":["S"]}]}}`)
	all := h.watchEvents(id)
	all.waitFor(t, planbus.EventToolStarted, "S")
	all.waitFor(t, planbus.EventToolStarted, "T")

	reply := h.cancel(id, "changed my mind")
	if reply.Status != planbus.CancelCancelling || reply.RequestID != "c1" || reply.PlanID != "c1-1" {
		t.Fatalf("reply %+v, want cancelling plan c1-1", reply)
	}
	select {
	case got := <-stopped:
		if got != "c1-1/S" {
			t.Errorf("stopped %s, want c1-1/S", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the running call's context was not cancelled within 10s")
	}
	out := h.await(id)
	if out.Status != planbus.StatusCancelled || out.Success || out.Fallback || out.Attempts != 1 {
		t.Fatalf("outcome %s (success %v, fallback %v) after %d attempts, want cancelled after 1", out.Status, out.Success, out.Fallback, out.Attempts)
	}
	if out.Error == nil || out.Error.Code != planbus.CodeCancelled || !strings.Contains(out.Error.Message, "changed my mind") {
		t.Errorf("outcome error %+v, want CANCELLED with the reason", out.Error)
	}
	res := out.Execution
	if res == nil || res.State != planbus.PlanCancelled || res.CanReplan {
		t.Fatalf("execution %+v, want cancelled without replan", res)
	}
	want := map[string]string{"S": "cancelled/cancelled", "T": "cancelled/cancelled", "D": "skipped/cancelled"}
	if got := toolStates(res); !maps.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	all.waitFor(t, "request.cancelled", "")
	for _, typ := range []planbus.EventType{planbus.EventPlanCancelled, planbus.EventToolCancelled, planbus.EventToolSkipped, planbus.EventRequestCancelled} {
		if len(all.of(typ)) == 0 {
			t.Errorf("no %s event", typ)
		}
	}
	if n := len(all.of("request.generating")); n != 1 {
		t.Errorf("%d generations, want 1: a cancelled request is not replanned", n)
	}

	// Cancelled again: a no-op that says so.
	again := h.cancel(id, "")
	if again.Status != planbus.CancelEnded || again.Ended != string(planbus.StatusCancelled) {
		t.Errorf("second cancel %+v, want ended (cancelled)", again)
	}
	// By plan id, the same.
	if r := h.cancel("c1-1", ""); r.Status != planbus.CancelEnded || r.RequestID != "c1" {
		t.Errorf("cancel by plan id %+v, want the request's: ended", r)
	}
}

// Cancelling a request that ended is a no-op that says how it ended; its
// outcome does not change.
func TestCancelOfAnEndedRequestChangesNothing(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	out, _ := h.request(`{"requestId":"done1","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`)
	if !out.Success {
		t.Fatalf("outcome %+v", out)
	}
	reply := h.cancel("done1", "too late")
	if reply.Status != planbus.CancelEnded || reply.Ended != string(planbus.StatusSucceeded) || !strings.Contains(reply.Message, "already ended") {
		t.Fatalf("reply %+v, want ended (succeeded)", reply)
	}
	if again := h.await("done1"); again.Status != planbus.StatusSucceeded {
		t.Errorf("outcome after the cancel: %s, want succeeded still", again.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.c.Cancel(ctx, "nosuchrequest", "")
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("cancel of an unknown id: %v, want not found", err)
	}
	for _, body := range []string{`{}`, `{"requestId":"a","planId":"b"}`, `{"requestId":"a.b"}`, `not json`,
		`{"requestId":"a","reason":"` + strings.Repeat("x", 2000) + `"}`} {
		m, err := h.conn.NC.RequestWithContext(ctx, bus.SubjectPlanCancel, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var rej planbus.Rejected
		if m.Header.Get("Nats-Service-Error-Code") != "400" || json.Unmarshal(m.Data, &rej) != nil || rej.Error.Code != planbus.CodeInvalidRequest {
			t.Errorf("cancel %.40s: %s %s, want an INVALID_REQUEST rejection", body, m.Header.Get("Nats-Service-Error-Code"), m.Data)
		}
	}
}

// A request still generating (here, waiting for an external planner that
// does not answer) is cancelled at once: no plan is published, the
// outcome says cancelled.
func TestCancelDuringGeneration(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	asked := make(chan struct{}, 8)
	sub, err := h.conn.NC.Subscribe("planners.silent", func(*nats.Msg) { asked <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	id := h.submit(`{"requestId":"gen1","kind":"external","planner":"planners.silent","maxAttempts":3}`)
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the external planner was never asked")
	}
	reply := h.cancel(id, "")
	if reply.Status != planbus.CancelCancelled {
		t.Fatalf("reply %+v, want cancelled at once", reply)
	}
	out := h.await(id)
	if out.Status != planbus.StatusCancelled || out.Execution != nil || out.Fallback {
		t.Fatalf("outcome %+v, want cancelled without a plan", out)
	}
	// The generation was stopped and nothing came of it: the loop stays
	// ended, with no plan published for any attempt.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := h.c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Request.Status != planbus.StatusCancelled || st.Plan != nil {
		t.Errorf("status %+v plan %+v, want cancelled and no plan", st.Request, st.Plan)
	}
	plans, err := h.conn.JS.Stream(ctx, bus.StreamPlans)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if _, err := plans.GetLastMsgForSubject(ctx, bus.Partitioned(bus.SubjectPlansAll).Of(fmt.Sprintf("%s-%d", id, n))); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("plan of attempt %d: %v, want none published", n, err)
		}
	}
}

// The cancel is durable: asked for while no dispatcher runs, it waits in
// the TIMERS stream, and a planner that restarts meanwhile still ends the
// request cancelled from the loop's stored mark.
func TestCancelSurvivesDispatcherAndPlannerRestarts(t *testing.T) {
	started, stopped := make(chan string, 4), make(chan string, 4)
	h := start(t, planner.Config{}, append(simulated(t), hold(started, stopped)))
	id := h.submit(`{"requestId":"dur1","kind":"plan","plan":{"tools":[
		{"toolId":"S","skill":"hold"},{"toolId":"D","skill":"echo","dependencies":["S"]}]}}`)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never started")
	}
	h.node.Dispatchers[0].Stop()
	reply := h.cancel(id, "restarts")
	if reply.Status != planbus.CancelCancelling {
		t.Fatalf("reply %+v, want cancelling", reply)
	}
	// The planner restarts while the cancel waits for a dispatcher.
	h.node.Planners[0].Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.node.AddPlanner(ctx, planner.Config{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	st, err := h.c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Request.Status != planbus.RequestCancelling || st.Plan == nil || st.Plan.State != planbus.PlanRunning {
		t.Fatalf("with no dispatcher: request %s, plan %+v; want cancelling and the plan still running", st.Request.Status, st.Plan)
	}
	if _, err := h.node.AddDispatcher(ctx, dispatcher.Config{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	out := h.await(id)
	if out.Status != planbus.StatusCancelled || out.Execution == nil || out.Execution.State != planbus.PlanCancelled {
		t.Fatalf("outcome %s, execution %+v; want cancelled", out.Status, out.Execution)
	}
	if got, want := toolStates(out.Execution), map[string]string{"S": "cancelled/cancelled", "D": "skipped/cancelled"}; !maps.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Error("the call was not stopped once a dispatcher took the cancel")
	}
}

// A plan published without a request is cancelled alone, by its id.
func TestCancelOfAPlanWithoutARequest(t *testing.T) {
	started, stopped := make(chan string, 4), make(chan string, 4)
	h := start(t, planner.Config{}, append(simulated(t), hold(started, stopped)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan *planbus.ExecutionResult, 1)
	go func() {
		res, err := h.c.ExecutePlan(ctx, []byte(`{"planId":"solo","tools":[{"toolId":"S","skill":"hold"},{"toolId":"E","skill":"echo","dependencies":["S"]}]}`), nil)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	if reply := h.cancel("solo", ""); reply.Status != planbus.CancelCancelling || reply.PlanID != "solo" {
		t.Fatalf("reply %+v, want the plan cancelling", reply)
	}
	res := <-done
	if res == nil || res.State != planbus.PlanCancelled {
		t.Fatalf("result %+v, want cancelled", res)
	}
	if got, want := toolStates(res), map[string]string{"S": "cancelled/cancelled", "E": "skipped/cancelled"}; !maps.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	if reply := h.cancel("solo", ""); reply.Status != planbus.CancelEnded || reply.Ended != string(planbus.PlanCancelled) {
		t.Errorf("cancel again: %+v, want ended", reply)
	}
}

// planbus.plan.list lists requests, the most recently accepted first,
// filtered by status and session.
func TestListRequests(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	for i, doc := range []string{
		`{"requestId":"l1","sessionId":"s1","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`,
		`{"requestId":"l2","sessionId":"s2","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"fail","input":{"category":"permanent"}}]}}`,
		`{"requestId":"l3","sessionId":"s1","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`,
	} {
		if out, _ := h.request(doc); (i == 1) == out.Success {
			t.Fatalf("request %d: %s", i, out.Status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := func(q planbus.ListRequest) ([]string, *planbus.ListReply) {
		t.Helper()
		r, err := h.c.Inspector().List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range r.Requests {
			out = append(out, s.RequestID)
		}
		return out, r
	}
	all, r := ids(planbus.ListRequest{})
	if !slices.Equal(all, []string{"l3", "l2", "l1"}) || r.More {
		t.Fatalf("list %v (more %v), want [l3 l2 l1]", all, r.More)
	}
	s := r.Requests[1]
	if s.Kind != "plan" || s.SessionID != "s2" || s.Status != "fallback" || s.Attempts != 1 || s.PlanID != "l2-1" || s.AcceptedAt.IsZero() {
		t.Errorf("l2: %+v", s)
	}
	if got, _ := ids(planbus.ListRequest{SessionID: "s1"}); !slices.Equal(got, []string{"l3", "l1"}) {
		t.Errorf("session s1: %v", got)
	}
	if got, _ := ids(planbus.ListRequest{Status: "succeeded"}); !slices.Equal(got, []string{"l3", "l1"}) {
		t.Errorf("succeeded: %v", got)
	}
	if got, r := ids(planbus.ListRequest{Limit: 2}); !slices.Equal(got, []string{"l3", "l2"}) || !r.More {
		t.Errorf("limit 2: %v more %v, want [l3 l2] and more", got, r.More)
	}
	m, err := h.conn.NC.RequestWithContext(ctx, bus.SubjectPlanList, []byte(`{"status":"bogus"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), "/status") || m.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Errorf("bad status: %s, want a rejection naming /status", m.Data)
	}
}

// Run's context bounds every handler: a planner stopped while a request
// waits for its external planner returns at once, and the request, not
// failed, is left for the next planner.
func TestPlannerStopsPromptlyWhileAHandlerIsBusy(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	asked := make(chan struct{}, 8)
	sub, err := h.conn.NC.Subscribe("planners.slow", func(*nats.Msg) { asked <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	id := h.submit(`{"requestId":"busy1","kind":"external","planner":"planners.slow","maxAttempts":2}`)
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the external planner was never asked")
	}
	stopped := make(chan struct{})
	go func() {
		h.node.Planners[0].Stop()
		close(stopped)
	}()
	// The generation has a 5 s budget; a handler that did not work within
	// Run's context would hold Stop for the rest of it.
	select {
	case <-stopped:
	case <-time.After(generator.GenerationTimeout - time.Second):
		t.Fatal("the planner did not stop while its handler waited for the external planner")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := h.c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Request.History) != 0 || st.Request.Status != planbus.RequestGenerating {
		t.Errorf("after the stop: status %s, history %+v; want the attempt not recorded, to be generated again", st.Request.Status, st.Request.History)
	}
}

package planner_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/planner"
)

// decide approves (or rejects) a tool through the endpoint.
func (h *harness) decide(approve bool, id, tool, reason string) (*planbus.ApproveReply, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if approve {
		return h.c.Approve(ctx, id, tool, reason)
	}
	return h.c.Reject(ctx, id, tool, reason)
}

// wantRefusal checks that err is the planner's refusal with code, naming
// field.
func wantRefusal(t *testing.T, what string, err error, code planbus.Code, field string) {
	t.Helper()
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Code != code || rej.Reply.Error.Field != field {
		t.Errorf("%s: got %v, want a %s refusal at %s", what, err, code, field)
		return
	}
	if rej.Reply.Error.Message == "" {
		t.Errorf("%s: a refusal without a message", what)
	}
}

const approvalPlan = `{"requestId":"%s","kind":"plan","maxAttempts":3,"plan":{"tools":[
	{"toolId":"build","skill":"count"},
	{"toolId":"deploy","skill":"count","dependencies":["build"],"approval":{"prompt":"Deploy the build to production?"}},
	{"toolId":"notify","skill":"count","dependencies":["deploy"]}]}}`

// An approval step waits for a person: nothing that depends on it runs
// before the approval, and the dependent runs after it. Approving an
// unknown id or tool, a tool that is not ready, or a tool twice gets a
// clear refusal.
func TestApprovalStepWaitsForAPerson(t *testing.T) {
	cnt := newCounter()
	h := start(t, planner.Config{}, append(simulated(t), cnt.skill("count")))
	id := h.submit(fmt.Sprintf(approvalPlan, "ap"))
	all := h.watchEvents(id)
	all.waitFor(t, planbus.EventToolWaiting, "deploy")
	if ev := all.of(planbus.EventToolWaiting)[0]; ev.Message != "Deploy the build to production?" {
		t.Errorf("waiting event says %q, want the prompt", ev.Message)
	}
	if got := cnt.of("ap"); !maps.Equal(got, map[string]int{"build": 1}) {
		t.Fatalf("before the approval: executions %v, want only build", got)
	}
	st, err := h.c.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Plan.Tools[1]; d.State != planbus.ToolWaitingApproval || d.Prompt != "Deploy the build to production?" {
		t.Errorf("status of deploy: %+v", d)
	}

	_, err = h.decide(true, "nosuch", "deploy", "")
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown request: got %v, want ErrNotFound", err)
	}
	_, err = h.decide(true, id, "nosuch", "")
	wantRefusal(t, "unknown tool", err, planbus.CodeNotFound, "/toolId")
	_, err = h.decide(true, id, "notify", "")
	wantRefusal(t, "a tool with no approval step", err, planbus.CodeNotWaiting, "/toolId")
	_, err = h.decide(true, id, "build", "")
	wantRefusal(t, "a tool that has run", err, planbus.CodeNotWaiting, "/toolId")

	reply, err := h.decide(true, "ap-1", "deploy", "checked the changelog")
	if err != nil {
		t.Fatal(err)
	}
	if reply.Status != planbus.ApproveApproved || reply.PlanID != "ap-1" || reply.RequestID != "ap" || reply.ToolID != "deploy" {
		t.Errorf("reply %+v", reply)
	}
	_, err = h.decide(false, id, "deploy", "")
	wantRefusal(t, "a second decision", err, planbus.CodeNotWaiting, "/toolId")

	out := h.await(id)
	if !out.Success {
		t.Fatalf("outcome %s: %+v", out.Status, out.Error)
	}
	if got := cnt.of("ap"); !maps.Equal(got, map[string]int{"build": 1, "deploy": 1, "notify": 1}) {
		t.Errorf("executions %v, want each tool once", got)
	}
	all.waitFor(t, planbus.EventToolApproved, "deploy")
	if ev := all.of(planbus.EventToolApproved)[0]; ev.Message != "checked the changelog" {
		t.Errorf("approved event says %q", ev.Message)
	}
	_, err = h.decide(true, id, "deploy", "")
	wantRefusal(t, "a request that ended", err, planbus.CodeNotWaiting, "/requestId")
}

// A rejection fails the tool with code REJECTED and the request with it,
// at once: no replan asks the person again, no fallback.
func TestRejectedApprovalFailsTheRequest(t *testing.T) {
	cnt := newCounter()
	h := start(t, planner.Config{}, append(simulated(t), cnt.skill("count")))
	id := h.submit(fmt.Sprintf(approvalPlan, "rj"))
	h.watchEvents(id).waitFor(t, planbus.EventToolWaiting, "deploy")
	reply, err := h.decide(false, id, "deploy", "not on a Friday")
	if err != nil || reply.Status != planbus.ApproveRejected {
		t.Fatalf("reply %+v, %v", reply, err)
	}
	out := h.await(id)
	if out.Status != planbus.StatusFailed || out.Attempts != 1 || out.Error == nil || out.Error.Code != planbus.CodeRejected {
		t.Fatalf("outcome %s after %d attempts, error %+v; want failed with REJECTED after 1", out.Status, out.Attempts, out.Error)
	}
	got := toolStates(out.Execution)
	if want := map[string]string{"build": "succeeded/", "deploy": "failed/", "notify": "skipped/dependency_failed"}; !maps.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
	if d := out.Execution.Tools[1]; d.Error == nil || d.Error.Message != "rejected by a person: not on a Friday" {
		t.Errorf("deploy's error %+v", d.Error)
	}
	if got := cnt.of("rj"); !maps.Equal(got, map[string]int{"build": 1}) {
		t.Errorf("executions %v, want only build", got)
	}
}

// A tool waiting for approval survives its dispatcher: approved while no
// dispatcher runs, it is released once one runs again.
func TestApprovalSurvivesADispatcherRestart(t *testing.T) {
	cnt := newCounter()
	h := start(t, planner.Config{}, append(simulated(t), cnt.skill("count")))
	id := h.submit(fmt.Sprintf(approvalPlan, "rs"))
	h.watchEvents(id).waitFor(t, planbus.EventToolWaiting, "deploy")
	h.node.Dispatchers[0].Stop()
	if _, err := h.decide(true, id, "deploy", ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := cnt.of("rs"); !maps.Equal(got, map[string]int{"build": 1}) {
		t.Fatalf("with no dispatcher: executions %v", got)
	}
	if _, err := h.node.AddDispatcher(ctx, dispatcher.Config{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	out := h.await(id)
	if !out.Success {
		t.Fatalf("outcome %s: %+v", out.Status, out.Error)
	}
	if got := cnt.of("rs"); !maps.Equal(got, map[string]int{"build": 1, "deploy": 1, "notify": 1}) {
		t.Errorf("executions %v", got)
	}
}

// An approval waits past the plan's timeout (here 2 s for the default
// 60 s, and the decision after 3 s for 90 s): the plan's clock stands
// while a tool waits for approval. planner ls --waiting lists the request
// meanwhile, with the tool, and not once it is decided. The tool waits
// from the plan's start, so no busy machine can spend the plan's time
// before it.
func TestApprovalWaitsPastThePlansTimeout(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := h.submit(`{"requestId":"slow-person","kind":"plan","plan":{"timeoutMs":2000,"tools":[
		{"toolId":"deploy","skill":"echo","approval":{"prompt":"Deploy?"}},
		{"toolId":"notify","skill":"echo","dependencies":["deploy"]}]}}`)
	all := h.watchEvents(id)
	all.waitFor(t, planbus.EventToolWaiting, "deploy")
	waitingSince := time.Now()
	list, err := h.c.Inspector().List(ctx, planbus.ListRequest{Waiting: true})
	if err != nil || len(list.Requests) != 1 || list.Requests[0].RequestID != id || !slices.Equal(list.Requests[0].Waiting, []string{"deploy"}) {
		t.Fatalf("ls --waiting: %+v, %v; want %s waiting on deploy", list, err, id)
	}
	// The plan's own timeout passes, and more.
	bustest.Eventually(t, time.Minute, "one and a half plan timeouts", func() (bool, string) {
		return time.Since(waitingSince) > 3*time.Second, "waiting"
	})
	if evs := all.of(planbus.EventPlanTimeout); len(evs) != 0 {
		t.Fatalf("the plan timed out while a person was asked: %+v", evs)
	}
	if _, err := h.decide(true, id, "deploy", "finally"); err != nil {
		t.Fatal(err)
	}
	out := h.await(id)
	if !out.Success {
		t.Fatalf("outcome %s (%+v), want success", out.Status, out.Execution)
	}
	list, err = h.c.Inspector().List(ctx, planbus.ListRequest{Waiting: true})
	if err != nil || len(list.Requests) != 0 {
		t.Errorf("ls --waiting after the decision: %+v, %v; want none", list, err)
	}
}

// After an approval the plan's clock runs again from where it stood: a
// plan of timeoutMs 1000 that waited 1.5 s for a person times out after
// the approval while its last tool, a minute's sleep, still runs (its new
// deadline's timeout is stored anew, not taken for the first one again).
func TestAfterAnApprovalThePlanTimesOutAtItsMovedDeadline(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	id := h.submit(`{"requestId":"moved","kind":"plan","plan":{"timeoutMs":1000,"tools":[
		{"toolId":"deploy","skill":"echo","approval":{"prompt":"Deploy?"}},
		{"toolId":"settle","skill":"sleep","dependencies":["deploy"],"input":{"ms":60000},"timeoutMs":120000}]}}`)
	all := h.watchEvents(id)
	all.waitFor(t, planbus.EventToolWaiting, "deploy")
	waitingSince := time.Now()
	bustest.Eventually(t, time.Minute, "a wait past the timeout", func() (bool, string) {
		return time.Since(waitingSince) > 1500*time.Millisecond, "waiting"
	})
	if _, err := h.decide(true, id, "deploy", ""); err != nil {
		t.Fatal(err)
	}
	out := h.await(id)
	if out.Execution == nil || out.Execution.State != planbus.PlanTimeout {
		t.Fatalf("outcome %s (%+v), want the plan timed out", out.Status, out.Execution)
	}
	if s := out.Execution.Tools[1]; s.State != planbus.ToolCancelled {
		t.Errorf("settle %s, want cancelled by the plan's timeout", s.State)
	}
}

package dispatcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

const minute = time.Minute

func TestDiamondMiddleToolsRunInParallel(t *testing.T) {
	h := start(t, opts{})
	res, _ := h.run(`{"tools":[
		{"toolId":"A","skill":"probe"},
		{"toolId":"B","skill":"probe","dependencies":["A"],"input":{"ms":300}},
		{"toolId":"C","skill":"probe","dependencies":["A"],"input":{"ms":300}},
		{"toolId":"D","skill":"probe","dependencies":["B","C"],"input":{"b":{"$ref":"B#/tool"},"c":{"$ref":"C#/tool"}}}]}`, minute)
	if !res.Success {
		t.Fatalf("plan failed: %+v", res.Error)
	}
	h.probe.mu.Lock()
	b, c, a, d := h.probe.spans["B"], h.probe.spans["C"], h.probe.spans["A"], h.probe.spans["D"]
	h.probe.mu.Unlock()
	if !(b[0].Before(c[1]) && c[0].Before(b[1])) {
		t.Errorf("B %v and C %v did not overlap", b, c)
	}
	if a[1].After(b[0]) || a[1].After(c[0]) || d[0].Before(b[1]) || d[0].Before(c[1]) {
		t.Errorf("dependency order broken: A %v B %v C %v D %v", a, b, c, d)
	}
	if got, want := string(tool(res, "D").Output), `{"input":{"b":"B","c":"C"},"tool":"D"}`; got != want {
		t.Errorf("D output %s, want %s (references resolved)", got, want)
	}
}

func TestConcurrencyCapIsNeverExceeded(t *testing.T) {
	h := start(t, opts{})
	var tools []string
	for i := range 12 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"t%d","skill":"probe","input":{"ms":100}}`, i))
	}
	res, _ := h.run(`{"maxConcurrency":3,"tools":[`+strings.Join(tools, ",")+`]}`, minute)
	if !res.Success {
		t.Fatalf("plan failed: %+v", res.Error)
	}
	h.probe.mu.Lock()
	seen := h.probe.maxSeen
	h.probe.mu.Unlock()
	if seen != 3 {
		t.Errorf("at most %d calls ran at once, want exactly the cap 3", seen)
	}
}

func TestRetriesAreSpacedByTheBackoffFormula(t *testing.T) {
	h := start(t, opts{})
	res, log := h.run(`{"tools":[{"toolId":"F","skill":"fail","input":{"attempts":3,"category":"network"},
		"retryPolicy":{"maxAttempts":4,"backoffMs":100}}]}`, minute)
	if !res.Success || tool(res, "F").Attempts != 4 {
		t.Fatalf("result %+v, want success on attempt 4", res)
	}
	var delays []int64
	for _, ev := range log.of(planbus.EventToolRetrying, "F") {
		delays = append(delays, ev.DelayMs)
	}
	if !slices.Equal(delays, []int64{100, 200, 400}) {
		t.Errorf("retry delays %v, want [100 200 400]", delays)
	}
	starts := log.of(planbus.EventToolStarted, "F")
	if len(starts) != 4 {
		t.Fatalf("%d starts, want 4", len(starts))
	}
	for k := 1; k < 4; k++ {
		gap := starts[k].Time.Sub(starts[k-1].Time)
		want := time.Duration(100<<(k-1)) * time.Millisecond
		if gap < want {
			t.Errorf("attempt %d started %s after attempt %d, want at least %s", k+1, gap, k, want)
		}
	}
}

// A retry's timer comes back when it is due after the dispatcher put it
// off (a second delivery, as after a crash), and the state it then reloads
// has the call the timer releases as outstanding too: the call is still
// published once. Twice in one batch, a replicated stream refused the
// second as "in process" and the batch was handed back with an error.
func TestARetryIsPublishedOnce(t *testing.T) {
	h := start(t, opts{})
	calls := make(chan *nats.Msg, 64)
	sub, err := h.conn.NC.ChanSubscribe(bus.ToolSubject("fail"), calls)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := h.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	res, _ := h.run(`{"planId":"once","tools":[{"toolId":"F","skill":"fail","input":{"attempts":2,"category":"network"},
		"retryPolicy":{"maxAttempts":3,"backoffMs":300}}]}`, minute)
	if !res.Success || tool(res, "F").Attempts != 3 {
		t.Fatalf("result %+v, want success on attempt 3", res)
	}
	// The last call's result is applied after all three were published,
	// so every publish of them has reached this subscription.
	if err := h.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	published := map[int]int{}
	for len(calls) > 0 {
		var c struct {
			PlanID  string `json:"planId"`
			Attempt int    `json:"attempt"`
		}
		if m := <-calls; json.Unmarshal(m.Data, &c) == nil && c.PlanID == "once" {
			published[c.Attempt]++
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		if published[attempt] != 1 {
			t.Errorf("attempt %d's call published %d times, want once (all: %v)", attempt, published[attempt], published)
		}
	}
}

func TestToolTimeout(t *testing.T) {
	h := start(t, opts{})
	res, _ := h.run(`{"tools":[{"toolId":"S","skill":"sleep","input":{"ms":60000},"timeoutMs":100,
		"retryPolicy":{"maxAttempts":2,"backoffMs":10}}]}`, minute)
	s := tool(res, "S")
	if res.Success || res.State != planbus.PlanFailed || s.State != planbus.ToolTimeout || s.Attempts != 2 {
		t.Fatalf("result %s/%s, tool %s after %d attempts", res.State, res.Error, s.State, s.Attempts)
	}
	if s.Error == nil || s.Error.Code != planbus.CodeToolTimeout || s.Error.Message != "Tool exceeded 100ms timeout" {
		t.Errorf("tool error %+v", s.Error)
	}
	if res.Error.Code != planbus.CodeToolTimeout || !res.CanReplan {
		t.Errorf("plan error %+v canReplan %v", res.Error, res.CanReplan)
	}
}

func TestPlanTimeoutCancelsRunningCalls(t *testing.T) {
	h := start(t, opts{})
	res, _ := h.run(`{"timeoutMs":300,"tools":[{"toolId":"P","skill":"probe","input":{"ms":60000}},
		{"toolId":"Q","skill":"probe","dependencies":["P"]}]}`, minute)
	if res.State != planbus.PlanTimeout || res.Error.Code != planbus.CodePlanTimeout || !res.CanReplan {
		t.Fatalf("result %s %+v", res.State, res.Error)
	}
	if p, q := tool(res, "P"), tool(res, "Q"); p.State != planbus.ToolCancelled || q.State != planbus.ToolSkipped || q.Reason != planbus.ReasonPlanTimeout {
		t.Errorf("P %s, Q %s/%s", p.State, q.State, q.Reason)
	}
	// The worker got the cancel and ended the call rather than sleeping on.
	waitFor(t, h.probe.finished, "P", 10*time.Second)
}

func TestRequiredFailureSkipsItsDependents(t *testing.T) {
	h := start(t, opts{})
	res, log := h.run(`{"tools":[{"toolId":"A","skill":"echo"},
		{"toolId":"B","skill":"fail","dependencies":["A"],"input":{"category":"permanent","message":"no"}},
		{"toolId":"C","skill":"echo","dependencies":["B"]},{"toolId":"D","skill":"echo","dependencies":["C"]}]}`, minute)
	if res.Success || res.State != planbus.PlanFailed || !res.CanReplan {
		t.Fatalf("result %+v", res)
	}
	for _, id := range []string{"C", "D"} {
		if o := tool(res, id); o.State != planbus.ToolSkipped || o.Reason != planbus.ReasonDependencyFailed {
			t.Errorf("%s: %s/%s, want skipped/dependency_failed", id, o.State, o.Reason)
		}
	}
	if b := tool(res, "B"); b.State != planbus.ToolFailed || b.Attempts != 1 {
		t.Errorf("B: %s after %d attempts (permanent errors are not retried)", b.State, b.Attempts)
	}
	if !slices.Equal(res.FailedSkills, []string{"fail"}) {
		t.Errorf("failed skills %v", res.FailedSkills)
	}
	if len(log.of(planbus.EventToolSkipped, "")) != 2 || len(log.of(planbus.EventPlanFailed, "")) != 1 {
		t.Errorf("events: %d skipped, %d plan.failed", len(log.of(planbus.EventToolSkipped, "")), len(log.of(planbus.EventPlanFailed, "")))
	}
}

func TestOptionalFailureContinuesWithNull(t *testing.T) {
	h := start(t, opts{})
	res, _ := h.run(`{"tools":[{"toolId":"A","skill":"fail","required":false,"retryPolicy":{"maxAttempts":1}},
		{"toolId":"B","skill":"echo","dependencies":["A"],"input":{"fromA":{"$ref":"A"},"k":1}}]}`, minute)
	if !res.Success {
		t.Fatalf("plan failed: %+v", res.Error)
	}
	if a, b := tool(res, "A"), tool(res, "B"); a.State != planbus.ToolFailed || string(b.Output) != `{"fromA":null,"k":1}` {
		t.Errorf("A %s, B output %s", a.State, b.Output)
	}
}

func TestBadPlansAreRejectedWithTheProblemNamed(t *testing.T) {
	h := start(t, opts{})
	tests := []struct{ name, doc, want string }{
		{"cycle", `{"tools":[{"toolId":"A","skill":"echo"},{"toolId":"B","skill":"echo","dependencies":["A","C"]},{"toolId":"C","skill":"echo","dependencies":["B"]}]}`,
			"cycle: B -> C -> B"},
		{"unknown dependency", `{"tools":[{"toolId":"D","skill":"echo","dependencies":["X"]}]}`, `tool "D" depends on unknown tool "X"`},
		{"unknown skill", `{"tools":[{"toolId":"A","skill":"teleport"}]}`, `unknown skill "teleport"`},
		{"schema", `{"tools":[{"toolId":"A","skill":"echo","timeoutMs":-5}]}`, "at /tools/0/timeoutMs"},
		// The harness's store keeps everything for the default 24 hours: a
		// plan allowed a whole day could outlive its own state.
		{"timeout beyond retention", `{"timeoutMs":86400000,"tools":[{"toolId":"A","skill":"echo"}]}`,
			"timeoutMs 86400000 (24h0m0s) does not fit the system's retention 24h0m0s less a minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, log := h.run(tt.doc, minute)
			if res.State != planbus.PlanRejected || res.Error == nil || res.Error.Code != planbus.CodeInvalidPlan {
				t.Fatalf("result %+v, want rejected", res)
			}
			if !strings.Contains(res.Error.Message, tt.want) {
				t.Errorf("message %q, want it to contain %q", res.Error.Message, tt.want)
			}
			if len(log.of(planbus.EventPlanRejected, "")) != 1 {
				t.Errorf("no plan.rejected event")
			}
		})
	}
	if n := h.probe.count("A"); n != 0 {
		t.Errorf("a rejected plan ran %d tools", n)
	}
}

func TestTwoWorkersBothReceiveWork(t *testing.T) {
	h := start(t, opts{workers: 2, concurrency: 1})
	var tools []string
	for i := range 8 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"t%d","skill":"probe","input":{"ms":50}}`, i))
	}
	res, _ := h.run(`{"maxConcurrency":8,"tools":[`+strings.Join(tools, ",")+`]}`, minute)
	if !res.Success {
		t.Fatalf("plan failed: %+v", res.Error)
	}
	workers := map[string]int{}
	for _, o := range res.Tools {
		workers[o.WorkerID]++
	}
	if len(workers) != 2 {
		t.Errorf("calls per worker %v, want both workers used", workers)
	}
}

func TestWorkerThatDiesMidCallIsReplaced(t *testing.T) {
	h := start(t, opts{workers: 1, concurrency: 1, ackWait: time.Second})
	done := h.submit(`{"tools":[{"toolId":"L","skill":"probe","input":{"ms":1500}}]}`, minute, nil)
	waitFor(t, h.probe.started, "L", 30*time.Second)
	h.node.Workers[0].Kill()
	if _, err := h.node.AddWorker(context.Background(), workerConfig(h.probe, opts{concurrency: 1, ackWait: time.Second}), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || !res.Success {
		t.Fatalf("result %+v", res)
	}
	l := tool(res, "L")
	if l.Attempts != 1 {
		t.Errorf("attempts %d: a redelivery is the same attempt, not a retry", l.Attempts)
	}
	if n := h.probe.count("L"); n != 2 {
		t.Errorf("L started %d times, want 2 (the interrupted run and the redelivered one)", n)
	}
}

func TestDispatcherStoppedMidPlanIsReplaced(t *testing.T) {
	h := start(t, opts{ackWait: time.Second})
	var tools []string
	for i := range 10 {
		deps := "[]"
		if i > 0 {
			deps = fmt.Sprintf(`["c%d"]`, i-1)
		}
		tools = append(tools, fmt.Sprintf(`{"toolId":"c%d","skill":"probe","dependencies":%s,"input":{"ms":100}}`, i, deps))
	}
	done := h.submit(`{"tools":[`+strings.Join(tools, ",")+`]}`, minute, nil)
	waitFor(t, h.probe.finished, "c3", 30*time.Second)
	h.node.Dispatchers[0].Kill()
	if _, err := h.node.AddDispatcher(context.Background(), dispatcher.Config{AckWait: time.Second}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || !res.Success {
		t.Fatalf("result %+v", res)
	}
	for i := range 10 {
		id := fmt.Sprintf("c%d", i)
		if n := h.probe.count(id); n != 1 {
			t.Errorf("%s ran %d times, want once", id, n)
		}
	}
}

// TestSkillConcurrencyLimitHoldsAcrossWorkers: a manifest's concurrency
// caps calls of the skill across all workers, whatever each worker allows.
func TestSkillConcurrencyLimitHoldsAcrossWorkers(t *testing.T) {
	cfg := bustest.Start(t)
	pr := newProbe()
	limited := pr.skill()
	limited.Manifest.Concurrency = 2
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 3, NoPlanner: true,
		Worker: worker.Config{Skills: []skill.Skill{limited}, Concurrency: 8, DrainTimeout: time.Second}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	h := &harness{t: t, node: n, conn: bustest.Dial(t, cfg), probe: pr}
	var tools []string
	for i := range 10 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"t%d","skill":"probe","input":{"ms":100}}`, i))
	}
	res, _ := h.run(`{"maxConcurrency":10,"tools":[`+strings.Join(tools, ",")+`]}`, minute)
	if !res.Success {
		t.Fatalf("plan failed: %+v", res.Error)
	}
	pr.mu.Lock()
	seen := pr.maxSeen
	pr.mu.Unlock()
	if seen != 2 {
		t.Errorf("at most %d calls ran at once, want the skill's limit 2", seen)
	}
}

// big is a plan input of about 300 KB.
func big() string { return `{"blob":"` + strings.Repeat("x", 300<<10) + `"}` }

// TestTooLargeToSendIsAFailureNotAHang: a call whose resolved input would
// not fit in a message fails at once; an execution result that would not
// fit goes out without outputs. Neither may stall the plan.
func TestTooLargeToSendIsAFailureNotAHang(t *testing.T) {
	h := start(t, opts{})
	var refs []string
	for i := range 30 {
		refs = append(refs, fmt.Sprintf(`"a%d":{"$ref":"A"}`, i))
	}
	res, _ := h.run(`{"tools":[{"toolId":"A","skill":"echo","input":`+big()+`},
		{"toolId":"B","skill":"echo","dependencies":["A"],"input":{`+strings.Join(refs, ",")+`}}]}`, minute)
	b := tool(res, "B")
	if res.State != planbus.PlanFailed || b.State != planbus.ToolFailed || b.Error == nil || b.Error.Code != "INPUT_TOO_LARGE" || b.Attempts != 1 {
		t.Fatalf("plan %s, B %s %+v after %d attempts", res.State, b.State, b.Error, b.Attempts)
	}

	var tools []string
	tools = append(tools, `{"toolId":"A","skill":"echo","input":`+big()+`}`)
	for i := range 30 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"B%d","skill":"echo","dependencies":["A"],"input":{"x":{"$ref":"A"}}}`, i))
	}
	res, _ = h.run(`{"maxConcurrency":8,"tools":[`+strings.Join(tools, ",")+`]}`, minute)
	if !res.Success || !res.OutputsOmitted {
		t.Fatalf("plan %s, outputsOmitted %v", res.State, res.OutputsOmitted)
	}
	for _, o := range res.Tools {
		if o.Output != nil || o.ResultSeq == 0 {
			t.Fatalf("%s: output kept (%d bytes) or no resultSeq (%d)", o.ToolID, len(o.Output), o.ResultSeq)
		}
	}
	stream, err := h.conn.JS.Stream(context.Background(), bus.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetMsg(context.Background(), res.Tools[5].ResultSeq)
	if err != nil || !strings.Contains(string(m.Data), `"blob":"xxxx`) {
		t.Errorf("result at seq %d: %v", res.Tools[5].ResultSeq, err)
	}
}

// TestDispatchersShareEveryPlan runs three dispatchers that all consume
// every partition, as they do while they disagree about who is there: the
// messages of one plan reach all of them, each with its own cached view
// of the plan, and every plan must still finish with every tool released
// once and the concurrency cap held.
func TestDispatchersShareEveryPlan(t *testing.T) {
	h := start(t, opts{dispatchers: 3, workers: 2, concurrency: 16, contend: true})
	var tools []string
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"a%d","skill":"probe","input":{"ms":20}}`, i))
	}
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"b%d","skill":"probe","dependencies":["a%d"],"input":{"ms":10}}`, i, i))
	}
	tools = append(tools, `{"toolId":"f","skill":"fail","dependencies":["b0"],"input":{"attempts":2,"category":"network"},"retryPolicy":{"maxAttempts":3,"backoffMs":20}}`)
	tools = append(tools, `{"toolId":"z","skill":"probe","dependencies":["f","b1","b2","b3","b4","b5"]}`)
	doc := `{"maxConcurrency":3,"tools":[` + strings.Join(tools, ",") + `]}`
	for round := range 4 {
		res, log := h.run(doc, minute)
		if !res.Success {
			t.Fatalf("round %d: %s %+v", round, res.State, res.Error)
		}
		released := map[string]int{}
		for _, ev := range log.of(planbus.EventToolReleased, "") {
			released[fmt.Sprintf("%s/%d", ev.ToolID, ev.Attempt)]++
		}
		for k, n := range released {
			if n != 1 {
				t.Errorf("round %d: %s released %d times", round, k, n)
			}
		}
		if len(released) != len(tools)+2 { // f has three attempts
			t.Errorf("round %d: %d releases, want %d", round, len(released), len(tools)+2)
		}
	}
	h.probe.mu.Lock()
	defer h.probe.mu.Unlock()
	if h.probe.maxSeen > 3 {
		t.Errorf("%d probes ran at once, cap 3", h.probe.maxSeen)
	}
}

func TestVerificationGates(t *testing.T) {
	h := start(t, opts{})
	res, _ := h.run(`{"tools":[
		{"toolId":"ok","skill":"echo","input":{"x":"yes"},"verify":{"type":"contains","path":"/x","value":"yes"}},
		{"toolId":"refused","skill":"echo","dependencies":["ok"],"input":{"x":"no"},"retryPolicy":{"maxAttempts":2,"backoffMs":10},
		 "verify":{"type":"contains","path":"/x","value":"yes"}},
		{"toolId":"legacy","skill":"echo","input":{"x":"no"},"required":false,"retryPolicy":{"maxAttempts":1},
		 "metadata":{"verify":{"type":"contains","path":"/x","value":"yes"}}}]}`, minute)
	ok, refused, legacy := tool(res, "ok"), tool(res, "refused"), tool(res, "legacy")
	if ok.State != planbus.ToolSucceeded || refused.State != planbus.ToolFailed || refused.Attempts != 2 ||
		refused.Error == nil || refused.Error.Code != planbus.CodeVerifyFailed || string(refused.Output) != `{"x":"no"}` {
		t.Fatalf("ok %s, refused %s after %d attempts: %+v output %s", ok.State, refused.State, refused.Attempts, refused.Error, refused.Output)
	}
	// A gate in metadata.verify, where plans carried them before, is checked too.
	if legacy.State != planbus.ToolFailed || legacy.Error == nil || legacy.Error.Code != planbus.CodeVerifyFailed {
		t.Errorf("legacy %s: %+v", legacy.State, legacy.Error)
	}
	for doc, want := range map[string]string{
		`{"tools":[{"toolId":"a","skill":"echo","verify":{"type":"matches","pattern":"("}}]}`:                         `tool "a": verify: gate: invalid: pattern`,
		`{"tools":[{"toolId":"a","skill":"echo","fallback":{"skill":"echo","verify":{"type":"expr","expr":"1 +"}}}]}`: `tool "a": fallback.verify: gate: invalid: expr`,
		`{"tools":[{"toolId":"a","skill":"echo","metadata":{"verify":{"type":"matches","pattern":"("}}}]}`:            `tool "a": metadata.verify: gate: invalid: pattern`,
	} {
		res, _ = h.run(doc, minute)
		if res.State != planbus.PlanRejected || !strings.Contains(res.Error.Message, want) {
			t.Errorf("%s: %s %+v, want rejected naming %q", doc, res.State, res.Error, want)
		}
	}
}

func TestAFallbackRunsInTheFailedToolsPlace(t *testing.T) {
	h := start(t, opts{})
	res, log := h.run(`{"tools":[
		{"toolId":"get","skill":"fail","input":{"category":"network"},"retryPolicy":{"maxAttempts":2,"backoffMs":10},
		 "verify":{"type":"equals","path":"/from","value":"origin"},
		 "fallback":{"skill":"echo","input":{"from":"cache"},"verify":{"type":"equals","path":"/from","value":"cache"}}},
		{"toolId":"use","skill":"echo","dependencies":["get"],"input":{"got":{"$ref":"get#/from"}}}]}`, minute)
	if !res.Success {
		t.Fatalf("plan %s %+v", res.State, res.Error)
	}
	get, use := tool(res, "get"), tool(res, "use")
	if get.Skill != "echo" || get.Attempts != 3 || string(use.Output) != `{"got":"cache"}` {
		t.Errorf("get: %s after %d attempts; use output %s", get.Skill, get.Attempts, use.Output)
	}
	var skills []string
	for _, ev := range log.of(planbus.EventToolReleased, "get") {
		skills = append(skills, fmt.Sprintf("%s/%d", ev.Skill, ev.Attempt))
	}
	if !slices.Equal(skills, []string{"fail/1", "fail/2", "echo/3"}) {
		t.Errorf("releases of get: %v", skills)
	}
	res, _ = h.run(`{"tools":[{"toolId":"a","skill":"echo","fallback":{"skill":"teleport"}}]}`, minute)
	if res.State != planbus.PlanRejected || !strings.Contains(res.Error.Message, `unknown skill "teleport"`) {
		t.Errorf("a fallback with an unknown skill: %s %+v", res.State, res.Error)
	}
}

// A first tool whose call is too large to send, in a plan that is not,
// fails as the plan starts, and the state stored says so: the plan's
// status agrees with its result.
func TestTooLargeToSendAtTheStartIsStored(t *testing.T) {
	h := start(t, opts{})
	limit := int(h.conn.NC.MaxPayload()) - 4096 // the dispatcher's store limit
	// The call adds ids, a token and a digest to the input; the stored
	// plan adds less (its defaults), so the plan fits and the call does not.
	input := `{"blob":"` + strings.Repeat("x", limit-360) + `"}`
	res, _ := h.run(`{"tools":[{"toolId":"A","skill":"echo","input":`+input+`},{"toolId":"B","skill":"echo","dependencies":["A"]}]}`, minute)
	a := tool(res, "A")
	if res.State != planbus.PlanFailed || a.Error == nil || a.Error.Code != "INPUT_TOO_LARGE" {
		t.Fatalf("plan %s (%+v), A %s %+v: want A failed with INPUT_TOO_LARGE", res.State, res.Error, a.State, a.Error)
	}
	st, err := h.client().Status(context.Background(), res.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Plan == nil || st.Plan.State != planbus.PlanFailed || st.Plan.Tools[0].State != planbus.ToolFailed || st.Plan.Tools[1].State != planbus.ToolSkipped {
		t.Fatalf("stored state %+v, want the plan failed, A failed and B skipped", st.Plan)
	}
}

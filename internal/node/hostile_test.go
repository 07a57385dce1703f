package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

// hostile is one malformed or hostile message and what must come of it.
type hostile struct {
	name    string
	subject string
	data    []byte
	// reply: the subject answers requests; the reply must contain each of
	// these. Without it the message is published and must be dropped.
	reply []string
	// publishErr: the client library refuses to send it at all.
	publishErr error
}

func text(s string) []byte { return []byte(s) }

// requests are hostile plan requests; every one gets a rejection that
// names what is wrong, and nothing of it runs.
func hostileRequests() []hostile {
	deep := `{"kind":"plan","input":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) +
		`,"plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`
	huge := `{"kind":"plan","input":"` + strings.Repeat("x", 5<<20) + `","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`
	tooBig := `{"kind":"plan","input":"` + strings.Repeat("x", 10<<20) + `"}`
	tool := func(extra string) string {
		return `{"kind":"plan","plan":{"tools":[` + extra + `]}}`
	}
	r := func(name, doc string, want ...string) hostile {
		return hostile{name: name, subject: bus.SubjectPlanRequest, data: text(doc), reply: append([]string{"rejected"}, want...)}
	}
	return []hostile{
		r("empty", ``, "INVALID_REQUEST"),
		r("truncated JSON", `{"kind":"plan",`, "malformed JSON"),
		r("null", `null`, "INVALID_REQUEST"),
		r("array", `[]`, "INVALID_REQUEST"),
		r("string", `"plan"`, "INVALID_REQUEST"),
		r("number", `42`, "INVALID_REQUEST"),
		r("kind of wrong type", `{"kind":5}`, "/kind"),
		r("unknown kind", `{"kind":"nope"}`, "/kind"),
		r("plan missing", `{"kind":"plan"}`, "plan"),
		r("plan of wrong type", `{"kind":"plan","plan":"x"}`, "/plan"),
		r("tools of wrong type", `{"kind":"plan","plan":{"tools":"x"}}`, "/plan"),
		r("request id with a dot", `{"requestId":"a.b","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`, "/requestId"),
		r("request id with a star", `{"requestId":"a*","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`, "/requestId"),
		r("request id >", `{"requestId":">","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`, "/requestId"),
		r("session id with wildcards", `{"sessionId":"s.*","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`, "/sessionId"),
		r("tool id with a wildcard", tool(`{"toolId":"a*","skill":"echo"}`), "toolId"),
		r("skill with a wildcard", tool(`{"toolId":"a","skill":"ec*ho"}`), "skill"),
		r("duplicate tool ids", tool(`{"toolId":"a","skill":"echo"},{"toolId":"a","skill":"echo"}`), "duplicate"),
		r("self dependency", tool(`{"toolId":"a","skill":"echo","dependencies":["a"]}`), "a"),
		r("cycle", tool(`{"toolId":"a","skill":"echo","dependencies":["b"]},{"toolId":"b","skill":"echo","dependencies":["a"]}`), "cycle"),
		r("unknown dependency", tool(`{"toolId":"a","skill":"echo","dependencies":["zz"]}`), "zz"),
		r("unknown skill", tool(`{"toolId":"a","skill":"teleport"}`), "teleport"),
		r("negative timeout", tool(`{"toolId":"a","skill":"echo","timeoutMs":-1}`), "timeoutMs"),
		r("absurd attempts", `{"kind":"plan","maxAttempts":1000000000000,"plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`, "maxAttempts"),
		r("no tools", `{"kind":"plan","plan":{"tools":[]}}`, "/plan/tools"),
		r("invalid UTF-8", "{\"kind\":\"plan\",\"input\":\"\xff\xfe\",\"plan\":{\"tools\":[{\"toolId\":\"a\",\"skill\":\"echo\"}]}}", "not valid UTF-8 at byte offset 24"),
		r("NUL in an id", "{\"requestId\":\"a\\u0000b\",\"kind\":\"plan\",\"plan\":{\"tools\":[{\"toolId\":\"a\",\"skill\":\"echo\"}]}}", "/requestId"),
		r("deep nesting", deep, "INVALID_REQUEST"),
		r("lone surrogate", `{"kind":"plan","plan":{"timeoutMs":4000,"tools":[{"toolId":"a","skill":"echo","input":{"s":"\ud800"}}]}}`, "/plan/tools/0/input/s", "lone surrogate"),
		r("lone surrogate in a member name", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"\udfff":1}}]}}`, "/plan/tools/0/input", "lone surrogate"),
		r("5 MiB", huge, "limit"),
		r("HTN syntax error", `{"kind":"htn","htn":{"program":"at(downtown","goal":"x"}}`, "/htn/program"),
		r("HTN budget above the maximum", `{"kind":"htn","htn":{"program":"a().","goal":"a()","budget":{"memory":1099511627776}}}`, "/htn/budget/memory"),
		r("GOAP domain of wrong shape", `{"kind":"goap","goap":{"inline":{"actions":"x"}}}`, "/goap"),
		r("external planner on planbus's own subject", `{"kind":"external","planner":"planbus.results.x"}`, "/planner", "reserved"),
		r("external planner on a server subject", `{"kind":"external","planner":"$JS.API.STREAM.DELETE.PLANBUS_PLANS"}`, "/planner"),
		r("template without a library", `{"kind":"template","template":{"id":"x"}}`, "template"),
		{name: "10 MB (over the server's max payload)", subject: bus.SubjectPlanRequest, data: text(tooBig), publishErr: nats.ErrMaxPayload},
		{name: "session reset: garbage", subject: bus.SubjectSessionReset, data: text(`{"sessionId":`), reply: []string{"sessionId"}},
		{name: "session reset: wildcard session", subject: bus.SubjectSessionReset, data: text(`{"sessionId":">"}`), reply: []string{"sessionId"}},
		{name: "skills: garbage", subject: bus.SubjectSkills, data: text(`\x00\x01`), reply: []string{"INVALID_REQUEST", `"field":"/"`}},
		{name: "cancel: garbage", subject: bus.SubjectPlanCancel, data: text(`{"requestId":`), reply: []string{"INVALID_REQUEST", "malformed JSON"}},
		{name: "cancel: no id", subject: bus.SubjectPlanCancel, data: text(`{}`), reply: []string{"INVALID_REQUEST", "requestId"}},
		{name: "cancel: both ids", subject: bus.SubjectPlanCancel, data: text(`{"requestId":"victim","planId":"victim-1"}`), reply: []string{"INVALID_REQUEST"}},
		{name: "cancel: wildcard id", subject: bus.SubjectPlanCancel, data: text(`{"requestId":"victim.>"}`), reply: []string{"INVALID_REQUEST", "/requestId"}},
		{name: "cancel: unknown field", subject: bus.SubjectPlanCancel, data: text(`{"requestId":"victim","force":true}`), reply: []string{"INVALID_REQUEST", "force"}},
		{name: "cancel: reason too long", subject: bus.SubjectPlanCancel, data: text(`{"requestId":"victim","reason":"` + strings.Repeat("x", 1025) + `"}`), reply: []string{"INVALID_REQUEST", "/reason"}},
		{name: "cancel: unknown request", subject: bus.SubjectPlanCancel, data: text(`{"requestId":"ghost"}`), reply: []string{"NOT_FOUND", "ghost"}},
		{name: "list: garbage", subject: bus.SubjectPlanList, data: text(`[`), reply: []string{"INVALID_REQUEST", "malformed JSON"}},
		{name: "list: limit too high", subject: bus.SubjectPlanList, data: text(`{"limit":1000000}`), reply: []string{"INVALID_REQUEST", "/limit"}},
		{name: "list: unknown status", subject: bus.SubjectPlanList, data: text(`{"status":"sideways"}`), reply: []string{"INVALID_REQUEST", "/status"}},
		{name: "approve: garbage", subject: bus.SubjectPlanApprove, data: text(`{"requestId":`), reply: []string{"INVALID_REQUEST", "malformed JSON"}},
		{name: "approve: no tool", subject: bus.SubjectPlanApprove, data: text(`{"requestId":"victim","approve":true}`), reply: []string{"INVALID_REQUEST", "toolId"}},
		{name: "approve: wildcard tool", subject: bus.SubjectPlanApprove, data: text(`{"requestId":"victim","toolId":"*","approve":true}`), reply: []string{"INVALID_REQUEST", "/toolId"}},
		{name: "approve: unknown request", subject: bus.SubjectPlanApprove, data: text(`{"requestId":"ghost","toolId":"a","approve":true}`), reply: []string{"NOT_FOUND", "ghost"}},
		{name: "approve: unknown tool", subject: bus.SubjectPlanApprove, data: text(`{"requestId":"victim","toolId":"ghost","approve":true}`), reply: []string{"NOT_FOUND", "ghost"}},
		{name: "approve: a tool with no approval step", subject: bus.SubjectPlanApprove, data: text(`{"planId":"victim-1","toolId":"after","approve":false}`), reply: []string{"NOT_WAITING", "no approval step"}},
	}
}

// published are hostile messages on the subjects tools, results, timers,
// cancels and plans flow on, aimed at the running plan victim-1 where it
// helps; each must be dropped without changing the plan.
func hostilePublishes(planID string) []hostile {
	p := func(name, subject, doc string) hostile { return hostile{name: name, subject: subject, data: text(doc)} }
	res := bus.ResultSubject(planID)
	return []hostile{
		p("result: garbage", res, `{"planId":`),
		p("result: empty", res, ``),
		p("result: forged, no token", res, fmt.Sprintf(`{"planId":%q,"toolId":"slow","attempt":1,"state":"succeeded","output":{"FORGED":1}}`, planID)),
		p("result: forged, made-up token", res, fmt.Sprintf(`{"planId":%q,"toolId":"slow","attempt":1,"state":"succeeded","output":{"FORGED":2},"token":"%s"}`, planID, strings.Repeat("A", 43))),
		p("result: forged failure", res, fmt.Sprintf(`{"planId":%q,"toolId":"slow","attempt":1,"state":"failed","error":{"code":"X","message":"forged","category":"permanent"},"token":"x"}`, planID)),
		p("result: attempt out of range", res, fmt.Sprintf(`{"planId":%q,"toolId":"slow","attempt":-7,"state":"succeeded","token":"x"}`, planID)),
		p("result: another plan's subject", bus.ResultSubject("elsewhere"), fmt.Sprintf(`{"planId":%q,"toolId":"slow","attempt":1,"state":"succeeded","token":"x"}`, planID)),
		p("result: unknown plan", bus.ResultSubject("nosuchplan"), `{"planId":"nosuchplan","toolId":"a","attempt":1,"state":"succeeded","token":"x"}`),
		p("result: unknown tool", res, fmt.Sprintf(`{"planId":%q,"toolId":"ghost","attempt":1,"state":"succeeded","token":"x"}`, planID)),
		p("cancel: two bytes", bus.CancelSubject(planID), `{}`),
		p("cancel: forged token", bus.CancelSubject(planID), fmt.Sprintf(`{"planId":%q,"cancelToken":"%s"}`, planID, strings.Repeat("B", 43))),
		p("timer: garbage", bus.TimerSubject(planID), `not json`),
		p("timer: plan timeout before its deadline", bus.TimerSubject(planID), fmt.Sprintf(`{"planId":%q,"kind":"timeout","fireAt":1}`, planID)),
		p("timer: retry of a tool that is not retrying", bus.TimerSubject(planID), fmt.Sprintf(`{"planId":%q,"kind":"retry","tool":1,"attempt":2,"fireAt":1}`, planID)),
		p("timer: a cancel on another plan's subject", bus.TimerSubject("elsewhere"), fmt.Sprintf(`{"planId":%q,"kind":"cancel","fireAt":1}`, planID)),
		p("timer: unknown kind", bus.TimerSubject(planID), fmt.Sprintf(`{"planId":%q,"kind":"explode","fireAt":1}`, planID)),
		p("timer: a rejection of a tool not waiting", bus.TimerSubject(planID), fmt.Sprintf(`{"planId":%q,"kind":"reject","tool":1,"fireAt":1}`, planID)),
		p("timer: an approval of no tool", bus.TimerSubject(planID), fmt.Sprintf(`{"planId":%q,"kind":"approve","tool":-4,"fireAt":1}`, planID)),
		p("plan: garbage", bus.PlanSubject("hostile-garbage"), `{"tools":`),
		p("plan: cycle", bus.PlanSubject("hostile-cycle"), `{"planId":"hostile-cycle","tools":[{"toolId":"a","skill":"echo","dependencies":["b"]},{"toolId":"b","skill":"echo","dependencies":["a"]}]}`),
		p("plan: lone surrogate", bus.PlanSubject("hostile-surrogate"), `{"planId":"hostile-surrogate","tools":[{"toolId":"a","skill":"echo","input":{"s":"\ud800"}}]}`),
		p("tool call: garbage", bus.ToolSubject("echo"), `{"planId":`),
		p("tool call: for another skill", bus.ToolSubject("echo"), `{"planId":"x","toolId":"a","skill":"sleep","attempt":1,"input":{}}`),
		p("event: garbage", bus.EventSubject("victim", "tool.succeeded"), `\xff`),
	}
}

// Every subject a client or worker can reach gets malformed and hostile
// messages while a plan runs: each request is answered with an error that
// names the problem, each published message is dropped, the running plan
// finishes with its own results, and a valid plan runs afterwards. Nothing
// crashes (a panic in any component ends this test's process) or wedges.
func TestHostileInput(t *testing.T) {
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{
		Bus:     cfg,
		Workers: 2,
		Worker:  worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})},
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn := bustest.Dial(t, cfg)

	// The victim: a slow tool whose output the next tool reads.
	started := make(chan struct{}, 1)
	sub, err := conn.NC.Subscribe(bus.EventSubject("victim", planbus.EventToolStarted), func(*nats.Msg) {
		select {
		case started <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	victim := make(chan error, 1)
	var outcome json.RawMessage
	go func() {
		o, err := newClient(t, conn).Run(ctx, []byte(`{"requestId":"victim","kind":"plan","plan":{"tools":[
			{"toolId":"slow","skill":"sleep","input":{"ms":3000}},
			{"toolId":"after","skill":"echo","dependencies":["slow"],"input":{"got":{"$ref":"slow"}}}]}}`), nil)
		if err == nil {
			outcome, _ = json.Marshal(o)
			if !o.Success {
				err = fmt.Errorf("victim: %s %+v", o.Status, o.Error)
			}
		}
		victim <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the victim's slow tool never started")
	}

	all := append(hostileRequests(), hostilePublishes("victim-1")...)
	if len(all) < 40 {
		t.Fatalf("%d hostile inputs, want at least 40", len(all))
	}
	for _, h := range all {
		t.Run(h.name, func(t *testing.T) {
			switch {
			case h.publishErr != nil:
				_, err := conn.NC.Request(h.subject, h.data, 10*time.Second)
				if !errors.Is(err, h.publishErr) {
					t.Errorf("err = %v, want %v", err, h.publishErr)
				}
			case h.reply != nil:
				m, err := conn.NC.Request(h.subject, h.data, 10*time.Second)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				for _, want := range h.reply {
					if !strings.Contains(string(m.Data), want) {
						t.Errorf("reply %s, want it to contain %q", m.Data, want)
					}
				}
			default:
				if err := conn.NC.Publish(h.subject, h.data); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if err := conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	// The victim ends with its own results: the slow tool slept, and the
	// forged outputs went nowhere.
	select {
	case err := <-victim:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the victim plan never ended")
	}
	if s := string(outcome); strings.Contains(s, "FORGED") || !strings.Contains(s, `"sleptMs":3000`) {
		t.Errorf("victim outcome %s, want the slow tool's real output and no forged one", s)
	}
	// Nothing of the rejected requests reached the stream of accepted ones
	// (the victim alone is there).
	st, err := conn.JS.Stream(ctx, bus.StreamRequests)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("requests stream: %v messages (%v), want the victim's alone", info.State.Msgs, err)
	}
	// The plans published around the planner were rejected, not run.
	for _, id := range []string{"hostile-garbage", "hostile-cycle", "hostile-surrogate"} {
		m, err := waitLast(ctx, conn, bus.StreamExecutions, bus.ExecutionSubject(id))
		if id == "hostile-garbage" {
			continue // not even a plan id to answer to: dropped
		}
		if err != nil {
			t.Errorf("%s: no execution result: %v", id, err)
			continue
		}
		if !strings.Contains(string(m), `"state":"rejected"`) {
			t.Errorf("%s: %s, want rejected", id, m)
		}
	}

	// The dispatcher counted the results it refused.
	for got := int64(0); got < 9; got = dispatcherStat(t, conn, "results_rejected") {
		if ctx.Err() != nil {
			t.Fatalf("results_rejected %d, want the 9 forged and malformed results", got)
		}
	}

	// Every component still answers, and a valid plan runs end to end.
	for _, svc := range []string{bus.ServicePlanner, bus.ServiceDispatcher, bus.ServiceToolworker} {
		if _, err := conn.NC.Request("$SRV.PING."+svc, nil, 5*time.Second); err != nil {
			t.Errorf("%s does not answer after the hostile input: %v", svc, err)
		}
	}
	o, err := newClient(t, conn).Run(ctx, []byte(`{"kind":"plan","plan":{"tools":[
		{"toolId":"A","skill":"echo","input":{"n":1}},
		{"toolId":"B","skill":"echo","dependencies":["A"],"input":{"a":{"$ref":"A"}}},
		{"toolId":"C","skill":"sleep","dependencies":["A"],"input":{"ms":10}},
		{"toolId":"D","skill":"echo","dependencies":["B","C"]}]}}`), nil)
	if err != nil || !o.Success {
		t.Fatalf("a valid plan after the hostile input: %v %+v", err, o)
	}
}

// waitLast reads the last message on subject, waiting for it to be there.
func waitLast(ctx context.Context, conn *bus.Conn, stream, subject string) ([]byte, error) {
	st, err := conn.JS.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sub, err := conn.NC.SubscribeSync(subject)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if m, err := st.GetLastMsgForSubject(wctx, subject); err == nil {
		return m.Data, nil
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, err
	}
	m, err := sub.NextMsgWithContext(wctx)
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}

// dispatcherStat is a counter of the dispatcher's micro stats, summed over
// the dispatchers that answer.
func dispatcherStat(t *testing.T, conn *bus.Conn, name string) int64 {
	t.Helper()
	m, err := conn.NC.Request("$SRV.STATS."+bus.ServiceDispatcher, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, ep := range st.Endpoints {
		var data map[string]int64
		if json.Unmarshal(ep.Data, &data) == nil {
			sum += data[name]
		}
	}
	return sum
}

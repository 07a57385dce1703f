package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/dispatcher"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/telemetry"
	"github.com/planbus/planbus/internal/telemetry/export"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// recorder is one component's TracerProvider over the SDK's in-memory
// exporter, which tells when spans arrive. Each component gets its own, as
// each process has its own: spans can only join one trace through the
// trace context the messages carry.
type recorder struct {
	name string
	tp   *sdktrace.TracerProvider
	mem  *tracetest.InMemoryExporter
	more chan struct{}
}

func newRecorder(t *testing.T, name string) *recorder {
	t.Helper()
	r := &recorder{name: name, mem: tracetest.NewInMemoryExporter(), more: make(chan struct{}, 1)}
	tp, err := export.NewProvider(context.Background(), name, sdktrace.WithSyncer(r))
	if err != nil {
		t.Fatal(err)
	}
	r.tp = tp
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return r
}

func (r *recorder) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := r.mem.ExportSpans(ctx, spans)
	select {
	case r.more <- struct{}{}:
	default:
	}
	return err
}

func (r *recorder) Shutdown(context.Context) error { return nil }

func (r *recorder) spans() tracetest.SpanStubs { return r.mem.GetSpans() }

// named returns the spans called name.
func (r *recorder) named(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range r.spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// await waits until ok holds for what r recorded, for at most a minute.
func (r *recorder) await(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !ok() {
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("%s: %s: not recorded within a minute; spans: %v", r.name, what, names(r.spans()))
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// startTraced starts a node on a real embedded JetStream server whose
// planner and dispatcher record with their own providers, and a worker
// serving skills that records with its own.
func startTraced(t *testing.T, pl, di, wk *recorder, sk ...skill.Skill) (*node.Node, *client.Client) {
	t.Helper()
	return startNode(t, node.Config{Planner: planner.Config{Tracer: pl.tp}, Dispatcher: dispatcher.Config{Tracer: di.tp}}, wk, sk...)
}

// startNode starts a node as nc says on a real embedded JetStream server
// and, with wk, a worker serving skills that records with wk's provider;
// it returns a client of it.
func startNode(t *testing.T, nc node.Config, wk *recorder, sk ...skill.Skill) (*node.Node, *client.Client) {
	t.Helper()
	nc.Bus = bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, nc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if wk != nil {
		if _, err := n.Add(ctx, "traced-worker", bus.RoleWorker, func(c *bus.Conn) (node.Runner, error) {
			return worker.New(c.NC, worker.Config{Skills: sk, DrainTimeout: time.Second}, worker.WithTracerProvider(wk.tp))
		}, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(bustest.Dial(t, nc.Bus).NC)
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

const diamond = `{"kind": "plan", "plan": {"maxConcurrency": 4, "tools": [
	{"toolId": "A", "skill": "echo", "input": {"city": "Lisbon"}},
	{"toolId": "B", "skill": "echo", "dependencies": ["A"]},
	{"toolId": "C", "skill": "echo", "dependencies": ["A"]},
	{"toolId": "D", "skill": "echo", "dependencies": ["B", "C"]}]}}`

// TestOneTraceAcrossPlannerDispatcherAndWorker follows a request whose
// caller has a span: the planner's, the dispatcher's and the worker's
// spans all share its trace id and form one tree under it.
func TestOneTraceAcrossPlannerDispatcherAndWorker(t *testing.T) {
	pl, di, wk, caller := newRecorder(t, "planner"), newRecorder(t, "dispatcher"), newRecorder(t, "toolworker"), newRecorder(t, "caller")
	_, c := startTraced(t, pl, di, wk, skills.Echo())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, root := caller.tp.Tracer("test").Start(ctx, "caller")
	out, err := c.Run(ctx, []byte(diamond), nil)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if !out.Success {
		t.Fatalf("outcome %s, want succeeded: %+v", out.Status, out.Error)
	}
	// The outcome can reach the caller before the last spans end.
	pl.await(t, "accept, request, generate and resume", func() bool {
		return len(pl.named(telemetry.SpanAccept)) == 1 && len(pl.named(telemetry.SpanRequest)) == 1 &&
			len(pl.named(telemetry.SpanGenerate)) == 1 && len(pl.named(telemetry.SpanResume)) == 1
	})
	di.await(t, "the plan and four tool attempts", func() bool {
		return len(di.named(telemetry.SpanPlan)) == 1 && len(di.named(telemetry.SpanTool)) == 4
	})
	wk.await(t, "four runs", func() bool { return len(wk.named(telemetry.SpanToolRun)) == 4 })

	var all tracetest.SpanStubs
	component := map[trace.SpanID]string{}
	for _, r := range []*recorder{caller, pl, di, wk} {
		for _, s := range r.spans() {
			all = append(all, s)
			component[s.SpanContext.SpanID()] = r.name
		}
	}
	tid := root.SpanContext().TraceID()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range all {
		if got := s.SpanContext.TraceID(); got != tid {
			t.Errorf("%s span %s: trace id %s, want the caller's %s", component[s.SpanContext.SpanID()], s.Name, got, tid)
		}
		byID[s.SpanContext.SpanID()] = s
	}
	// One tree: every span but the caller's has its parent among them.
	for _, s := range all {
		if s.Name == "caller" {
			continue
		}
		if _, ok := byID[s.Parent.SpanID()]; !ok {
			t.Errorf("%s span %s: parent %s is not a recorded span", component[s.SpanContext.SpanID()], s.Name, s.Parent.SpanID())
		}
	}
	parentName := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID()].Name }
	for _, want := range []struct{ span, parent string }{
		{telemetry.SpanAccept, "caller"},
		{telemetry.SpanRequest, telemetry.SpanAccept},
		{telemetry.SpanGenerate, telemetry.SpanRequest},
		{telemetry.SpanPlan, telemetry.SpanGenerate},
		{telemetry.SpanResume, telemetry.SpanRequest},
	} {
		for _, r := range []*recorder{pl, di} {
			for _, s := range r.named(want.span) {
				if got := parentName(s); got != want.parent {
					t.Errorf("span %s: parent %s, want %s", want.span, got, want.parent)
				}
			}
		}
	}
	plans := di.named(telemetry.SpanPlan)
	planID, _ := attr(plans[0], telemetry.AttrPlanID)
	if v, _ := attr(plans[0], telemetry.AttrState); v.AsString() != string(planbus.PlanSucceeded) {
		t.Errorf("plan span state %q, want %q", v.AsString(), planbus.PlanSucceeded)
	}
	tools := map[string]tracetest.SpanStub{}
	for _, s := range di.named(telemetry.SpanTool) {
		if s.Parent.SpanID() != plans[0].SpanContext.SpanID() {
			t.Errorf("tool span: parent %s, want the plan span", parentName(s))
		}
		toolID, _ := attr(s, telemetry.AttrToolID)
		tools[toolID.AsString()] = s
	}
	for _, s := range wk.named(telemetry.SpanToolRun) {
		toolID, _ := attr(s, telemetry.AttrToolID)
		parent, ok := tools[toolID.AsString()]
		if !ok || s.Parent.SpanID() != parent.SpanContext.SpanID() {
			t.Errorf("run of tool %s: parent %s, want the dispatcher's span of its attempt", toolID.AsString(), parentName(s))
		}
		for _, span := range []tracetest.SpanStub{s, parent} {
			for key, want := range map[attribute.Key]attribute.Value{
				telemetry.AttrPlanID: planID, telemetry.AttrToolID: toolID, telemetry.AttrSkill: attribute.StringValue("echo"),
				telemetry.AttrAttempt: attribute.IntValue(1), telemetry.AttrState: attribute.StringValue(string(planbus.ToolSucceeded)),
			} {
				if got, _ := attr(span, key); got != want {
					t.Errorf("%s of tool %s: %s = %v, want %v", span.Name, toolID.AsString(), key, got.String(), want.String())
				}
			}
		}
	}
	if len(tools) != 4 {
		t.Errorf("tool spans for %d tools, want 4 (A, B, C, D)", len(tools))
	}
}

// TestToolSpansStayInTheTraceAfterAFailover kills the dispatcher of a plan
// while a tool runs: the one that takes over parents the tool spans it
// records in the plan's trace, from the state in KV.
func TestToolSpansStayInTheTraceAfterAFailover(t *testing.T) {
	pl, d1, wk, caller := newRecorder(t, "planner"), newRecorder(t, "dispatcher-1"), newRecorder(t, "toolworker"), newRecorder(t, "caller")
	running, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var inSkill trace.SpanContext // the span the skill's ctx carries
	hold := skill.Skill{Manifest: skill.Manifest{Name: "hold"}, Handler: skill.HandlerFunc(
		func(ctx context.Context, _ *skill.Call) (skill.Result, error) {
			once.Do(func() { inSkill = trace.SpanContextFromContext(ctx); close(running) })
			select {
			case <-release:
				return skill.Result{Output: json.RawMessage(`{"held": true}`)}, nil
			case <-ctx.Done():
				return skill.Result{}, ctx.Err()
			}
		})}
	n, c := startTraced(t, pl, d1, wk, skills.Echo(), hold)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, root := caller.tp.Tracer("test").Start(ctx, "caller")
	defer root.End()
	done := make(chan error, 1)
	go func() {
		out, err := c.Run(ctx, []byte(`{"kind": "plan", "plan": {"tools": [
			{"toolId": "A", "skill": "hold"}, {"toolId": "B", "skill": "echo", "dependencies": ["A"]}]}}`), nil)
		if err == nil && !out.Success {
			err = fmt.Errorf("outcome %s: %+v", out.Status, out.Error)
		}
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the plan ended before its first tool ran: %v", err)
	case <-ctx.Done():
		t.Fatal("tool A did not start within a minute")
	}
	n.Dispatchers[0].Kill()
	d2 := newRecorder(t, "dispatcher-2")
	if _, err := n.AddDispatcher(ctx, dispatcher.Config{Tracer: d2.tp}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d2.await(t, "both tool attempts and the plan", func() bool {
		return len(d2.named(telemetry.SpanTool)) == 2 && len(d2.named(telemetry.SpanPlan)) == 1
	})
	wk.await(t, "both runs", func() bool { return len(wk.named(telemetry.SpanToolRun)) == 2 })
	if got := names(d1.spans()); len(got) != 0 {
		t.Errorf("the killed dispatcher recorded %v, want nothing: it ended no attempt", got)
	}
	tid := root.SpanContext().TraceID()
	plan := d2.named(telemetry.SpanPlan)[0]
	tools := map[string]tracetest.SpanStub{}
	for _, s := range d2.spans() {
		if s.SpanContext.TraceID() != tid {
			t.Errorf("dispatcher-2 span %s: trace id %s, want the caller's %s", s.Name, s.SpanContext.TraceID(), tid)
		}
		if s.Name == telemetry.SpanTool {
			if s.Parent.SpanID() != plan.SpanContext.SpanID() {
				t.Errorf("tool span: parent %s, want the plan's span %s", s.Parent.SpanID(), plan.SpanContext.SpanID())
			}
			id, _ := attr(s, telemetry.AttrToolID)
			tools[id.AsString()] = s
		}
	}
	if gen := pl.named(telemetry.SpanGenerate); len(gen) != 1 || plan.Parent.SpanID() != gen[0].SpanContext.SpanID() {
		t.Errorf("plan span: parent %s, want the planner's generation", plan.Parent.SpanID())
	}
	for _, s := range wk.named(telemetry.SpanToolRun) {
		id, _ := attr(s, telemetry.AttrToolID)
		if s.SpanContext.TraceID() != tid || s.Parent.SpanID() != tools[id.AsString()].SpanContext.SpanID() {
			t.Errorf("run of tool %s: trace %s parent %s, want trace %s and the span dispatcher-2 recorded for it",
				id.AsString(), s.SpanContext.TraceID(), s.Parent.SpanID(), tid)
		}
	}
	for _, s := range wk.named(telemetry.SpanToolRun) {
		if id, _ := attr(s, telemetry.AttrToolID); id.AsString() == "A" && !s.SpanContext.Equal(inSkill) {
			t.Errorf("the skill's ctx carries span %s, want its run's %s", inSkill.SpanID(), s.SpanContext.SpanID())
		}
	}
	if a := tools["A"]; !strings.Contains(fmt.Sprint(a.Attributes), "hold") {
		t.Errorf("tool A's span attributes %v, want skill hold", a.Attributes)
	}
}

// TestAgentTurnsJoinTheStartersTrace starts a GOAP agent from a caller with
// a span: everything is in the caller's trace; each of the agent's turns
// is a span under the request that started it, its GOAP generations under
// a turn, each step plan under the turn that published it, a turn that
// takes a step's end links to that step plan's span, and no span is
// recorded twice (a step the agent drops after it ended gets a cancel the
// dispatcher takes after the plan's end: it records the plan's span once).
func TestAgentTurnsJoinTheStartersTrace(t *testing.T) {
	pl, di, wk, caller := newRecorder(t, "planner"), newRecorder(t, "dispatcher"), newRecorder(t, "toolworker"), newRecorder(t, "caller")
	_, c := startTraced(t, pl, di, wk, skills.Remember())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, root := caller.tp.Tracer("test").Start(ctx, "caller")
	// Two steps: the first one's end finds the agent running, with the
	// second to publish.
	_, err := c.StartAgent(ctx, []byte(`{"requestId": "tidy", "sessionId": "home", "goap": {"inline": {"name": "tidy",
		"facts": {"wood": false, "floor": false},
		"actions": [{"name": "gather", "skill": "remember", "input": {"wood": true}, "effects": {"wood": true}},
			{"name": "sweep", "skill": "remember", "input": {"floor": true}, "preconditions": {"wood": true}, "effects": {"floor": true}}],
		"goals": [{"name": "clean-floor", "conditions": {"floor": true}, "utility": 40}]}}}`))
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Await(ctx, "tidy")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != planbus.StatusSucceeded || out.Attempts != 2 {
		t.Fatalf("agent outcome %s after %d plans, want succeeded after 2: %+v", out.Status, out.Attempts, out.Error)
	}
	trigger := func(s tracetest.SpanStub) string { v, _ := attr(s, telemetry.AttrTrigger); return v.AsString() }
	distinct := func(spans tracetest.SpanStubs) int {
		ids := map[trace.SpanID]bool{}
		for _, s := range spans {
			ids[s.SpanContext.SpanID()] = true
		}
		return len(ids)
	}
	di.await(t, "the two step plans and their tools", func() bool {
		return distinct(di.named(telemetry.SpanPlan)) == 2 && distinct(di.named(telemetry.SpanTool)) == 2
	})
	wk.await(t, "the tools' runs", func() bool { return len(wk.named(telemetry.SpanToolRun)) == 2 })
	pl.await(t, "the agent's start, its turns (a step's end among them) and its generation", func() bool {
		ended := false
		for _, s := range pl.named(telemetry.SpanAgentTurn) {
			ended = ended || trigger(s) == "step"
		}
		return len(pl.named(telemetry.SpanAccept)) == 1 && ended && len(pl.named(telemetry.SpanGenerate)) >= 1
	})

	tid := root.SpanContext().TraceID()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, r := range []*recorder{caller, pl, di, wk} {
		for _, s := range r.spans() {
			if got := s.SpanContext.TraceID(); got != tid {
				t.Errorf("%s span %s: trace id %s, want the caller's %s", r.name, s.Name, got, tid)
			}
			if _, twice := byID[s.SpanContext.SpanID()]; twice {
				t.Errorf("%s span %s %s recorded twice", r.name, s.Name, s.SpanContext.SpanID())
			}
			byID[s.SpanContext.SpanID()] = s
		}
	}
	parentName := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID()].Name }
	accept := pl.named(telemetry.SpanAccept)[0]
	if parentName(accept) != "caller" {
		t.Errorf("accept span: parent %q, want the caller's", parentName(accept))
	}
	turns := pl.named(telemetry.SpanAgentTurn)
	for _, s := range turns {
		if s.Parent.SpanID() != accept.SpanContext.SpanID() {
			t.Errorf("turn (%s): parent %q, want the request's accept span", trigger(s), parentName(s))
		}
		if v, _ := attr(s, telemetry.AttrRequestID); v.AsString() != "tidy" {
			t.Errorf("turn (%s): request id %q, want tidy", trigger(s), v.AsString())
		}
	}
	for _, s := range pl.named(telemetry.SpanGenerate) {
		if parentName(s) != telemetry.SpanAgentTurn {
			t.Errorf("generation: parent %q, want a turn", parentName(s))
		}
		if v, _ := attr(s, telemetry.AttrGoal); v.AsString() != "clean-floor" {
			t.Errorf("generation: goal %q, want clean-floor", v.AsString())
		}
	}
	plans := map[trace.SpanID]bool{}
	for _, s := range di.named(telemetry.SpanPlan) {
		plans[s.SpanContext.SpanID()] = true
		// The turn that published a step has it in flight when it ends.
		planID, _ := attr(s, telemetry.AttrPlanID)
		parent := byID[s.Parent.SpanID()]
		if published, _ := attr(parent, telemetry.AttrPlanID); parent.Name != telemetry.SpanAgentTurn || published != planID {
			t.Errorf("step plan %s: parent %q with step %q, want the turn that published it", planID.AsString(), parent.Name, published.AsString())
		}
	}
	for _, s := range turns {
		if trigger(s) != "step" {
			continue
		}
		if len(s.Links) != 1 || !plans[s.Links[0].SpanContext.SpanID()] {
			t.Errorf("a turn on a step's end links to %v, want one of the step plans' spans", s.Links)
		}
	}
}

// TestGuideTurnContinuesTheCallersTrace: a guided turn is a
// planbus.guide.turn span under the caller's, saying what the turn did to
// the session's plan.
func TestGuideTurnContinuesTheCallersTrace(t *testing.T) {
	pl, caller := newRecorder(t, "planner"), newRecorder(t, "caller")
	lib, err := templates.ReadFile("../../examples/templates/library.json")
	if err != nil {
		t.Fatal(err)
	}
	_, c := startNode(t, node.Config{NoDispatcher: true, Planner: planner.Config{Tracer: pl.tp, Templates: lib}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx, root := caller.tp.Tracer("test").Start(ctx, "caller")
	reply, err := c.Guide(ctx, planbus.GuideTurn{SessionID: "dev", Message: "fix the bug in parser.go", Domain: "bugfix"})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if reply.Transition != planbus.GuideActivated || reply.Plan == nil {
		t.Fatalf("turn %s, plan %+v; want the bugfix plan activated", reply.Transition, reply.Plan)
	}
	pl.await(t, "the guided turn", func() bool { return len(pl.named(telemetry.SpanGuideTurn)) == 1 })
	s := pl.named(telemetry.SpanGuideTurn)[0]
	if s.SpanContext.TraceID() != root.SpanContext().TraceID() || s.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("guided turn: trace %s parent %s, want the caller's %s and %s", s.SpanContext.TraceID(), s.Parent.SpanID(),
			root.SpanContext().TraceID(), root.SpanContext().SpanID())
	}
	for key, want := range map[attribute.Key]attribute.Value{
		telemetry.AttrSessionID: attribute.StringValue("dev"), telemetry.AttrTransition: attribute.StringValue(planbus.GuideActivated),
		telemetry.AttrTemplate: attribute.StringValue(reply.Plan.ID), telemetry.AttrStep: attribute.IntValue(1),
	} {
		if got, _ := attr(s, key); got != want {
			t.Errorf("guided turn: %s = %v, want %v", key, got.String(), want.String())
		}
	}
}

package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/session"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

type harness struct {
	t    *testing.T
	node *node.Node
	conn *bus.Conn
	c    *client.Client
	cfg  bus.Config
}

func simulated(t *testing.T, specs ...string) []skill.Skill {
	t.Helper()
	out := []skill.Skill{skills.Echo(), skills.Sleep(), skills.Fail(), skills.Remember()}
	for _, s := range specs {
		sk, err := skills.Simulated(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sk)
	}
	return out
}

func start(t *testing.T, pc planner.Config, sk []skill.Skill) *harness {
	t.Helper()
	return startLogged(t, pc, sk, zerolog.Nop())
}

// startLogged is start with the node's components logging to log.
func startLogged(t *testing.T, pc planner.Config, sk []skill.Skill, log zerolog.Logger) *harness {
	t.Helper()
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 2, Planner: pc,
		Worker: worker.Config{Skills: sk, DrainTimeout: time.Second}}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn := bustest.Dial(t, cfg)
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, node: n, conn: conn, c: c, cfg: cfg}
}

func (h *harness) request(doc string) (*planbus.Outcome, *events) {
	h.t.Helper()
	ev := &events{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := h.c.Run(ctx, []byte(doc), ev.add)
	if err != nil {
		h.t.Fatal(err)
	}
	return out, ev
}

// plansPublished is how many plans the plans stream holds.
func (h *harness) plansPublished() uint64 {
	h.t.Helper()
	s, err := h.conn.JS.Stream(context.Background(), bus.StreamPlans)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Msgs
}

type events struct {
	mu  sync.Mutex
	all []planbus.Event
}

func (e *events) add(ev planbus.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(typ planbus.EventType) []planbus.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []planbus.Event
	for _, ev := range e.all {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

const taxiSkills = "walk(from,to)=network hail(vehicle,at) ride(vehicle,from,to) set-cash(old,new) wait-for(bus,at)"

// TestReplanAvoidsAPermanentlyFailedSkill is the taxi demo: walking fails
// with network errors until the walk skill is permanently failed, and the
// replan takes the taxi.
func TestReplanAvoidsAPermanentlyFailedSkill(t *testing.T) {
	h := start(t, planner.Config{DomainsDir: "../../examples/htn"}, simulated(t, strings.Fields(taxiSkills)...))
	out, ev := h.request(`{"kind":"htn","sessionId":"s1","htn":{"domain":"taxi","goal":"travel-to(park)"}}`)
	if !out.Success || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts, want success after 2: %+v", out.Status, out.Attempts, out.Error)
	}
	if h0 := out.History[0]; h0.State != planbus.PlanFailed || !slices.Equal(h0.FailedSkills, []string{"walk"}) {
		t.Errorf("attempt 1: %+v", h0)
	}
	var used []string
	for _, tl := range out.Execution.Tools {
		used = append(used, tl.Skill)
	}
	if slices.Contains(used, "walk") || !slices.Equal(used, []string{"hail", "ride", "set-cash"}) {
		t.Errorf("replanned skills %v, want the taxi without walk", used)
	}
	var moves []string
	for _, e := range ev.of(planbus.EventSkillHealth) {
		moves = append(moves, e.From+">"+e.To)
	}
	if !slices.Equal(moves, []string{"healthy>temporaryFailure", "temporaryFailure>permanentFailure"}) {
		t.Errorf("health transitions %v", moves)
	}
	var meta struct {
		GenerationAttempt int    `json:"generationAttempt"`
		ParentPlanID      string `json:"parentPlanId"`
		HTN               struct {
			Operators []struct {
				Operator string `json:"operator"`
			} `json:"operators"`
		} `json:"htn"`
	}
	if err := json.Unmarshal(out.Execution.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.GenerationAttempt != 2 || meta.ParentPlanID != out.History[0].PlanID || len(meta.HTN.Operators) != 3 {
		t.Errorf("metadata %+v", meta)
	}
	// The skill stays disabled in this session: the next request plans the
	// taxi at once. A new session starts healthy.
	again, _ := h.request(`{"kind":"htn","sessionId":"s1","htn":{"domain":"taxi","goal":"travel-to(park)"}}`)
	if !again.Success || again.Attempts != 1 || again.Execution.Tools[0].Skill != "hail" {
		t.Errorf("same session: %s after %d attempts, first skill %s", again.Status, again.Attempts, again.Execution.Tools[0].Skill)
	}
	// A session reset makes walk usable again.
	reply, err := h.conn.NC.Request(bus.SubjectSessionReset, []byte(`{"sessionId":"s1"}`), 5*time.Second)
	if err != nil || !strings.Contains(string(reply.Data), `"healed":["walk"]`) {
		t.Fatalf("reset: %v %s", err, reply.Data)
	}
	fresh, _ := h.request(`{"kind":"htn","sessionId":"s1","htn":{"domain":"taxi","goal":"travel-to(park)"}}`)
	if fresh.Attempts != 2 || fresh.History[0].FailedSkills[0] != "walk" {
		t.Errorf("after reset: walk was not tried first: %+v", fresh.History)
	}
}

// respond answers external planner requests on subject with fn.
func respond(t *testing.T, h *harness, subject string, fn func(q generator.ExternalRequest) any) {
	t.Helper()
	sub, err := h.conn.NC.Subscribe(subject, func(m *nats.Msg) {
		var q generator.ExternalRequest
		if err := json.Unmarshal(m.Data, &q); err != nil {
			t.Errorf("external request: %v", err)
			return
		}
		go func() { // a slow answer must not hold up the next request
			ans := fn(q)
			if ans == nil {
				return
			}
			data, _ := json.Marshal(ans)
			_ = m.Respond(data)
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	_ = h.conn.NC.Flush()
}

func onePlan(skill string) map[string]any {
	return map[string]any{"tools": []map[string]any{{"toolId": "only", "skill": skill}}}
}

func TestFiveFailedAttemptsEndInAFallback(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t, "f1=permanent", "f2=permanent", "f3=permanent", "f4=permanent", "f5=permanent"))
	var attempts []int
	var mu sync.Mutex
	respond(t, h, "test.planner", func(q generator.ExternalRequest) any {
		mu.Lock()
		attempts = append(attempts, q.Attempt)
		mu.Unlock()
		for _, s := range []string{"f1", "f2", "f3", "f4", "f5"} {
			if !slices.Contains(q.DisabledSkills, s) {
				return onePlan(s)
			}
		}
		return map[string]any{"error": map[string]string{"code": "EXHAUSTED", "message": "nothing left", "category": "permanent"}}
	})
	out, ev := h.request(`{"kind":"external","planner":"test.planner","input":"open the door","sessionId":"s5"}`)
	if out.Status != planbus.StatusFallback || !out.Fallback || out.Success || out.Attempts != 5 {
		t.Fatalf("outcome %s fallback=%v after %d attempts", out.Status, out.Fallback, out.Attempts)
	}
	if !slices.Equal(out.DisabledSkills, []string{"f1", "f2", "f3", "f4"}) {
		t.Errorf("disabled %v", out.DisabledSkills)
	}
	if !strings.Contains(out.Narrative, "open the door") && !strings.Contains(out.Narrative, "path is unclear") {
		t.Errorf("narrative %q", out.Narrative)
	}
	if out.Tools == nil || len(out.Tools) != 0 {
		t.Errorf("fallback tools %v, want []", out.Tools)
	}
	if !slices.Equal(attempts, []int{1, 2, 3, 4, 5}) {
		t.Errorf("external planner asked for attempts %v", attempts)
	}
	if len(ev.of("request.replanning")) != 4 || len(ev.of("request.fallback")) != 1 {
		t.Errorf("events: %d replanning, %d fallback", len(ev.of("request.replanning")), len(ev.of("request.fallback")))
	}
}

func TestLateExternalPlannerCountsAsATimeoutAttempt(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	respond(t, h, "test.slow", func(q generator.ExternalRequest) any {
		if q.Attempt == 1 {
			<-release // answers only after the test ends: far too late
			return nil
		}
		return onePlan("echo")
	})
	out, ev := h.request(`{"kind":"external","planner":"test.slow"}`)
	if !out.Success || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts", out.Status, out.Attempts)
	}
	first := out.History[0]
	if first.State != "generation_failed" || first.Error == nil || first.Error.Category != planbus.CategoryTimeout || first.Error.Code != "GENERATION_TIMEOUT" {
		t.Errorf("attempt 1: %+v", first)
	}
	gen := ev.of("request.generating")
	if len(gen) != 2 {
		t.Fatalf("%d generations", len(gen))
	}
	if d := gen[1].Time.Sub(gen[0].Time); d < generator.GenerationTimeout {
		t.Errorf("attempt 2 began %s after attempt 1, before the %s budget ran out", d, generator.GenerationTimeout)
	}
}

func TestPlannerStoppedMidLoopIsReplaced(t *testing.T) {
	h := start(t, planner.Config{AckWait: time.Second}, simulated(t, "broken=permanent"))
	generated := make(chan int, 10)
	respond(t, h, "test.flaky", func(q generator.ExternalRequest) any {
		generated <- q.Attempt
		if q.Attempt == 1 {
			return map[string]any{"tools": []map[string]any{{"toolId": "wait", "skill": "sleep", "input": map[string]int{"ms": 500}},
				{"toolId": "b", "skill": "broken", "dependencies": []string{"wait"}}}}
		}
		return onePlan("echo")
	})
	done := make(chan *planbus.Outcome, 1)
	go func() {
		out, _ := h.request(`{"kind":"external","planner":"test.flaky"}`)
		done <- out
	}()
	select {
	case a := <-generated:
		if a != 1 {
			t.Fatalf("first generation is attempt %d", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no generation")
	}
	// Attempt 1's plan is running; the planner dies before it ends.
	h.node.Planners[0].Kill()
	if _, err := h.node.AddPlanner(context.Background(), planner.Config{AckWait: time.Second}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-done:
		if !out.Success || out.Attempts != 2 || out.History[0].State != planbus.PlanFailed {
			t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
		}
	case <-time.After(time.Minute):
		t.Fatal("the replacement planner did not finish the request")
	}
}

func TestConcurrentPatchesFromToolsBothSurvive(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	var tools []string
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"r%d","skill":"remember","input":{"notes":{"k%d":%d}}}`, i, i, i))
	}
	out, _ := h.request(`{"kind":"plan","sessionId":"shared","plan":{"maxConcurrency":6,"tools":[` + strings.Join(tools, ",") + `]}}`)
	if !out.Success {
		t.Fatalf("outcome %+v", out)
	}
	st, err := session.Open(context.Background(), h.conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(context.Background(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	notes, _ := got["notes"].(map[string]any)
	if len(notes) != 6 {
		t.Errorf("session notes %v, want all 6 patches", notes)
	}
}

func TestBadRequestsAreRefusedAndPublishNothing(t *testing.T) {
	h := start(t, planner.Config{DomainsDir: "../../examples/htn"}, simulated(t))
	tests := []struct{ name, doc, field, want string }{
		{"malformed", `{"kind": "plan",`, "", "malformed JSON"},
		{"unknown kind", `{"kind":"magic"}`, "/kind", "at /kind: value must be one of"},
		{"missing plan", `{"kind":"plan"}`, "/", "missing property 'plan'"},
		{"unknown skill", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"teleport"}]}}`, "/plan/tools/0/skill", `unknown skill "teleport"`},
		{"unknown fallback skill", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","fallback":{"skill":"teleport"}}]}}`,
			"/plan/tools/0/fallback/skill", `unknown skill "teleport"`},
		{"input the skill refuses", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"},{"toolId":"b","skill":"sleep","dependencies":["a"],"input":{"ms":-5}}]}}`,
			"/plan/tools/1/input", "skill sleep would refuse this input"},
		{"fallback input the skill refuses", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","fallback":{"skill":"fail","input":{"categroy":"x"}}}]}}`,
			"/plan/tools/0/fallback/input", "skill fail would refuse this input"},
		{"plan of nothing", `{"kind":"plan","plan":{"tools":[]}}`, "/plan/tools", "the plan has no tools"},
		{"plan with a cycle", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","dependencies":["b"]},{"toolId":"b","skill":"echo","dependencies":["a"]}]}}`, "/plan", "cycle: a -> b -> a"},
		{"htn syntax error", `{"kind":"htn","htn":{"program":"at(downtown", "goal":"x"}}`, "/htn/program", "htn: 1:"},
		{"htn goal syntax error", `{"kind":"htn","htn":{"program":"at(downtown).", "goal":"travel-to(("}}`, "/htn/goal", `goal "travel-to((": htn: 1:`},
		{"unknown domain", `{"kind":"htn","htn":{"domain":"nowhere", "goal":"x"}}`, "/htn/domain", `no domain "nowhere"`},
		{"goap without a domain", `{"kind":"goap"}`, "/", "missing property 'goap'"},
		{"unknown goap domain", `{"kind":"goap","goap":{"domain":"nowhere"}}`, "/goap/domain", `no GOAP domain "nowhere"`},
		{"goap expression that would build a gigabyte", `{"kind":"goap","sessionId":"boom","goap":{"goal":"g","inline":{"name":"b","facts":{"s":"x","done":false},` +
			`"actions":[{"name":"echo","effects":{"done":true},"cost":"len(repeat(repeat(s, 999999), 999999)) > 0 ? 1 : 1"}],` +
			`"goals":[{"name":"g","conditions":{"done":true}}]}}}`, "/goap/inline/actions/0/cost", "repeat is not available in GOAP expressions"},
		{"plan with a gate that would build a gigabyte", `{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo",` +
			`"verify":{"type":"expr","expr":"len(repeat(repeat(text, 999999), 999999)) > 0"}}]}}`, "/plan", "repeat is not available in gate expressions"},
		{"template without a library", `{"kind":"template","template":{"id":"x"}}`, "/kind", "no template library"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := h.c.Run(ctx, []byte(tt.doc), nil)
			var rej *client.RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("err = %v, want a rejection", err)
			}
			if rej.Reply.Error.Field != tt.field || !strings.Contains(rej.Reply.Error.Message, tt.want) {
				t.Errorf("rejection %+v, want field %q and %q", rej.Reply.Error, tt.field, tt.want)
			}
		})
	}
	if n := h.plansPublished(); n != 0 {
		t.Errorf("%d plans published for refused requests", n)
	}
}

func TestGOAPReplanFindsAnotherWay(t *testing.T) {
	domain, err := os.ReadFile("../../examples/goap/woodcutter.goap.json")
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, planner.Config{}, simulated(t, "fetch(item,from)=network", "shop(item,budget)", "chop(tree,note)", "gather(what)",
		"market(item,amount)", "build(structure,logs)"))
	out, _ := h.request(`{"kind":"goap","sessionId":"g1","goap":{"goal":"build-cabin","inline":` + string(domain) + `}}`)
	if !out.Success || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
	}
	if !slices.Equal(out.History[0].FailedSkills, []string{"fetch"}) {
		t.Errorf("attempt 1 failed skills %v, want [fetch]", out.History[0].FailedSkills)
	}
	var used []string
	for _, tl := range out.Execution.Tools {
		used = append(used, tl.Skill)
	}
	if slices.Contains(used, "fetch") || !slices.Contains(used, "shop") || used[len(used)-1] != "build" {
		t.Errorf("replanned skills %v: want the axe bought, not fetched, and the cabin built", used)
	}
}

const testLibrary = `{"version":"1","plans":[
 {"id":"primary","name":"Primary","triggers":["say hello"],"triggerThreshold":1,"steps":[
  {"id":"greet","name":"Greet","skill":"echo","input":{"text":"hi {who}"},
   "verify":{"type":"contains","path":"/text","value":"never there"},
   "onFail":{"retries":1,"backoffMs":10,"then":"fallback","plan":"backup"}}],
  "vars":{"who":{"default":"you","pattern":"[a-z]+"}}},
 {"id":"backup","name":"Backup","steps":[
  {"id":"wave","name":"Wave","skill":"echo","input":{"text":"wave at {who}"},
   "verify":{"type":"contains","path":"/text","value":"wave"}}],
  "vars":{"who":{"default":"you","pattern":"[a-z]+"}}}]}`

func TestTemplateGateFailureFallsBackToAnotherTemplate(t *testing.T) {
	lib, err := templates.Decode([]byte(testLibrary))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, planner.Config{Templates: lib}, simulated(t))
	out, ev := h.request(`{"kind":"template","input":"please say hello","template":{"vars":{"who":"bob"}}}`)
	if !out.Success || out.Attempts != 2 {
		t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
	}
	first := out.History[0]
	if first.State != planbus.PlanFailed || first.Error == nil || first.Error.Code != planbus.CodeVerifyFailed {
		t.Errorf("attempt 1: %+v, want failed by its gate", first)
	}
	if got := string(out.Execution.Tools[0].Output); got != `{"text":"wave at bob"}` {
		t.Errorf("backup output %s", got)
	}
	if n := len(ev.of(planbus.EventToolRetrying)); n != 1 {
		t.Errorf("%d retries of the refused step, want 1 (onFail retries 1)", n)
	}
	if len(ev.of(planbus.EventSkillHealth)) != 0 {
		t.Error("a refused output changed the echo skill's health")
	}
	// No template matches small talk: refused at once, nothing published.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = h.c.Run(ctx, []byte(`{"kind":"template","input":"what is the weather like?","template":{}}`), nil)
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Field != "/template" {
		t.Errorf("small talk: %v, want a rejection at /template", err)
	}
}

func TestTemplateFallbackStepRunsInTheSamePlan(t *testing.T) {
	lib, err := templates.Decode([]byte(`{"version":"1","plans":[
	 {"id":"fetch","name":"Fetch","triggers":["fetch it"],"triggerThreshold":1,"steps":[
	  {"id":"get","name":"Get","skill":"fail","input":{"category":"network"},"onFail":{"retries":1,"backoffMs":10,"then":"fallback","step":"cached"}},
	  {"id":"show","name":"Show","skill":"echo","input":{"got":{"$ref":"get#/from"}}}],
	  "fallbacks":[{"id":"cached","name":"From the cache","skill":"echo","input":{"from":"cache"},
	   "verify":{"type":"equals","path":"/from","value":"cache"},"onFail":"abort"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, planner.Config{Templates: lib}, simulated(t))
	out, _ := h.request(`{"kind":"template","input":"please fetch it","template":{}}`)
	if !out.Success || out.Attempts != 1 {
		t.Fatalf("outcome %s after %d attempts: %+v", out.Status, out.Attempts, out.History)
	}
	get := out.Execution.Tools[0]
	if get.Skill != "echo" || get.Attempts != 3 || string(out.Execution.Tools[1].Output) != `{"got":"cache"}` {
		t.Errorf("get: %s after %d attempts; show: %s", get.Skill, get.Attempts, out.Execution.Tools[1].Output)
	}
}

// A request id names one request: the same request sent again is accepted
// as a duplicate, runs nothing new and ends with the first one's outcome;
// another request under the id is refused naming /requestId.
func TestARequestIDNamesOneRequest(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	const doc = `{"requestId": "once", "kind": "plan", "plan": {"tools": [{"toolId": "a", "skill": "echo", "input": {"hi": 1}}]}}`
	first, _ := h.request(doc)
	if first.Status != planbus.StatusSucceeded {
		t.Fatalf("first run: %+v", first)
	}
	before := h.plansPublished()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc, err := h.c.SubmitRequest(ctx, []byte(doc))
	if err != nil || acc.RequestID != "once" || !acc.Duplicate || acc.Status != "accepted" {
		t.Fatalf("the same request again: %+v, %v; want accepted as a duplicate", acc, err)
	}
	again, ev := h.request(doc)
	if !again.FinishedAt.Equal(first.FinishedAt) || again.PlanID != first.PlanID || again.Attempts != first.Attempts {
		t.Errorf("outcome of the request sent again: %+v, want the first one's %+v", again, first)
	}
	if d := ev.of(planbus.EventRequestDuplicate); len(d) == 0 || !strings.Contains(d[0].Message, "runs nothing new") {
		t.Errorf("duplicate events %+v, want one saying it runs nothing new", d)
	}
	if n := h.plansPublished(); n != before {
		t.Errorf("%d plans published for the request sent again", n-before)
	}

	other := strings.Replace(doc, `"hi": 1`, `"hi": 2`, 1)
	_, err = h.c.SubmitRequest(ctx, []byte(other))
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Reply.Error.Field != "/requestId" || !strings.Contains(rej.Reply.Error.Message, "was accepted at") {
		t.Fatalf("another request under the id: %v, want a rejection at /requestId", err)
	}
	// A bare plan's id is its planId: running the same file twice runs it once.
	const bare = `{"planId": "bare-once", "tools": [{"toolId": "a", "skill": "echo", "input": {}}]}`
	p1, err := h.c.RunPlan(ctx, []byte(bare), nil)
	if err != nil {
		t.Fatal(err)
	}
	acc, err = h.c.SubmitPlanJSON(ctx, []byte(bare))
	if err != nil || !acc.Duplicate {
		t.Fatalf("the same bare plan again: %+v, %v; want a duplicate", acc, err)
	}
	if p2, err := h.c.RunPlan(ctx, []byte(bare), nil); err != nil || !p2.FinishedAt.Equal(p1.FinishedAt) {
		t.Errorf("the same bare plan run again: %+v, %v; want the first outcome", p2, err)
	}
}

// planbus.skills takes nothing or {"sessionId": ...}; anything else is
// refused naming the field.
func TestSkillsEndpointRefusesBadBodies(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	for _, c := range []struct{ body, field string }{
		{`x`, "/"}, {`[]`, "/"}, {`{"zz": 1}`, "/"}, {`{"sessionId": 7}`, "/"}, {`{} {}`, "/"},
		{`{"sessionId": "a.b*>"}`, "/sessionId"},
	} {
		m, err := h.conn.NC.Request(bus.SubjectSkills, []byte(c.body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rej planbus.Rejected
		if m.Header.Get("Nats-Service-Error-Code") == "" || json.Unmarshal(m.Data, &rej) != nil || rej.Error.Field != c.field {
			t.Errorf("skills %s: %s, want a rejection at %q", c.body, m.Data, c.field)
		}
	}
	for _, body := range []string{``, `{}`, `{"sessionId": "s1"}`} {
		m, err := h.conn.NC.Request(bus.SubjectSkills, []byte(body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var reply struct {
			SessionID string            `json:"sessionId"`
			Skills    []json.RawMessage `json:"skills"`
		}
		if m.Header.Get("Nats-Service-Error-Code") != "" || json.Unmarshal(m.Data, &reply) != nil || len(reply.Skills) == 0 || reply.SessionID == "" {
			t.Errorf("skills %q: %s, want the skills", body, m.Data)
		}
	}
}

// A manifest that is not a JSON object counts as a skill with only its
// name (docs/protocol.md): a plan calling it is not refused as unknown.
func TestAManifestThatIsNotJSONIsASkillWithItsName(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "scribble", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	const doc = `{"requestId": "scribbler", "kind": "plan", "plan": {"tools": [{"toolId": "a", "skill": "scribble"}]}}`
	acc, err := h.c.SubmitRequest(ctx, []byte(doc))
	if err != nil || acc.Status != "accepted" || acc.Duplicate {
		t.Fatalf("a plan calling the skill: %+v, %v; want it accepted", acc, err)
	}
	m, err := h.conn.NC.Request(bus.SubjectSkills, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), `"name":"scribble"`) {
		t.Errorf("skills: %s, want scribble listed by its name", m.Data)
	}
	// The same request sent again is a duplicate even once its skill is
	// gone, which would refuse it were it new.
	if err := kv.Delete(ctx, "scribble"); err != nil {
		t.Fatal(err)
	}
	if acc, err := h.c.SubmitRequest(ctx, []byte(doc)); err != nil || !acc.Duplicate {
		t.Errorf("the request again without its skill: %+v, %v; want a duplicate", acc, err)
	}
}

// A call refused for its input says nothing of the skill's health: a
// client sending bad input must not disable a skill for the session,
// where the same number of permanent failures does degrade it.
func TestInvalidInputLeavesTheSkillHealthy(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	failing := func(session string, category planbus.Category) []string {
		var moves []string
		for i := range 6 {
			doc := fmt.Sprintf(`{"kind":"plan","sessionId":%q,"requestId":"%s-%s-%d","maxAttempts":1,"plan":{"tools":[
				{"toolId":"f","skill":"fail","input":{"category":%q,"code":"BAD"},"retryPolicy":{"maxAttempts":1}}]}}`,
				session, session, category, i, category)
			out, ev := h.request(doc)
			if out.Success {
				t.Fatalf("%s: request %d succeeded, want it failed", category, i)
			}
			for _, e := range ev.of(planbus.EventSkillHealth) {
				moves = append(moves, e.From+">"+e.To)
			}
		}
		return moves
	}
	if moves := failing("bad-input", planbus.CategoryInvalidInput); len(moves) != 0 {
		t.Errorf("six calls refused for their input moved the skill's health: %v", moves)
	}
	if moves := failing("broken", planbus.CategoryPermanent); !slices.Equal(moves, []string{"healthy>degraded", "degraded>permanentFailure"}) {
		t.Errorf("six permanent failures moved the skill's health %v, want healthy>degraded>permanentFailure", moves)
	}
}

// A plan refused because its skill is disabled in the session says where,
// why and how to heal it, and its fallback text says what went wrong
// rather than a story about an input the request does not have.
func TestADisabledSkillsRefusalSaysWhyAndHowToHealIt(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	down := `{"kind":"plan","sessionId":"s-down","plan":{"tools":[{"toolId":"f","skill":"fail",
		"input":{"category":"network","code":"DOWN","message":"the link is down"},"retryPolicy":{"maxAttempts":1}}]}}`
	if out, _ := h.request(down); out.Success {
		t.Fatalf("the failing plan succeeded: %+v", out)
	}
	out, _ := h.request(`{"kind":"plan","sessionId":"s-down","plan":{"tools":[{"toolId":"g","skill":"fail","input":{"attempts":0}}]}}`)
	if out.Status != planbus.StatusFallback || out.Error == nil || out.Error.Code != "SKILL_DISABLED" {
		t.Fatalf("outcome %s %+v, want a fallback with SKILL_DISABLED", out.Status, out.Error)
	}
	for _, part := range []string{`skill "fail"`, "permanentFailure in session s-down", "the link is down", "planner reset s-down"} {
		if !strings.Contains(out.Error.Message, part) {
			t.Errorf("the refusal %q does not say %q", out.Error.Message, part)
		}
	}
	if !strings.HasPrefix(out.Narrative, "No plan for this request could run: ") || !strings.Contains(out.Narrative, "planner reset s-down") {
		t.Errorf("narrative %q, want what went wrong", out.Narrative)
	}
}

// Requests that name no session share the default one, with anyone: one
// whose optional tool fails twice with network errors does not disable
// the skill for the next, a stranger's (issue 23), where the same in a
// named session does. The default session keeps no skill health.
func TestTheDefaultSessionKeepsNoHealth(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	failTwice := func(session string) {
		t.Helper()
		sess := ""
		if session != "" {
			sess = fmt.Sprintf(`"sessionId":%q,`, session)
		}
		out, _ := h.request(`{"kind":"plan",` + sess + `"plan":{"tools":[
			{"toolId":"opt","skill":"fail","required":false,"input":{"category":"network","code":"DOWN","message":"the link is down"},"retryPolicy":{"maxAttempts":2,"backoffMs":1}},
			{"toolId":"ok","skill":"echo","input":{"n":1}}]}}`)
		if !out.Success {
			t.Fatalf("a plan with an optional failing tool: %s %+v", out.Status, out.Error)
		}
	}
	next := func(session string) *planbus.Outcome {
		sess := ""
		if session != "" {
			sess = fmt.Sprintf(`"sessionId":%q,`, session)
		}
		out, _ := h.request(`{"kind":"plan",` + sess + `"plan":{"tools":[{"toolId":"g","skill":"fail","input":{"attempts":0}}]}}`)
		return out
	}
	failTwice("")
	if out := next(""); !out.Success {
		t.Errorf("a stranger's request after it, in the default session: %s %+v; want it run", out.Status, out.Error)
	}
	var skills planbus.SkillsReply
	if err := h.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := h.conn.NC.Request(bus.SubjectSkills, []byte(`{}`), 10*time.Second)
	if err != nil || json.Unmarshal(m.Data, &skills) != nil {
		t.Fatalf("skills: %v %s", err, m.Data)
	}
	for _, sk := range skills.Skills {
		if sk.Health.State != planbus.HealthHealthy {
			t.Errorf("skill %s is %s in the default session, want healthy", sk.Manifest.Name, sk.Health.State)
		}
	}
	// The same in a named session disables it there.
	failTwice("mine")
	if out := next("mine"); out.Error == nil || out.Error.Code != "SKILL_DISABLED" {
		t.Errorf("in session mine: %s %+v; want SKILL_DISABLED", out.Status, out.Error)
	}
}

// An input with a reference to another tool's output is known only when
// its call is released: the planner does not judge it at submission (the
// worker checks it then), where a literal one the skill refuses is
// refused at once (TestBadRequestsAreRefusedAndPublishNothing).
func TestInputsWithReferencesAreCheckedWhenReleased(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	out, _ := h.request(`{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"ms":"soon"}},
		{"toolId":"b","skill":"sleep","dependencies":["a"],"input":{"ms":{"$ref":"a#/ms"}}}]}}`)
	if out.Execution == nil {
		t.Fatalf("no plan ran: %+v", out)
	}
	var b *planbus.ToolOutcome
	for i := range out.Execution.Tools {
		if out.Execution.Tools[i].ToolID == "b" {
			b = &out.Execution.Tools[i]
		}
	}
	if b == nil || b.Error == nil || b.Error.Code != planbus.CodeInvalidInput {
		t.Errorf("tool b: %+v, want it run and refused by the worker (INVALID_INPUT)", b)
	}
}

// A request's plan that ends while a replica of the requests bucket is
// behind (a node just back from a partition, which has not seen the
// request's loop state) still ends its request: "no loop state" is taken
// for a plan submitted directly only when the stream leader says so.
// Before, the planner dropped such an execution result and the request
// stayed executing for ever.
func TestRequestsEndWhileAReplicaIsBehind(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	bustest.ReplicaBehind(t, h.conn, bus.BucketRequests)
	for i := range 12 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		doc := fmt.Sprintf(`{"requestId":"behind-%d","kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"n":%d}}]}}`, i, i)
		out, err := h.c.Run(ctx, []byte(doc), nil)
		cancel()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !out.Success {
			t.Fatalf("request %d: %s %+v", i, out.Status, out.Error)
		}
	}
}

// A request whose plan ran some tools and then timed out ends in a
// fallback that says what ran, not that no plan could run.
func TestFallbackSaysWhatRan(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	out, _ := h.request(`{"kind":"plan","requestId":"ran-some","plan":{"timeoutMs":1500,"tools":[
		{"toolId":"a","skill":"echo","input":{}},
		{"toolId":"b","skill":"echo","dependencies":["a"],"input":{}},
		{"toolId":"c","skill":"sleep","dependencies":["b"],"input":{"ms":60000}}]}}`)
	if out.Status != planbus.StatusFallback {
		t.Fatalf("outcome %s, want fallback", out.Status)
	}
	if want := "Plan ran-some-1 ran 2 of its 3 tools to success, then timed out: "; !strings.HasPrefix(out.Narrative, want) {
		t.Errorf("narrative %q, want it to start %q", out.Narrative, want)
	}
}

package planner_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/templates"
	"github.com/planbus/planbus/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func starterLibrary(t *testing.T) *templates.Library {
	t.Helper()
	lib, err := templates.ReadFile("../../examples/templates/library.json")
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// guideSession is a client's side of a guided session, with the
// session's guide.* events as the client sees them.
type guideSession struct {
	t      *testing.T
	c      *client.Client
	id     string
	events chan *nats.Msg
}

func newGuideSession(t *testing.T, conn *bus.Conn, c *client.Client, id string) *guideSession {
	t.Helper()
	g := &guideSession{t: t, c: c, id: id, events: make(chan *nats.Msg, 64)}
	sub, err := conn.NC.ChanSubscribe(bus.EventSubject(id, planbus.EventGuidePrefix+">"), g.events)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return g
}

// turn plays one turn and checks the reply against its schema.
func (g *guideSession) turn(q planbus.GuideTurn) *planbus.GuideReply {
	g.t.Helper()
	q.SessionID = g.id
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := g.c.Guide(ctx, q)
	if err != nil {
		g.t.Fatalf("turn %+v: %v", q, err)
	}
	doc, _ := json.Marshal(r)
	if err := schemas.Validate(schemas.GuideReply, doc); err != nil {
		g.t.Fatalf("reply %s: %v", doc, err)
	}
	if r.SessionID != g.id {
		g.t.Errorf("reply of session %q, want %q", r.SessionID, g.id)
	}
	return r
}

// run reports one tool output.
func (g *guideSession) run(output string, exitCode *int) *planbus.GuideReply {
	g.t.Helper()
	return g.turn(planbus.GuideTurn{ToolResults: []planbus.GuideToolResult{{Tool: "code_execution_tool", Output: json.RawMessage(output), ExitCode: exitCode}}})
}

// event waits for the session's next guide event, which must be of type
// guide.<transition>, about step (0: any) of template.
func (g *guideSession) event(transition, template string, step int) {
	g.t.Helper()
	select {
	case m := <-g.events:
		if err := schemas.Validate(schemas.Event, m.Data); err != nil {
			g.t.Errorf("event %s: %v", m.Data, err)
		}
		var ev planbus.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			g.t.Fatal(err)
		}
		want := planbus.EventGuidePrefix + planbus.EventType(transition)
		if ev.Type != want || m.Subject != bus.EventSubject(g.id, want) || ev.RequestID != g.id || ev.SessionID != g.id ||
			ev.Template != template || (step != 0 && ev.Step != step) || ev.Message == "" {
			g.t.Errorf("event on %s: %s; want %s of %s step %d", m.Subject, m.Data, want, template, step)
		}
	case <-time.After(10 * time.Second):
		g.t.Fatalf("no %s event within 10s", transition)
	}
}

// noEvent checks that no guide event is waiting: a turn that changed
// nothing published none. Events of earlier turns were all taken, and a
// turn's event is published before its reply, so one would be here by now
// once a later message (a flush) has gone round.
func (g *guideSession) noEvent(conn *bus.Conn) {
	g.t.Helper()
	if err := conn.NC.Flush(); err != nil {
		g.t.Fatal(err)
	}
	select {
	case m := <-g.events:
		g.t.Errorf("unexpected event %s", m.Data)
	default:
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func ptr(n int) *int { return &n }

// A guided session over NATS, with authorization on (every component on
// its role): "fix the bug in parser.go" activates the bugfix plan and the
// context matches its golden file; tool results advance it; a failing
// block step does not advance and says so; a repeated turn changes
// nothing; another planner resumes the session from KV; the plan
// completes. A second session expires after stale_after_turns + 1 turns
// without progress. Every transition is an event; the server logs no
// permissions violation.
func TestGuidedSessionOverNATS(t *testing.T) {
	var logs bustest.SyncBuffer
	log := zerolog.New(&logs).Level(zerolog.WarnLevel)
	lib := starterLibrary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: bus.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir()}, Auth: true, NoDispatcher: true,
		Planner: planner.Config{Templates: lib}}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	conn, err := n.DialAs(ctx, bus.RoleClient, log)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}

	g := newGuideSession(t, conn, c, "s-parser")
	r := g.turn(planbus.GuideTurn{Message: "fix the bug in parser.go", Domain: "bugfix"})
	if r.Transition != planbus.GuideActivated || r.Plan == nil || r.Plan.ID != "bugfix_workflow" || r.Plan.Step != 1 || r.Plan.Of != 5 {
		t.Fatalf("activation: %+v", r)
	}
	checkGolden(t, "guide/activated.txt", r.Context+"\n")
	g.event(planbus.GuideActivated, "bugfix_workflow", 1)

	// Step 1 has no check: any result advances it. The same turn again
	// (same turnId) gets the same reply and changes nothing.
	first := g.turn(planbus.GuideTurn{TurnID: "t2", ToolResults: []planbus.GuideToolResult{{Tool: "code_execution_tool",
		Output: json.RawMessage(`"--- FAIL: TestParse (0.00s)"`)}}})
	if first.Transition != planbus.GuideAdvanced || first.Plan.Step != 2 {
		t.Fatalf("step 1: %+v", first)
	}
	g.event(planbus.GuideAdvanced, "bugfix_workflow", 1)
	again := g.turn(planbus.GuideTurn{TurnID: "t2", ToolResults: []planbus.GuideToolResult{{Tool: "code_execution_tool",
		Output: json.RawMessage(`"--- FAIL: TestParse (0.00s)"`)}}})
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("repeated turn (-first +again):\n%s", diff)
	}
	g.noEvent(conn)

	if r := g.run(`{"stdout":"parser_test.go:9:func TestParse(t *testing.T) {"}`, nil); r.Transition != planbus.GuideAdvanced || r.Plan.Step != 3 {
		t.Fatalf("step 2: %+v", r)
	}
	g.event(planbus.GuideAdvanced, "bugfix_workflow", 2)
	if r := g.run(`{"stdout":"Applied patch parser.go cleanly."}`, ptr(0)); r.Transition != planbus.GuideAdvanced || r.Plan.Step != 4 {
		t.Fatalf("step 3: %+v", r)
	}
	g.event(planbus.GuideAdvanced, "bugfix_workflow", 3)

	// Step 4 blocks: a failing test does not advance it, twice, and the
	// context says so.
	for range 2 {
		r := g.run(`{"stdout":"--- FAIL: TestParse (0.00s)\nFAIL\n"}`, ptr(1))
		if r.Transition != planbus.GuideBlocked || r.Plan.Step != 4 || r.Check == nil || r.Check.Passed || r.Check.Action != "block" ||
			!strings.Contains(r.Context, "Step 4 failed verification: /stdout does not match") || !strings.Contains(r.Context, "Step 4 of 5: Test the fix ← YOU ARE HERE") {
			t.Fatalf("failing step 4: %+v\n%s", r, r.Context)
		}
		g.event(planbus.GuideBlocked, "bugfix_workflow", 4)
	}

	// Another planner takes over: the session's state is in KV.
	n.Planners[0].Stop()
	if _, err := n.AddPlanner(ctx, planner.Config{Templates: lib}, log); err != nil {
		t.Fatal(err)
	}
	if r := g.turn(planbus.GuideTurn{Message: "how is it going?"}); r.Transition != planbus.GuideNone || r.Plan.Step != 4 || r.Plan.TurnsSinceProgress != 3 {
		t.Fatalf("after the takeover: %+v", r)
	}
	g.noEvent(conn)
	if r := g.run(`{"stdout":"ok  \texample.com/parser\t0.01s\n"}`, ptr(0)); r.Transition != planbus.GuideAdvanced || r.Plan.Step != 5 {
		t.Fatalf("step 4 passing: %+v", r)
	}
	g.event(planbus.GuideAdvanced, "bugfix_workflow", 4)
	r = g.run(`{"stdout":"ok  \texample.com/parser\t0.02s\n"}`, ptr(0))
	if r.Transition != planbus.GuideCompleted || r.Plan.Status != planbus.GuidePlanCompleted || !strings.HasPrefix(r.Context, "[PLAN COMPLETED: bugfix_workflow]") {
		t.Fatalf("step 5: %+v", r)
	}
	g.event(planbus.GuideCompleted, "bugfix_workflow", 5)
	if r := g.turn(planbus.GuideTurn{Message: "thanks!", Domain: "conversational"}); r.Transition != planbus.GuideNone || r.Plan != nil || r.Context != "" {
		t.Errorf("after completion: %+v", r)
	}

	// Staleness: bugfix_workflow expires after 15 turns without progress,
	// on the 16th.
	s := newGuideSession(t, conn, c, "s-stale")
	s.turn(planbus.GuideTurn{Message: "debugging the lexer", Domain: "bugfix"})
	s.event(planbus.GuideActivated, "bugfix_workflow", 1)
	for i := 1; i <= 15; i++ {
		r := s.turn(planbus.GuideTurn{Message: "what about lunch?"})
		if r.Transition != planbus.GuideNone || r.Plan == nil || r.Plan.TurnsSinceProgress != i {
			t.Fatalf("turn %d without progress: %+v", i, r)
		}
	}
	r = s.turn(planbus.GuideTurn{Message: "what about lunch?"})
	if r.Transition != planbus.GuideExpired || r.Plan.Status != planbus.GuidePlanExpired || !strings.HasPrefix(r.Context, "[PLAN EXPIRED: bugfix_workflow]") {
		t.Fatalf("turn 16 without progress: %+v", r)
	}
	s.event(planbus.GuideExpired, "bugfix_workflow", 0)
	if r := s.turn(planbus.GuideTurn{Message: "what about lunch?"}); r.Transition != planbus.GuideNone || r.Plan != nil {
		t.Errorf("after expiry: %+v", r)
	}

	// A turn that ends a plan goes on to match its message: the plan
	// expires and the message starts it again, two events, the end first.
	// Then a warn step that fails its check is warned, not blocked.
	x := newGuideSession(t, conn, c, "s-next")
	x.turn(planbus.GuideTurn{Message: "debugging the lexer", Domain: "bugfix"})
	x.event(planbus.GuideActivated, "bugfix_workflow", 1)
	for range 15 {
		x.turn(planbus.GuideTurn{Message: "what about lunch?"})
	}
	r = x.turn(planbus.GuideTurn{Message: "fix the bug in lexer.go", Domain: "bugfix"})
	if r.Transition != planbus.GuideActivated || r.Ended == nil || r.Ended.Transition != planbus.GuideExpired || r.Plan.Step != 1 ||
		!strings.HasPrefix(r.Context, "[PLAN EXPIRED: bugfix_workflow]") || !strings.Contains(r.Context, "[ACTIVE PLAN: bugfix_workflow]") {
		t.Fatalf("expiry with a message: %+v\n%s", r, r.Context)
	}
	x.event(planbus.GuideExpired, "bugfix_workflow", 0)
	x.event(planbus.GuideActivated, "bugfix_workflow", 1)
	if r := x.run(`"--- FAIL: TestLex (0.00s)"`, nil); r.Transition != planbus.GuideAdvanced {
		t.Fatalf("step 1: %+v", r)
	}
	x.event(planbus.GuideAdvanced, "bugfix_workflow", 1)
	if r := x.run(`{"stdout":""}`, nil); r.Transition != planbus.GuideWarned || r.Check == nil || r.Check.Action != "warn" || r.Plan.Step != 2 {
		t.Fatalf("failing warn step 2: %+v", r)
	}
	x.event(planbus.GuideWarned, "bugfix_workflow", 2)

	if strings.Contains(logs.String(), "Violation") || strings.Contains(logs.String(), "permissions violation") {
		t.Errorf("permissions violations:\n%s", logs.String())
	}
}

// Bad turns are refused with the field at fault, and change nothing.
func TestGuideTurnRefusals(t *testing.T) {
	h := start(t, planner.Config{Templates: starterLibrary(t)}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tests := []struct {
		name, body, field, want string
	}{
		{"not JSON", `{"sessionId":`, "", "malformed JSON"},
		{"no session", `{"message":"hi"}`, "/", "missing property 'sessionId'"},
		{"bad session", `{"sessionId":"a.b","message":"hi"}`, "/sessionId", "does not match pattern"},
		{"bad domain", `{"sessionId":"s","message":"hi","domain":"a b"}`, "/domain", "does not match pattern"},
		{"result without output", `{"sessionId":"s","message":"","toolResults":[{"tool":"x"}]}`, "/toolResults/0", "missing property 'output'"},
		{"unknown field", `{"sessionId":"s","message":"hi","mesage":"x"}`, "/", "additional properties 'mesage' not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := h.conn.NC.RequestWithContext(ctx, bus.SubjectGuideTurn, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var rej planbus.Rejected
			if err := json.Unmarshal(msg.Data, &rej); err != nil || rej.Status != "rejected" {
				t.Fatalf("answer %s", msg.Data)
			}
			if rej.Error.Field != tt.field || !strings.Contains(rej.Error.Message, tt.want) {
				t.Errorf("rejected at %q: %s; want %q containing %q", rej.Error.Field, rej.Error.Message, tt.field, tt.want)
			}
		})
	}
	kv, err := h.conn.JS.KeyValue(ctx, bus.BucketGuides)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	if err == nil {
		for k := range keys.Keys() {
			t.Errorf("a refused turn stored session %q", k)
		}
	}

	// A planner without a library says how to give it one.
	bare := start(t, planner.Config{}, simulated(t))
	msg, err := bare.conn.NC.RequestWithContext(ctx, bus.SubjectGuideTurn, []byte(`{"sessionId":"s","message":"fix the bug"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg.Data), "start it with --templates FILE") {
		t.Errorf("without a library: %s", msg.Data)
	}
}

// Turns of one session answered at once by two planners are played one
// after the other: compare-and-set loses none of them.
func TestGuidedTurnsRaceThroughCompareAndSet(t *testing.T) {
	lib := starterLibrary(t)
	h := start(t, planner.Config{Templates: lib}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.node.AddPlanner(ctx, planner.Config{Templates: lib}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	g := newGuideSession(t, h.conn, h.c, "s-race")
	if r := g.turn(planbus.GuideTurn{Message: "fix the bug in parser.go", Domain: "bugfix"}); r.Transition != planbus.GuideActivated {
		t.Fatalf("activation: %+v", r)
	}
	const turns = 12
	var wg sync.WaitGroup
	seen := make(chan int, turns)
	for range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.c.Guide(ctx, planbus.GuideTurn{SessionID: "s-race", Message: "still there?"})
			if err != nil {
				t.Error(err)
				return
			}
			seen <- r.Plan.TurnsSinceProgress
		}()
	}
	wg.Wait()
	close(seen)
	counts := map[int]bool{}
	for n := range seen {
		if counts[n] {
			t.Errorf("two turns both saw %d turns without progress", n)
		}
		counts[n] = true
	}
	if r := g.turn(planbus.GuideTurn{Message: "and now?"}); r.Plan == nil || r.Plan.TurnsSinceProgress != turns+1 {
		t.Errorf("after %d racing turns and one more: %+v, want %d turns without progress", turns, r.Plan, turns+1)
	}
}

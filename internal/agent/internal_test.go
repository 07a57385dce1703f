package agent

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/goap"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

// coreAgent is an agent of the chores or door test domain, its decisions
// taken without a bus: plans come from goap.Plan with every skill usable.
func coreAgent(t *testing.T, domain string, world goap.State) (*agent, *agentDoc) {
	t.Helper()
	doc, err := os.ReadFile("testdata/agents/" + domain + ".goap.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := goap.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	ad := &agentDoc{Request: &request.Request{RequestID: "ag", SessionID: "s", Kind: request.KindGOAP, GOAP: &request.GOAPRequest{Domain: domain, Agent: true}},
		Domain: doc, Status: planbus.AgentRunning}
	a := turnOf(t, ad, d, world)
	return a, ad
}

// turns counts the turns of each test agent: each turn comes a tick after
// the one before (an agent plans and releases a step at most once a
// tick), the first at t0.
var turns = map[*agentDoc]int{}

var t0 = time.Unix(1000, 0)

// turnOf restores a turn of doc in world, as the service does for each
// message, a tick after the turn before.
func turnOf(t *testing.T, doc *agentDoc, d *goap.Domain, world goap.State) *agent {
	t.Helper()
	now := t0.Add(time.Duration(turns[doc]) * Tick)
	turns[doc]++
	return turnAt(t, doc, d, world, now)
}

// turnAt is turnOf at now.
func turnAt(t *testing.T, doc *agentDoc, d *goap.Domain, world goap.State, now time.Time) *agent {
	t.Helper()
	pf := func(goal string, w goap.State, disabled []string) (*goap.Result, error) {
		res, err := goap.Plan(context.Background(), d, w, goal, goap.Options{Disabled: func(s string) bool {
			for _, x := range disabled {
				if x == s {
					return true
				}
			}
			return false
		}})
		var ue *goap.UnreachableError
		if errors.As(err, &ue) {
			return nil, &generator.Error{Code: "NO_PLAN", Category: planbus.CategoryPermanent, Message: err.Error()}
		}
		return res, err
	}
	a, err := newAgent(doc, d, world, now, pf)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A step's own statePatch can reach the world before its result: the
// plan is kept, whether the step is the first or the last, and the
// result then advances it.
func TestAgentKeepsThePlanWhenAStepsPatchComesFirst(t *testing.T) {
	a, doc := coreAgent(t, "chores", goap.State{})
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step == nil || doc.Step.Action != "boil-water" || doc.Tracker.Goal != "clean-dishes" {
		t.Fatalf("first step %+v of %+v", doc.Step, doc.Tracker)
	}
	first := doc.Step.PlanID
	// boil-water's patch arrives: wash-dishes's precondition now holds
	// and boil-water's own would still apply; either way the plan goes on.
	a = turnOf(t, doc, a.d, goap.State{"water": true})
	if err := a.onWorld(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step == nil || doc.Step.PlanID != first || len(a.fx.cancel) != 0 || doc.Tracker.Replans != 0 {
		t.Fatalf("after the step's own patch: step %+v, cancels %v, tracker %+v", doc.Step, a.fx.cancel, doc.Tracker)
	}
	a = turnOf(t, doc, a.d, goap.State{"water": true})
	if err := a.onResult(&planbus.ExecutionResult{PlanID: first, State: planbus.PlanSucceeded, Success: true}); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step == nil || doc.Step.Action != "wash-dishes" || a.fx.publish == nil {
		t.Fatalf("after the result: step %+v", doc.Step)
	}
	// The last step's patch: the goal holds; the step is let go and the
	// next goal taken.
	a = turnOf(t, doc, a.d, goap.State{"water": true, "dishes": true})
	if err := a.onWorld(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if st := doc.Goals["clean-dishes"]; st == nil || st.Succeeded != 1 || doc.Tracker.Goal != "clean-floor" || doc.Step.Action != "sweep" {
		t.Fatalf("after the last patch: stats %+v, tracker %+v, step %+v", st, doc.Tracker, doc.Step)
	}
}

// A world that does not fit the domain (a fact of the wrong type) drops
// the plan and leaves the agent waiting, with no error to hand the
// message back for.
func TestAgentWaitsOutAWorldThatDoesNotFit(t *testing.T) {
	a, doc := coreAgent(t, "chores", goap.State{})
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	running := doc.Step.PlanID
	a = turnOf(t, doc, a.d, goap.State{"water": "lots"})
	if err := a.onWorld(); err != nil {
		t.Fatalf("onWorld: %v", err)
	}
	a.store()
	if doc.Step != nil || doc.Tracker != nil || doc.Status != planbus.AgentRunning || !strings.Contains(doc.Waiting, "water") ||
		len(a.fx.cancel) != 1 || a.fx.cancel[0] != running {
		t.Fatalf("step %+v tracker %+v status %s waiting %q cancels %v", doc.Step, doc.Tracker, doc.Status, doc.Waiting, a.fx.cancel)
	}
	// Fixed: it decides again.
	a = turnOf(t, doc, a.d, goap.State{"water": true})
	if err := a.onWorld(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step == nil || doc.Step.Action != "wash-dishes" {
		t.Fatalf("after the fix: step %+v", doc.Step)
	}
}

// A step that fails replans without its skill; a goal no plan reaches
// then cools down.
func TestAgentLeavesAFailedSkillOut(t *testing.T) {
	a, doc := coreAgent(t, "door", goap.State{"has_key": false})
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	// The cheapest plan takes the key with remember, then walks and opens.
	if doc.Step == nil {
		t.Fatal("no step")
	}
	var failed *agentStep
	for doc.Step != nil && doc.Step.Action != "get-key" {
		// walk first: let it succeed.
		a = turnOf(t, doc, a.d, goap.State{"has_key": false, "at_door": true})
		if err := a.onResult(&planbus.ExecutionResult{PlanID: doc.Step.PlanID, Success: true, State: planbus.PlanSucceeded}); err != nil {
			t.Fatal(err)
		}
		a.store()
	}
	failed = doc.Step
	a = turnOf(t, doc, a.d, goap.State{"has_key": false, "at_door": true})
	err := a.onResult(&planbus.ExecutionResult{PlanID: failed.PlanID, State: planbus.PlanFailed, CanReplan: true,
		Error: &planbus.ErrorInfo{Code: "X", Message: "no key today", Category: planbus.CategoryPermanent},
		Tools: []planbus.ToolOutcome{{ToolID: "2-get-key", Skill: "remember", State: planbus.ToolFailed}}})
	if err != nil {
		t.Fatal(err)
	}
	a.store()
	st := doc.Goals["open-door"]
	if st == nil || st.Failed != 1 || doc.Step != nil || doc.Tracker != nil {
		t.Fatalf("stats %+v, step %+v, tracker %+v: want the goal given up", st, doc.Step, doc.Tracker)
	}
	until, ok := doc.Arbiter.Cooldowns["open-door"]
	if !ok || !until.Equal(a.now.Add(5*time.Second)) || !doc.WakeAt.Equal(until) {
		t.Fatalf("cooldown %v (%v), wake at %v: want 5s after the failure", until, ok, doc.WakeAt)
	}
	var failedEv []string
	for _, ev := range a.fx.events {
		if ev.Type == planbus.EventAgentGoalFailed {
			failedEv = append(failedEv, ev.Message)
		}
	}
	if len(failedEv) != 1 || !strings.Contains(failedEv[0], "skill remember") {
		t.Errorf("goal.failed events %q: want one naming the disabled skill", failedEv)
	}
}

func FuzzDecodeAgentRequests(f *testing.F) {
	for _, s := range []string{`{"sessionId":"s1"}`, `{"sessionId":"s1","reason":"x"}`, `{}`, `{"sessionId":"a b"}`, `[`, ``, `{"sessionId":"s","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		stop, err := DecodeStop(doc)
		if err != nil && !errors.Is(err, request.ErrInvalid) {
			t.Fatalf("stop: error %v is not an invalid request", err)
		}
		if err == nil && !plan.ValidID(stop.SessionID) {
			t.Fatalf("stop: decoded session %q", stop.SessionID)
		}
		st, err := DecodeStatus(doc)
		if err != nil && !errors.Is(err, request.ErrInvalid) {
			t.Fatalf("status: error %v is not an invalid request", err)
		}
		if err == nil && !plan.ValidID(st.SessionID) {
			t.Fatalf("status: decoded session %q", st.SessionID)
		}
	})
}

// A goal without conditions (an Explore goal, always applicable) keeps an
// agent busy once the others are reached: each of its plans is one action,
// done once it has run, and the agent takes it up again.
func TestAgentKeepsExploring(t *testing.T) {
	doc := []byte(`{"name": "explorer", "facts": {"tidy": false, "steps": 0},
		"actions": [{"name": "tidy-up", "skill": "remember", "input": {"tidy": true}, "effects": {"tidy": true}, "cost": 2},
			{"name": "wander", "skill": "remember", "input": {"steps": "{steps}"}, "effects": {"steps": {"inc": 1}}}],
		"goals": [{"name": "tidy", "conditions": {"tidy": true}, "utility": 50},
			{"name": "explore", "utility": 5}]}`)
	d, err := goap.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	ad := &agentDoc{Request: &request.Request{RequestID: "ex", SessionID: "s", Kind: request.KindGOAP, GOAP: &request.GOAPRequest{Agent: true}},
		Domain: doc, Status: planbus.AgentRunning}
	world := goap.State{}
	a := turnOf(t, ad, d, world)
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	for i, want := range []string{"tidy-up", "wander", "wander", "wander"} {
		if ad.Step == nil || ad.Step.Action != want || ad.Status != planbus.AgentRunning {
			t.Fatalf("turn %d: step %+v, status %s; want %s", i, ad.Step, ad.Status, want)
		}
		if want == "tidy-up" {
			world = goap.State{"tidy": true}
		} else {
			world = goap.State{"tidy": true, "steps": float64(i)}
		}
		a = turnOf(t, ad, d, world)
		if err := a.onResult(&planbus.ExecutionResult{PlanID: ad.Step.PlanID, Success: true, State: planbus.PlanSucceeded}); err != nil {
			t.Fatal(err)
		}
		a.store()
	}
	if st := ad.Goals["explore"]; st == nil || st.Succeeded != 3 || ad.Goals["tidy"].Succeeded != 1 {
		t.Errorf("stats explore %+v, tidy %+v", ad.Goals["explore"], ad.Goals["tidy"])
	}
}

// A goal with no conditions (the seed's Explore) is taken up again as
// soon as its one-step plan has run: the agent releases at most one step
// a tick, the next when the tick comes (issue 23: 189 step plans in 3 s).
func TestAgentReleasesAtMostAStepATick(t *testing.T) {
	a, doc := coreAgent(t, "explore", goap.State{})
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step == nil || doc.Step.Action != "wander" {
		t.Fatalf("first step %+v", doc.Step)
	}
	first := a.now
	// The step's result comes at once: the goal is done and taken up
	// again, but no step is released before the next tick.
	a = turnAt(t, doc, a.d, goap.State{"explored": 1}, first.Add(time.Millisecond))
	if err := a.onResult(&planbus.ExecutionResult{PlanID: doc.Step.PlanID, State: planbus.PlanSucceeded, Success: true}); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step != nil || a.fx.publish != nil {
		t.Fatalf("a step released %s after the first: %+v", time.Millisecond, doc.Step)
	}
	next := first.Add(Tick)
	if !a.fx.wake.Equal(next) || !doc.WakeAt.Equal(next) || doc.Paced == "" {
		t.Fatalf("wake %v (stored %v, paced %q), want the next tick, %v", a.fx.wake, doc.WakeAt, doc.Paced, next)
	}
	// A change of the world meanwhile does not release it either.
	a = turnAt(t, doc, a.d, goap.State{"explored": 2}, first.Add(2*time.Millisecond))
	if err := a.onWorld(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step != nil {
		t.Fatalf("a change of the world released a step before the tick: %+v", doc.Step)
	}
	// At the tick it is released.
	a = turnAt(t, doc, a.d, goap.State{"explored": 2}, next)
	if err := a.onWake(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.Step == nil || doc.Step.Action != "wander" || a.fx.publish == nil || doc.Paced != "" {
		t.Fatalf("at the tick: step %+v, paced %q", doc.Step, doc.Paced)
	}
	if doc.Seq != 2 {
		t.Errorf("%d step plans, want 2", doc.Seq)
	}
}

// A goal no plan reaches cools down for longer after each decision in a
// row that found no plan, and after MaxFailedRounds of them the agent
// gives up: status failed, AGENT_GAVE_UP, an agent.gave_up event and its
// outcome (issue 23: an unsolvable agent searched every 5 s for ever).
func TestAgentBacksOffAndGivesUp(t *testing.T) {
	a, doc := coreAgent(t, "unreachable", goap.State{})
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	var cools []time.Duration
	for round := 1; ; round++ {
		if round > MaxFailedRounds {
			t.Fatalf("still running after %d failed rounds: %s", round-1, doc.Detail)
		}
		until := doc.Arbiter.Cooldowns["open"]
		cools = append(cools, until.Sub(a.now))
		if doc.FailedRounds != round {
			t.Fatalf("round %d: FailedRounds %d", round, doc.FailedRounds)
		}
		if doc.Status != planbus.AgentRunning {
			break
		}
		if !doc.WakeAt.Equal(until) || !a.fx.wake.Equal(until) {
			t.Fatalf("round %d: wakes at %v, want the end of the cooldown %v", round, doc.WakeAt, until)
		}
		a = turnAt(t, doc, a.d, goap.State{}, until)
		if err := a.onWake(); err != nil {
			t.Fatal(err)
		}
		a.store()
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	if !slices.Equal(cools, want) {
		t.Errorf("cooldowns %v, want %v", cools, want)
	}
	if doc.Status != planbus.AgentFailed || doc.Error == nil || doc.Error.Code != planbus.CodeAgentGaveUp || !a.fx.ended || !a.fx.wake.IsZero() {
		t.Fatalf("status %s, error %+v, ended %v, wake %v; want failed, AGENT_GAVE_UP, ended", doc.Status, doc.Error, a.fx.ended, a.fx.wake)
	}
	if len(a.fx.events) == 0 || a.fx.events[len(a.fx.events)-1].Type != planbus.EventAgentGaveUp {
		t.Errorf("events %+v, want agent.gave_up last", a.fx.events)
	}
	if o := agentOutcome(doc); o.Status != planbus.StatusFailed || o.Error == nil || o.Error.Code != planbus.CodeAgentGaveUp {
		t.Errorf("outcome %+v", o)
	}
}

// A plan found resets the count: failures that come between successes
// never give the agent up.
func TestAgentFailedRoundsResetOnAPlan(t *testing.T) {
	a, doc := coreAgent(t, "chores", goap.State{})
	doc.FailedRounds = MaxFailedRounds - 1
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	a.store()
	if doc.FailedRounds != 0 || doc.Step == nil {
		t.Fatalf("FailedRounds %d, step %+v: want 0 and a step", doc.FailedRounds, doc.Step)
	}
}

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/goap"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

// A GOAP agent pursues the goals of a domain in one session's state, the
// loop of perceive, decide, act and monitor:
//
//   - perceive: the world is the session state (planbus-sessions), which
//     tools change through their statePatch and anyone with the right
//     may change too; every change of it reaches a planner
//     (onSessionChange), and every step's result (onAgentExecution);
//   - decide: a goap.Arbiter picks the goal: the most useful eligible
//     one, switching between plans only to a goal at least 1.2 times as
//     useful, interrupting a running plan only for one more useful by
//     more than 30, with a cooldown on goals whose plans failed;
//   - act: the plan runs one step at a time, each step a plan of one
//     tool published to the dispatchers, its input's {fact} templates
//     rendered from the session state when the step is released;
//   - monitor: after every result and every change of the world a
//     goap.Tracker checks the rest of the plan against the world: a
//     broken precondition replans (a failed step too: the dispatcher has
//     retried it by its retry policy, three attempts by default, and its
//     skill is left out of the goal's next plans); a goal past the
//     preemption margin cancels the running step and takes over; a goal
//     reached makes way for the next.
//
// The agent's memory (arbiter, tracker, step in flight, counts) is one
// document per session in planbus-agents, changed with compare-and-set;
// every change is stored before it is acted on, and the messages that
// drive the agent (session changes, execution results, wake-ups) are
// acknowledged only after that, so a planner that dies hands the agent
// to another where it was. This file is the agent's decisions, without
// I/O; service.go carries them out.

// agentDoc is a session's agent as stored in planbus-agents under the
// session id.
type agentDoc struct {
	// Request started the agent: its id is the agent's, and the plans'
	// request id; it holds the session, budgets and plan defaults.
	Request *request.Request `json:"request"`
	// Domain is the domain document, fixed when the agent started, so
	// every planner runs the same domain whatever its --domains holds.
	Domain  json.RawMessage    `json:"domain"`
	Status  string             `json:"status"`
	Seq     int                `json:"seq"` // step plans published
	Arbiter goap.ArbiterState  `json:"arbiter"`
	Tracker *goap.TrackerState `json:"tracker,omitempty"`
	// Disabled are skills left out of the current goal's plans: the
	// skills of its failed steps.
	Disabled []string `json:"disabledSkills,omitempty"`
	// Step is the step in flight; nil while the agent waits.
	Step *agentStep `json:"step,omitempty"`
	// Cancelled is the last step plan the agent cancelled; its cancel is
	// sent again if the planner died before sending it.
	Cancelled string `json:"cancelled,omitempty"`
	// WakeAt is when the agent looks again: the end of a cooldown.
	WakeAt time.Time `json:"wakeAt,omitzero"`
	// LastPlanAt and LastStepAt are when the agent last planned and last
	// released a step: it does either at most once a tick (Tick).
	LastPlanAt time.Time `json:"lastPlanAt,omitzero"`
	LastStepAt time.Time `json:"lastStepAt,omitzero"`
	// Paced is what waits for the next tick (WakeAt): "step", the next
	// step of the plan followed; "decide", a decision (Replan is why the
	// plan followed is to be made again, if it is).
	Paced  string `json:"paced,omitempty"`
	Replan string `json:"replan,omitempty"`
	// FailedRounds counts the decisions in a row that planned and found
	// no plan for any goal; the agent backs off after each, and gives up
	// after MaxFailedRounds.
	FailedRounds int `json:"failedRounds,omitempty"`
	// SessionRev is the revision of the session state last acted on.
	SessionRev uint64                        `json:"sessionRevision"`
	Goals      map[string]*planbus.GoalStats `json:"goals"`
	// Detail is the last decision; Waiting why nothing runs.
	Detail  string             `json:"detail,omitempty"`
	Waiting string             `json:"waiting,omitempty"`
	Error   *planbus.ErrorInfo `json:"error,omitempty"`
	Planner string             `json:"planner,omitempty"`
	Started time.Time          `json:"startedAt"`
	Updated time.Time          `json:"updatedAt"`
	// Trace is the W3C trace context of the request that started the
	// agent: every turn's span (planbus.agent.turn) is its child,
	// whichever planner takes the turn, and the step plans' spans the
	// turns' children.
	Trace map[string]string `json:"trace,omitempty"`
}

// agentStep is a step in flight: a plan of one tool.
type agentStep struct {
	PlanID string          `json:"planId"`
	Index  int             `json:"index"` // in the tracker's plan
	Action string          `json:"action"`
	Plan   json.RawMessage `json:"plan"` // published again after a crash
}

// ID is the agent's id, the request id of its plans and events.
func (doc *agentDoc) ID() string { return doc.Request.RequestID }

// SessionID is the agent's session.
func (doc *agentDoc) SessionID() string { return doc.Request.SessionID }

func (doc *agentDoc) stats(goal string) *planbus.GoalStats {
	if doc.Goals == nil {
		doc.Goals = map[string]*planbus.GoalStats{}
	}
	st := doc.Goals[goal]
	if st == nil {
		st = &planbus.GoalStats{}
		doc.Goals[goal] = st
	}
	return st
}

// The agents' pace and patience.
const (
	// Tick is the least time between two of an agent's plannings,
	// and between two of its step releases: the seed's loop ticks every
	// 100 ms. A goal with no conditions (always unsatisfied, as the
	// seed's Explore) then runs at most ten steps a second, not as many
	// as the bus can carry.
	Tick = 100 * time.Millisecond
	// MaxFailedRounds is how many decisions in a row may plan and
	// find no plan for any goal before the agent gives up (status failed,
	// error AGENT_GAVE_UP, event agent.gave_up). After each, the goals
	// that failed cool down for twice as long as after the one before:
	// their own cooldown (at least a tick) times 1, 2, 4, 8.
	MaxFailedRounds = 5
	// MaxBackoff bounds a goal's cooldown after repeated failures.
	MaxBackoff = 10 * time.Minute
)

// agentTracker is the tracker configuration of agents: a failed step has
// already been retried by the dispatcher (its retry policy: three
// attempts, goap.DefaultFailureThreshold, the three consecutive failures
// after which a plan is made again; errors that are never retried, such
// as permanent ones, fail at once), so one failed step replans, and
// three replans of a goal give it up.
var agentTracker = goap.TrackerConfig{FailureThreshold: 1, MaxReplans: goap.DefaultMaxReplans}

// agentPlanFunc plans goal from the world with the skills in disabled
// left out (besides the unusable ones). A *generator.Error is the planner's
// verdict (no plan, a budget run out) and cools the goal down; any other
// error is the store's or the context's and hands the message back.
type agentPlanFunc func(goal string, world goap.State, disabled []string) (*goap.Result, error)

// agent is one turn of a session's agent: its stored document, restored
// into an arbiter and a tracker, the world as observed now, and the
// effects its decisions ask for. Its methods decide; the service carries
// out fx once the document is stored.
type agent struct {
	doc   *agentDoc
	d     *goap.Domain
	arb   *goap.Arbiter
	tr    *goap.Tracker // nil when no plan is followed
	world goap.State
	now   time.Time
	plan  agentPlanFunc
	fx    agentEffects
	// debug: the service logs decisions at debug level, so each goal
	// selection keeps every goal's utility (agentDecision.Goals).
	debug bool
}

// agentEffects are what a turn asks the service to do once its document
// is stored.
type agentEffects struct {
	cancel  []string   // step plans to cancel
	publish *agentStep // the step to release
	wake    time.Time  // a wake-up to schedule
	events  []planbus.Event
	ended   bool // the agent ended: publish its outcome
	// decisions are the turn's decisions, in order, for the debug log.
	decisions []agentDecision
}

// agentDecision is one decision of a turn, as the seed's planner, arbiter
// and executor log them with debug on: the goal chosen with its utility
// and why (with every goal's utility when the log is at debug level), the
// plans made or not found, the steps released, the tracker's verdicts on
// results and changes of the world (replans among them), the waits.
type agentDecision struct {
	Kind    string // one of the decision* constants
	Goal    string
	Utility float64 // decisionSelect
	// Reason is the arbiter's reason (decisionSelect) or the tracker's
	// verdict (decisionVerdict).
	Reason string
	Detail string
	// Goals is every goal as the arbiter saw it (decisionSelect, debug).
	Goals []goap.GoalStatus
}

// The kinds of agentDecision.
const (
	decisionSelect  = "select"  // the arbiter chose a goal, or none
	decisionPlan    = "plan"    // a plan was made for the goal (Reason: "replan" for a new plan of the same goal)
	decisionNoPlan  = "no-plan" // no plan reaches the goal: it cools down
	decisionStep    = "step"    // a step of the plan is released
	decisionVerdict = "verdict" // the tracker's verdict on a result or a change of the world
	decisionWait    = "wait"    // nothing runs until the world changes, a cooldown ends or the next tick
	decisionEnd     = "end"     // the agent ends (idle, gave up, stopped)
)

// decided records a decision of the turn.
func (a *agent) decided(d agentDecision) { a.fx.decisions = append(a.fx.decisions, d) }

// selectGoal asks the arbiter which goal to pursue, and records the
// decision.
func (a *agent) selectGoal() (goap.Selection, error) {
	var (
		sel   goap.Selection
		goals []goap.GoalStatus
		err   error
	)
	if a.debug {
		sel, goals, err = a.arb.SelectReport(a.world, a.now)
	} else {
		sel, err = a.arb.Select(a.world, a.now)
	}
	if err == nil {
		a.decided(agentDecision{Kind: decisionSelect, Goal: sel.Goal, Utility: sel.Utility, Reason: string(sel.Reason), Detail: sel.Detail, Goals: goals})
	}
	return sel, err
}

// newAgent restores a turn from doc in the world observed at now.
func newAgent(doc *agentDoc, d *goap.Domain, world goap.State, now time.Time, pf agentPlanFunc) (*agent, error) {
	arb, err := goap.NewArbiter(d, goap.ArbiterConfig{})
	if err != nil {
		return nil, err
	}
	arb.Restore(doc.Arbiter)
	a := &agent{doc: doc, d: d, arb: arb, world: world, now: now, plan: pf}
	if doc.Tracker != nil {
		if a.tr, err = goap.RestoreTracker(d, *doc.Tracker, agentTracker); err != nil {
			return nil, fmt.Errorf("agent %s: tracker: %w", doc.ID(), err)
		}
	}
	return a, nil
}

// store writes the arbiter's and tracker's memory back into the document.
func (a *agent) store() {
	a.doc.Arbiter = a.arb.State()
	a.doc.Tracker = nil
	if a.tr != nil {
		st := a.tr.State()
		a.doc.Tracker = &st
	}
}

// event records an event of the turn, at the turn's time (the time its
// cooldowns and waits count from), not when it is published after the
// turn is stored.
func (a *agent) event(typ planbus.EventType, goal, msg string) {
	a.fx.events = append(a.fx.events, planbus.Event{Type: typ, Time: a.now, Goal: goal, Message: msg})
}

func (a *agent) goal() string {
	if a.tr == nil {
		return ""
	}
	return a.tr.State().Goal
}

// start is the agent's first turn.
func (a *agent) start() error { return a.decide("") }

// decide chooses a goal while no plan runs and plans for it. replanWhy
// is set when the current goal's plan was found broken: if the arbiter
// keeps the goal, it is planned again.
func (a *agent) decide(replanWhy string) error {
	if a.tooSoon(replanWhy) {
		return nil
	}
	a.arb.SetRunning(false)
	sel, err := a.selectGoal()
	if err != nil {
		return a.blocked(err)
	}
	if a.tr != nil && sel.Goal != a.goal() {
		a.tr = nil // the broken plan's goal gave way
	}
	return a.pursue(sel, replanWhy)
}

// pursue plans for the arbiter's selection, or waits when there is none.
// A goal no plan reaches cools down, backing off (see
// MaxFailedRounds), and the arbiter chooses again; each round puts a
// goal on cooldown, so the rounds are bounded. A decision that planned
// and found no plan for any goal is a failed round. Its callers decide at
// most once a tick (tooSoon).
func (a *agent) pursue(sel goap.Selection, replanWhy string) error {
	failed := false // a generation of this decision found no plan
	defer func() {
		if failed && a.tr == nil && a.doc.Status == planbus.AgentRunning && a.doc.Step == nil {
			a.failedRound()
		}
	}()
	for range len(a.d.Goals) + 1 {
		if sel.Goal == "" {
			a.tr = nil
			return a.idle(sel.Detail)
		}
		same := a.tr != nil && a.goal() == sel.Goal
		if !same {
			a.tr, a.doc.Disabled = nil, nil
			a.event(planbus.EventAgentGoalSelected, sel.Goal,
				fmt.Sprintf("%s (utility %s), %s: %s", sel.Goal, number(sel.Utility), sel.Reason, sel.Detail))
		}
		a.doc.Detail = fmt.Sprintf("%s: %s", sel.Reason, sel.Detail)
		a.doc.LastPlanAt = a.now
		res, err := a.plan(sel.Goal, a.world, a.doc.Disabled)
		var ge *generator.Error
		if errors.As(err, &ge) {
			failed = true
			a.decided(agentDecision{Kind: decisionNoPlan, Goal: sel.Goal, Detail: ge.Message})
			a.failGeneration(sel.Goal, "no plan: "+ge.Message)
			if sel, err = a.selectGoal(); err != nil {
				return a.blocked(err)
			}
			replanWhy = ""
			continue
		}
		if err != nil {
			return a.blocked(err)
		}
		failed, a.doc.FailedRounds = false, 0
		made := agentDecision{Kind: decisionPlan, Goal: sel.Goal,
			Detail: fmt.Sprintf("%s (cost %s, %d states expanded)", actions(res), number(res.Cost), res.Stats.Expanded)}
		if same {
			made.Reason = "replan: " + replanWhy
		}
		a.decided(made)
		st := a.doc.stats(sel.Goal)
		st.Plans++
		if same {
			st.Replans++
			if err := a.tr.Replanned(res); err != nil {
				return err
			}
			a.event(planbus.EventAgentReplanned, sel.Goal, fmt.Sprintf("%s; new plan: %s", replanWhy, actions(res)))
		} else if a.tr, err = goap.NewTracker(a.d, res, agentTracker); err != nil {
			return err
		}
		if len(res.Steps) == 0 {
			// Only a goal with no conditions can need no action: there is
			// nothing to run until the world changes.
			a.tr = nil
			a.arb.Clear()
			return a.wait(fmt.Sprintf("goal %s needs no action; waiting for the world to change", sel.Goal), time.Time{})
		}
		a.arb.SetRunning(true)
		return a.act(0)
	}
	a.tr = nil
	return a.wait("every goal failed to plan; waiting for the world to change", time.Time{})
}

// tooSoon paces a decision: one less than a tick after the agent last
// planned waits for the next tick (replanWhy is kept for it), and tooSoon
// reports true; the caller then changes nothing more.
func (a *agent) tooSoon(replanWhy string) bool {
	next := a.doc.LastPlanAt.Add(Tick)
	if !a.now.Before(next) {
		return false
	}
	a.pace(next, pacedDecide, replanWhy)
	return true
}

// What a paced agent does at the next tick (agentDoc.Paced).
const (
	pacedStep   = "step"
	pacedDecide = "decide"
)

// pace has the agent do what at the next tick, at: it planned or released
// a step less than a tick ago. replanWhy, for a decision, is why the plan
// followed is to be made again. It says nothing: the agent's detail and
// events stay those of its last decision.
func (a *agent) pace(at time.Time, what, replanWhy string) {
	a.doc.WakeAt, a.doc.Paced, a.doc.Replan = at, what, replanWhy
	a.fx.wake = at
	a.decided(agentDecision{Kind: decisionWait, Goal: a.goal(), Detail: fmt.Sprintf("the next %s waits for the next tick, at %s", what, at.UTC().Format(time.RFC3339Nano))})
}

// unpace forgets what waited for the tick, and returns it.
func (a *agent) unpace() (what, replanWhy string) {
	what, replanWhy = a.doc.Paced, a.doc.Replan
	a.doc.Paced, a.doc.Replan = "", ""
	return what, replanWhy
}

// failGeneration gives a goal up after a generation found no plan for
// it: it cools down for its own cooldown (at least a tick) doubled for
// each failed round before this one, at most MaxBackoff.
func (a *agent) failGeneration(goal, why string) {
	cool := max(a.arb.Cooldown(goal), Tick)
	for range min(a.doc.FailedRounds, 20) {
		cool *= 2
	}
	cool = min(cool, MaxBackoff)
	_ = a.arb.CoolDown(goal, a.now.Add(cool)) // the goal is the domain's
	a.doc.stats(goal).Failed++
	a.tr, a.doc.Disabled = nil, nil
	msg := why + "; cooling down until " + a.now.Add(cool).UTC().Format(time.RFC3339Nano)
	if a.doc.FailedRounds > 0 {
		msg += fmt.Sprintf(" (%s: the agent's %s decision in a row with no plan)", cool, ordinal(a.doc.FailedRounds+1))
	}
	a.event(planbus.EventAgentGoalFailed, goal, msg)
}

// failedRound counts a decision that planned and found no plan for any
// goal; after MaxFailedRounds of them in a row the agent gives up.
func (a *agent) failedRound() {
	a.doc.FailedRounds++
	if a.doc.FailedRounds < MaxFailedRounds {
		return
	}
	msg := fmt.Sprintf("no plan for any goal in %d decisions in a row (backing off each time); the agent gives up", a.doc.FailedRounds)
	a.arb.Clear()
	a.doc.Status, a.doc.Detail, a.doc.Waiting, a.doc.WakeAt = planbus.AgentFailed, msg, "", time.Time{}
	a.doc.Error = &planbus.ErrorInfo{Code: planbus.CodeAgentGaveUp, Category: planbus.CategoryPermanent, Message: msg}
	a.fx.wake = time.Time{}
	a.decided(agentDecision{Kind: decisionEnd, Reason: planbus.AgentFailed, Detail: msg})
	a.event(planbus.EventAgentGaveUp, "", msg)
	a.fx.ended = true
}

// ordinal writes n as 2nd, 3rd, 4th.
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// fail gives the current goal up: it cools down.
func (a *agent) fail(goal, why string) {
	a.doc.stats(goal).Failed++
	_ = a.arb.Failed(goal, a.now) // the goal is the domain's
	a.tr, a.doc.Disabled = nil, nil
	msg := why
	if until, ok := a.arb.State().Cooldowns[goal]; ok {
		msg += "; cooling down until " + until.UTC().Format(time.RFC3339Nano)
	}
	a.event(planbus.EventAgentGoalFailed, goal, msg)
}

// idle: no eligible goal. If one is cooling down the agent waits for the
// end of the first cooldown; else it ends.
func (a *agent) idle(detail string) error {
	a.arb.Clear()
	report, err := a.arb.Report(a.world, a.now)
	if err != nil {
		return a.blocked(err)
	}
	var wake time.Time
	var cooling string
	for _, g := range report {
		if g.Valid && !g.Satisfied && g.Utility > 0 && !g.CoolingUntil.IsZero() && (wake.IsZero() || g.CoolingUntil.Before(wake)) {
			wake, cooling = g.CoolingUntil, g.Goal
		}
	}
	if !wake.IsZero() {
		return a.wait(fmt.Sprintf("%s; waiting for %s's cooldown to end at %s", detail, cooling, wake.UTC().Format(time.RFC3339Nano)), wake)
	}
	a.doc.Status, a.doc.Waiting, a.doc.WakeAt = planbus.AgentIdle, "", time.Time{}
	a.doc.Detail = detail
	a.decided(agentDecision{Kind: decisionEnd, Reason: planbus.AgentIdle, Detail: detail})
	a.event(planbus.EventAgentIdle, "", detail+": no goal is left to pursue; the agent ends")
	a.fx.ended = true
	return nil
}

// wait leaves the agent running with no plan, until wake (if set) or a
// change of the world. The event is published when the reason is new.
func (a *agent) wait(why string, wake time.Time) error {
	a.decided(agentDecision{Kind: decisionWait, Detail: why})
	if why != a.doc.Waiting {
		a.event(planbus.EventAgentIdle, "", why)
	}
	a.doc.Waiting, a.doc.Detail, a.doc.WakeAt = why, why, wake
	if !wake.IsZero() {
		a.fx.wake = wake
	}
	return nil
}

// blocked: the world cannot be evaluated (a fact of the wrong type, an
// expression that fails on it). The plan is dropped and the agent waits
// for the world to change.
func (a *agent) blocked(err error) error {
	if !errors.Is(err, goap.ErrInvalidState) && !errors.Is(err, goap.ErrEval) {
		return err
	}
	a.dropStep()
	a.tr = nil
	a.arb.Clear()
	return a.wait("the session state does not fit the domain: "+err.Error(), time.Time{})
}

// act releases step i of the tracker's plan, its input rendered in the
// world as it is now.
func (a *agent) act(i int) error {
	if next := a.doc.LastStepAt.Add(Tick); a.now.Before(next) {
		// Released at the next tick, if the plan still holds then.
		a.pace(next, pacedStep, "")
		return nil
	}
	st := a.tr.State()
	name := st.Plan[i]
	act := a.d.Action(name)
	input, err := a.d.Input(name, a.world)
	if err != nil {
		return a.blocked(err)
	}
	a.doc.Seq++
	r := a.doc.Request
	planID := fmt.Sprintf("%s-a%d", r.RequestID, a.doc.Seq)
	desc := act.Description
	if desc == "" {
		desc = name
	}
	doc := map[string]any{
		"planId": planID, "requestId": r.RequestID, "sessionId": r.SessionID,
		"description": fmt.Sprintf("agent %s: goal %s, step %d of %d (%s)", r.RequestID, st.Goal, i+1, len(st.Plan), name),
		"tools": []map[string]any{{"toolId": goap.ToolID(i, name), "skill": act.Skill, "description": desc, "input": input,
			"retryPolicy": map[string]any{"maxAttempts": goap.DefaultFailureThreshold, "backoffMs": 100}}},
		"metadata": map[string]any{"generator": "goap-agent", "agent": agentMeta{AgentID: r.RequestID, SessionID: r.SessionID,
			Goal: st.Goal, Step: i + 1, Steps: len(st.Plan), Action: name}},
	}
	if d := r.PlanDefaults; d != nil && d.TimeoutMs > 0 {
		doc["timeoutMs"] = d.TimeoutMs
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	p, err := plan.Decode(data)
	if err != nil {
		return fmt.Errorf("agent %s: step plan: %w", r.RequestID, err)
	}
	if data, err = json.Marshal(p); err != nil {
		return err
	}
	a.doc.Step = &agentStep{PlanID: planID, Index: i, Action: name, Plan: data}
	a.decided(agentDecision{Kind: decisionStep, Goal: st.Goal, Detail: fmt.Sprintf("step %d of %d: %s (plan %s)", i+1, len(st.Plan), name, planID)})
	a.doc.Waiting, a.doc.WakeAt, a.doc.LastStepAt = "", time.Time{}, a.now
	a.unpace()
	a.fx.publish = a.doc.Step
	return nil
}

// agentMeta is metadata.agent of a step plan: it routes the plan's
// execution result to the agent.
type agentMeta struct {
	AgentID   string `json:"agentId"`
	SessionID string `json:"sessionId"`
	Goal      string `json:"goal"`
	Step      int    `json:"step"`
	Steps     int    `json:"steps"`
	Action    string `json:"action"`
}

// dropStep cancels the step in flight, if any.
func (a *agent) dropStep() {
	if s := a.doc.Step; s != nil {
		a.fx.cancel = append(a.fx.cancel, s.PlanID)
		a.doc.Cancelled, a.doc.Step = s.PlanID, nil
	}
}

// onResult is the end of the step in flight (its plan's execution result,
// which is the agent's own: the caller checked the plan id).
func (a *agent) onResult(res *planbus.ExecutionResult) error {
	step := a.doc.Step
	a.doc.Step = nil
	a.unpace()
	if a.tr == nil {
		return a.decide("")
	}
	var dec goap.Decision
	var err error
	if res.Success {
		dec, err = a.tr.Succeeded(a.world)
	} else {
		for _, sk := range plan.BlamedSkills(res) {
			if !slices.Contains(a.doc.Disabled, sk) {
				a.doc.Disabled = append(a.doc.Disabled, sk)
			}
		}
		dec, err = a.tr.Failed(a.world)
		if err == nil && res.Error != nil {
			dec.Reason += " (" + string(res.Error.Code) + ": " + res.Error.Message + ")"
		}
	}
	if errors.Is(err, goap.ErrNoStep) {
		return fmt.Errorf("agent %s: the tracker has no step in progress for %s", a.doc.ID(), step.PlanID)
	}
	if err != nil {
		return a.blocked(err)
	}
	return a.follow(dec)
}

// onWorld is a change of the session state. While a step runs, the
// tracker checks the rest of the plan against it, and the arbiter whether
// another goal preempts the plan; while the agent waits, it decides
// again.
func (a *agent) onWorld() error {
	if a.doc.Step == nil {
		return a.resume()
	}
	if a.tr == nil {
		return a.decide("")
	}
	return a.check()
}

// check is the check of the world while a step runs: the rest of the plan
// against it, and whether another goal takes over.
func (a *agent) check() error {
	a.unpace()
	dec, err := a.observe()
	if err != nil {
		return a.blocked(err)
	}
	if dec.Verdict != goap.Continue {
		a.dropStep()
	}
	return a.follow(dec)
}

// observe checks the plan against the world while a step is in flight.
// The step's own statePatch may already be in the world before its
// result arrives, so the rest of the plan is checked both from the step
// in progress and from the one after it: either holding keeps the plan.
func (a *agent) observe() (goap.Decision, error) {
	st := a.tr.State()
	dec, err := a.tr.Observe(a.world)
	if err != nil || dec.Verdict == goap.Continue || dec.Verdict == goap.Done {
		return dec, err
	}
	after := st
	after.Next++
	if t2, err := goap.RestoreTracker(a.d, after, agentTracker); err == nil {
		if d2, err := t2.Observe(a.world); err == nil && d2.Verdict == goap.Continue {
			// Keep the tracker as it was: the step's result advances it.
			a.tr, _ = goap.RestoreTracker(a.d, st, agentTracker)
			return goap.Decision{Verdict: goap.Continue, Step: st.Next, Reason: d2.Reason}, nil
		}
	}
	return dec, nil
}

// follow carries out the tracker's verdict.
func (a *agent) follow(dec goap.Decision) error {
	goal := a.goal()
	a.decided(agentDecision{Kind: decisionVerdict, Goal: goal, Reason: string(dec.Verdict), Detail: dec.Reason})
	switch dec.Verdict {
	case goap.Done:
		a.doc.stats(goal).Succeeded++
		a.event(planbus.EventAgentGoalSucceeded, goal, dec.Reason)
		a.tr = nil
		a.arb.Clear()
		return a.decide("")
	case goap.GiveUp:
		a.fail(goal, dec.Reason)
		return a.decide("")
	case goap.Replan:
		return a.decide(dec.Reason)
	}
	// The plan goes on; only a goal past the preemption margin, or the
	// current goal's ceasing to be eligible, interrupts it.
	a.arb.SetRunning(true)
	before := a.arb.State()
	sel, err := a.selectGoal()
	if err != nil {
		return a.blocked(err)
	}
	switch sel.Reason {
	case goap.ReasonPreempt, goap.ReasonReplace, goap.ReasonNone:
		if sel.Goal != "" && a.now.Before(a.doc.LastPlanAt.Add(Tick)) {
			// Another goal would be planned less than a tick after the
			// last plan: nothing changes until the next tick, when the
			// whole check is made again.
			a.arb.Restore(before)
			a.pace(a.doc.LastPlanAt.Add(Tick), pacedDecide, "")
			return nil
		}
	}
	switch sel.Reason {
	case goap.ReasonPreempt:
		a.doc.stats(goal).Preemptions++
		a.event(planbus.EventAgentPreempted, goal, fmt.Sprintf("%s: %s", goal, sel.Detail))
		fallthrough
	case goap.ReasonReplace, goap.ReasonNone:
		a.dropStep()
		a.tr = nil
		return a.pursue(sel, "")
	}
	a.doc.Detail = fmt.Sprintf("%s: %s", sel.Reason, sel.Detail)
	if a.doc.Step != nil {
		return nil // the step in flight goes on
	}
	return a.act(dec.Step)
}

// onWake is a wake-up: the agent's start, the end of a cooldown, or the
// next tick of a paced agent. A running step is left alone; a plan whose
// next step waited for the tick goes on if it still holds.
func (a *agent) onWake() error {
	if a.doc.Step != nil {
		if a.doc.Paced == pacedDecide && a.tr != nil {
			return a.check()
		}
		return nil
	}
	return a.resume()
}

// resume takes up an agent with no step in flight: a plan whose next step
// waited for the tick goes on if it still holds in the world; otherwise
// the agent decides (again, for a plan to be made again).
func (a *agent) resume() error {
	what, replanWhy := a.unpace()
	if what == pacedStep && a.tr != nil {
		dec, err := a.tr.Observe(a.world)
		if err != nil {
			return a.blocked(err)
		}
		return a.follow(dec)
	}
	return a.decide(replanWhy)
}

// stop ends the agent on request; the step in flight is cancelled.
func (a *agent) stop(reason string) {
	a.dropStep()
	a.tr = nil
	a.arb.Clear()
	msg := "stopped on request"
	if reason != "" {
		msg += ": " + reason
	}
	a.doc.Status, a.doc.Detail, a.doc.Waiting, a.doc.WakeAt = planbus.AgentStopped, msg, "", time.Time{}
	a.decided(agentDecision{Kind: decisionEnd, Reason: planbus.AgentStopped, Detail: msg})
	a.event(planbus.EventAgentStopped, "", msg)
	a.fx.ended = true
}

// report is the goal report of the agent in its world: each goal's
// utility, validity, satisfaction and cooldown, with the seed's marks.
func (a *agent) report() ([]planbus.AgentGoal, string, error) {
	rep, err := a.arb.Report(a.world, a.now)
	if err != nil {
		return nil, "", err
	}
	cur, _ := a.arb.Current()
	out := make([]planbus.AgentGoal, len(rep))
	var b strings.Builder
	b.WriteString("Goal Utilities:\n")
	for i, g := range rep {
		out[i] = planbus.AgentGoal{Goal: g.Goal, Utility: g.Utility, Valid: g.Valid, Satisfied: g.Satisfied, Eligible: g.Eligible,
			CoolingUntil: g.CoolingUntil, Current: g.Goal == cur}
		if st := a.doc.Goals[g.Goal]; st != nil {
			out[i].Stats = *st
		}
		line := "  " + g.Goal + ": "
		if g.Utility <= 0 {
			line += number(g.Utility) + " [ZERO]"
		} else {
			line += fmt.Sprintf("%.1f", g.Utility)
		}
		if !g.Valid {
			line += " [INVALID]"
		}
		if g.Satisfied {
			line += " [SATISFIED]"
		}
		if !g.CoolingUntil.IsZero() {
			line += fmt.Sprintf(" [COOLDOWN %s]", g.CoolingUntil.Sub(a.now).Round(100*time.Millisecond))
		}
		if g.Goal == cur {
			line += " ← CURRENT"
		}
		b.WriteString(line + "\n")
	}
	return out, b.String(), nil
}

// status is the agent as planbus.agent.status reports it.
func (a *agent) status() (*planbus.AgentStatus, error) {
	doc := a.doc
	st := &planbus.AgentStatus{AgentID: doc.ID(), SessionID: doc.SessionID(), Domain: a.d.Name, Status: doc.Status,
		WakeAt: doc.WakeAt, Detail: doc.Detail, SessionRevision: doc.SessionRev, Plans: doc.Seq, Planner: doc.Planner,
		StartedAt: doc.Started, UpdatedAt: doc.Updated, Error: doc.Error}
	st.Goal, st.Running = a.arb.Current()
	if a.tr != nil {
		ts := a.tr.State()
		st.Plan, st.Next = ts.Plan, ts.Next
	}
	if doc.Step != nil {
		st.PlanID = doc.Step.PlanID
	}
	var err error
	if st.Goals, st.Report, err = a.report(); err != nil {
		// The world does not fit the domain: say so, with the goals'
		// counts alone.
		st.Report = "the session state does not fit the domain: " + err.Error() + "\n"
		st.Goals = make([]planbus.AgentGoal, len(a.d.Goals))
		for i, g := range a.d.Goals {
			st.Goals[i] = planbus.AgentGoal{Goal: g.Name, Current: g.Name == st.Goal}
			if s := doc.Goals[g.Name]; s != nil {
				st.Goals[i].Stats = *s
			}
		}
	}
	return st, nil
}

// number writes a utility as the arbiter's details do: shortest form.
func number(f float64) string { return fmt.Sprintf("%g", f) }

// actions names a plan's steps: "fetch → chop → build".
func actions(r *goap.Result) string {
	if len(r.Steps) == 0 {
		return "(nothing to do)"
	}
	names := make([]string, len(r.Steps))
	for i, s := range r.Steps {
		names[i] = s.Action
	}
	return strings.Join(names, " → ")
}

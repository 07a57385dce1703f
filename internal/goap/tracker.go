package goap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Defaults of TrackerConfig.
const (
	DefaultFailureThreshold = 3
	DefaultMaxReplans       = 3
)

// ErrNoStep means a step outcome was reported to a tracker whose plan has
// no step in progress (it finished, or it gave up).
var ErrNoStep = errors.New("goap: no step in progress")

// TrackerConfig holds the executor's rules.
type TrackerConfig struct {
	// FailureThreshold is how many consecutive failures of the plan's
	// steps make the tracker ask for a replan; below it, it asks to retry
	// the step (seed: single failures happen; three in a row suggest a
	// systematic problem). 0 means DefaultFailureThreshold (3). The
	// planner service sets 1: the dispatcher has already retried the tool
	// by its retry policy.
	FailureThreshold int
	// MaxReplans is how many replans the tracker asks for before it gives
	// up on the goal. 0 means DefaultMaxReplans (3); negative means none.
	MaxReplans int
}

func (c TrackerConfig) validate() error {
	if c.FailureThreshold < 0 {
		return fmt.Errorf("goap: TrackerConfig.FailureThreshold %d is negative", c.FailureThreshold)
	}
	return nil
}

// Verdict is what a Tracker tells its caller to do next.
type Verdict string

// The verdicts.
const (
	// Continue: run Decision.Step, the next step of the plan.
	Continue Verdict = "continue"
	// Retry: run Decision.Step, the step that failed, again.
	Retry Verdict = "retry"
	// Replan: plan again for the same goal from the observed state and
	// hand the result to Tracker.Replanned.
	Replan Verdict = "replan"
	// Done: the goal's conditions hold in the observed state.
	Done Verdict = "done"
	// GiveUp: stop pursuing the goal; put it on cooldown with
	// Arbiter.Failed.
	GiveUp Verdict = "give-up"
)

// Decision is a Tracker's verdict with the step it concerns and why.
type Decision struct {
	Verdict Verdict
	// Step is the index of the step to run for Continue and Retry, -1
	// otherwise.
	Step   int
	Reason string
}

// TrackerState is a Tracker's memory, for a caller that keeps it between
// requests. It marshals to JSON.
type TrackerState struct {
	Goal                string   `json:"goal"`
	Plan                []string `json:"plan"` // action names
	Next                int      `json:"next"` // the step in progress
	ConsecutiveFailures int      `json:"consecutiveFailures,omitempty"`
	Failures            int      `json:"failures,omitempty"`
	Replans             int      `json:"replans,omitempty"`
	// Over means no step is in progress: the goal is done, given up, or
	// waiting for Replanned.
	Over bool `json:"over,omitempty"`
}

// Tracker follows the execution of one goal's plans (seed 002, "The Plan
// Executor" and the monitor phase). The caller reports each step's
// outcome with the world state observed after it, and any world change
// seen while a step runs; the tracker answers continue, retry, replan,
// done or give up:
//
//   - the goal holds in the observed state: done, whatever is left;
//   - a step succeeded: the failure streak ends; the rest of the plan is
//     simulated from the observed state (seed: effects are predictions,
//     reality may differ); if a remaining step's preconditions would fail
//     or the last step would not reach the goal, replan, else continue;
//   - a step failed: retry it while the streak of consecutive failures is
//     below FailureThreshold and its preconditions still hold; else replan;
//   - a replan beyond MaxReplans is a give-up instead.
//
// A Tracker is pure and not safe for concurrent use.
type Tracker struct {
	d    *Domain
	goal *Goal
	cfg  TrackerConfig
	plan []*Action
	st   TrackerState
	ev   *evaluator
}

// NewTracker starts tracking the plan r. Errors: ErrUnknownGoal, or an
// action of r the domain does not have.
func NewTracker(d *Domain, r *Result, cfg TrackerConfig) (*Tracker, error) {
	names := make([]string, len(r.Steps))
	for i, s := range r.Steps {
		names[i] = s.Action
	}
	return RestoreTracker(d, TrackerState{Goal: r.Goal, Plan: names}, cfg)
}

// RestoreTracker rebuilds a tracker from the memory State returned.
func RestoreTracker(d *Domain, st TrackerState, cfg TrackerConfig) (*Tracker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.FailureThreshold == 0 {
		cfg.FailureThreshold = DefaultFailureThreshold
	}
	if cfg.MaxReplans == 0 {
		cfg.MaxReplans = DefaultMaxReplans
	}
	t := &Tracker{d: d, cfg: cfg, goal: d.goals[st.Goal], ev: newEvaluator(d)}
	if t.goal == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGoal, st.Goal)
	}
	if err := t.setPlan(st.Plan); err != nil {
		return nil, err
	}
	if st.Next < 0 || st.Next > len(st.Plan) {
		return nil, fmt.Errorf("goap: tracker state: step %d of a %d-step plan", st.Next, len(st.Plan))
	}
	t.st = st
	t.st.Plan = slices.Clone(st.Plan)
	return t, nil
}

func (t *Tracker) setPlan(names []string) error {
	t.plan = make([]*Action, len(names))
	for i, n := range names {
		if t.plan[i] = t.d.actions[n]; t.plan[i] == nil {
			return fmt.Errorf("goap: plan step %d: unknown action %q", i+1, n)
		}
	}
	return nil
}

// State returns a copy of the tracker's memory.
func (t *Tracker) State() TrackerState {
	st := t.st
	st.Plan = slices.Clone(t.st.Plan)
	return st
}

// Failures reports how many steps failed since tracking began, replans
// included (seed: hadRecentFailures decides whether a goal cools down).
func (t *Tracker) Failures() int { return t.st.Failures }

// Replanned installs a new plan for the same goal, as Plan returned it
// after a Replan verdict. The failure streak starts over; the count of
// replans and failures does not.
func (t *Tracker) Replanned(r *Result) error {
	if r.Goal != t.goal.Name {
		return fmt.Errorf("goap: replanned for goal %s, tracking %s", r.Goal, t.goal.Name)
	}
	names := make([]string, len(r.Steps))
	for i, s := range r.Steps {
		names[i] = s.Action
	}
	if err := t.setPlan(names); err != nil {
		return err
	}
	t.st.Plan, t.st.Next, t.st.ConsecutiveFailures, t.st.Over = names, 0, 0, false
	return nil
}

// Succeeded reports that the step in progress succeeded and observed is
// the world state now.
func (t *Tracker) Succeeded(observed State) (Decision, error) {
	v, err := t.begin(observed)
	if err != nil {
		return Decision{}, err
	}
	t.st.ConsecutiveFailures = 0
	t.st.Next++
	return t.check(v, fmt.Sprintf("step %d (%s) succeeded", t.st.Next, t.plan[t.st.Next-1].Name))
}

// Failed reports that the step in progress failed and observed is the
// world state now.
func (t *Tracker) Failed(observed State) (Decision, error) {
	v, err := t.begin(observed)
	if err != nil {
		return Decision{}, err
	}
	t.st.ConsecutiveFailures++
	t.st.Failures++
	a := t.plan[t.st.Next]
	what := fmt.Sprintf("step %d (%s) failed", t.st.Next+1, a.Name)
	if satisfied(t.goal, v) {
		return t.end(Done, what+", but the goal holds"), nil
	}
	unmet, err := unmetPreconditions(t.ev, a, v)
	if err != nil {
		return Decision{}, err
	}
	if len(unmet) > 0 {
		return t.replan(fmt.Sprintf("%s and its preconditions no longer hold: %s", what, joinStrings(unmet))), nil
	}
	if t.st.ConsecutiveFailures < t.cfg.FailureThreshold {
		return Decision{Verdict: Retry, Step: t.st.Next,
			Reason: fmt.Sprintf("%s (%d of %d failures in a row)", what, t.st.ConsecutiveFailures, t.cfg.FailureThreshold)}, nil
	}
	return t.replan(fmt.Sprintf("%s %d times in a row", what, t.st.ConsecutiveFailures)), nil
}

// Observe reports a world state seen while the step in progress runs or
// between steps (the monitor phase). The verdict is Continue with the step
// in progress when the plan still leads to the goal.
func (t *Tracker) Observe(observed State) (Decision, error) {
	if t.st.Over {
		return Decision{}, ErrNoStep
	}
	v, err := t.vector(observed)
	if err != nil {
		return Decision{}, err
	}
	return t.check(v, "world changed")
}

func (t *Tracker) begin(observed State) ([]value, error) {
	if t.st.Over || t.st.Next >= len(t.plan) {
		return nil, ErrNoStep
	}
	return t.vector(observed)
}

func (t *Tracker) vector(s State) ([]value, error) {
	v := make([]value, t.d.slots())
	if err := t.d.vectorInto(v, s, t.ev); err != nil {
		return nil, err
	}
	return v, nil
}

// check decides from the observed state whether the rest of the plan,
// from step Next on, still reaches the goal. A goal without conditions
// is reached when its plan has run.
func (t *Tracker) check(v []value, what string) (Decision, error) {
	always := len(t.goal.Conditions) == 0
	if satisfied(t.goal, v) || always && t.st.Next == len(t.plan) && len(t.plan) > 0 {
		return t.end(Done, what+"; the goal holds"), nil
	}
	if t.st.Next == len(t.plan) {
		if always {
			return t.replan(what + "; the plan is empty"), nil
		}
		return t.replan(fmt.Sprintf("%s; the plan is finished but the goal is unsatisfied: %s", what, joinStrings(unsatisfied(t.goal.Conditions, v)))), nil
	}
	sim := slices.Clone(v)
	for i := t.st.Next; i < len(t.plan); i++ {
		a := t.plan[i]
		unmet, err := unmetPreconditions(t.ev, a, sim)
		if err != nil {
			return Decision{}, err
		}
		if len(unmet) > 0 {
			return t.replan(fmt.Sprintf("%s; step %d (%s) would not apply: %s", what, i+1, a.Name, joinStrings(unmet))), nil
		}
		for k := range a.Effects {
			a.Effects[k].apply(sim)
		}
		if len(t.d.Derived) > 0 {
			if err := t.ev.derive(sim); err != nil {
				return Decision{}, err
			}
		}
	}
	if !always && !satisfied(t.goal, sim) {
		return t.replan(fmt.Sprintf("%s; the rest of the plan would leave %s", what, joinStrings(unsatisfied(t.goal.Conditions, sim)))), nil
	}
	return Decision{Verdict: Continue, Step: t.st.Next, Reason: what}, nil
}

func (t *Tracker) replan(why string) Decision {
	if t.cfg.MaxReplans < 0 || t.st.Replans >= t.cfg.MaxReplans {
		return t.end(GiveUp, fmt.Sprintf("%s; no replans left (%d made)", why, t.st.Replans))
	}
	t.st.Replans++
	t.st.Over = true // until Replanned
	return Decision{Verdict: Replan, Step: -1, Reason: fmt.Sprintf("%s; replan %d of %d", why, t.st.Replans, t.cfg.MaxReplans)}
}

func (t *Tracker) end(v Verdict, why string) Decision {
	t.st.Over = true
	return Decision{Verdict: v, Step: -1, Reason: why}
}

func joinStrings(xs []string) string { return strings.Join(xs, ", ") }

package goap

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"time"
)

// Defaults of ArbiterConfig.
const (
	DefaultHysteresis = 0.2
	DefaultPreemption = 30
)

// ArbiterConfig tunes goal switching. The zero value takes the seed's
// numbers.
type ArbiterConfig struct {
	// Hysteresis is the relative margin by which a goal's utility must
	// reach past the current goal's before the arbiter switches to it
	// between plans: it switches when best >= current × (1 + Hysteresis),
	// so with the default the current goal stays while best < current ×
	// 1.2: 50 → 60 switches and 50 → 59.9 does not. 0 means
	// DefaultHysteresis (20%); negative means no margin (any strictly
	// better goal wins).
	Hysteresis float64
	// Preemption is the absolute margin a goal's utility must beat the
	// current goal's by to interrupt it while its plan runs: best >
	// current + Preemption. It is larger than the hysteresis because an
	// interrupted plan loses its progress. 0 means DefaultPreemption (30);
	// negative means a running plan is never preempted.
	Preemption float64
}

func (c ArbiterConfig) validate() error {
	if math.IsNaN(c.Hysteresis) {
		return errors.New("goap: ArbiterConfig.Hysteresis is NaN")
	}
	if math.IsNaN(c.Preemption) {
		return errors.New("goap: ArbiterConfig.Preemption is NaN")
	}
	return nil
}

// Reason says why Select chose what it chose.
type Reason string

// The reasons of a Selection.
const (
	// ReasonNone: no goal is eligible (each is satisfied, invalid, of
	// utility <= 0 or cooling down); Selection.Goal is "".
	ReasonNone Reason = "none"
	// ReasonBest: there was no current goal; the highest utility wins.
	ReasonBest Reason = "best"
	// ReasonCurrent: the current goal still has the highest utility.
	ReasonCurrent Reason = "current"
	// ReasonHysteresis: another goal is better, but not by the margin
	// (Hysteresis between plans, Preemption while a plan runs); the
	// current goal is kept.
	ReasonHysteresis Reason = "hysteresis"
	// ReasonSwitch: between plans, another goal beat the current one by
	// the hysteresis margin.
	ReasonSwitch Reason = "switch"
	// ReasonPreempt: while the current goal's plan runs, another goal beat
	// it by the preemption margin. The caller cancels the running plan.
	ReasonPreempt Reason = "preempt"
	// ReasonReplace: the current goal is no longer eligible (satisfied,
	// invalid, utility <= 0, cooling down, or gone from the domain), so
	// the best eligible goal takes its place. A plan still running for it
	// is stale.
	ReasonReplace Reason = "replace"
)

// Selection is the arbiter's choice.
type Selection struct {
	Goal    string // "" with ReasonNone
	Utility float64
	Reason  Reason
	// Detail explains the choice for logs and events.
	Detail string
}

// GoalStatus is one goal as the arbiter sees it in a state.
type GoalStatus struct {
	Goal    string
	Utility float64 // 0 when the goal is not valid
	Valid   bool
	// Satisfied: the goal's conditions hold; never for a goal without
	// conditions, which is always applicable (an explore fallback).
	Satisfied bool
	// CoolingUntil is when the goal's cooldown ends; zero if none.
	CoolingUntil time.Time
	// Eligible means valid, unsatisfied, utility > 0 and not cooling down.
	Eligible bool
}

// why names the first reason a goal is not eligible.
func (g GoalStatus) why() string {
	switch {
	case g.Satisfied:
		return "satisfied"
	case !g.Valid:
		return "not valid"
	case !g.CoolingUntil.IsZero():
		return "cooling down until " + g.CoolingUntil.UTC().Format(time.RFC3339Nano)
	case g.Utility <= 0:
		return "utility " + formatNumber(g.Utility)
	}
	return "eligible"
}

// ArbiterState is an Arbiter's memory, for a caller that keeps it between
// requests (in a KV bucket, say). It marshals to JSON.
type ArbiterState struct {
	Current string `json:"current,omitempty"`
	// Running means a plan for Current is executing.
	Running bool `json:"running,omitempty"`
	// Cooldowns maps a goal to the end of its cooldown.
	Cooldowns map[string]time.Time `json:"cooldowns,omitempty"`
}

// Arbiter picks the goal to pursue (seed 002, "The Goal Arbiter"): the
// eligible goal of highest utility, with hysteresis against thrashing
// between goals of similar utility and a larger margin for preempting a
// running plan, and a cooldown on goals that failed. Ties go to the goal
// listed first in the domain.
//
// An Arbiter is pure: time is passed in, nothing happens in the
// background. It is not safe for concurrent use.
type Arbiter struct {
	d   *Domain
	cfg ArbiterConfig
	st  ArbiterState
	ev  *evaluator
}

// NewArbiter returns an arbiter with no current goal and no cooldowns.
func NewArbiter(d *Domain, cfg ArbiterConfig) (*Arbiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Hysteresis == 0 {
		cfg.Hysteresis = DefaultHysteresis
	}
	if cfg.Hysteresis < 0 {
		cfg.Hysteresis = 0
	}
	if cfg.Preemption == 0 {
		cfg.Preemption = DefaultPreemption
	}
	return &Arbiter{d: d, cfg: cfg, ev: newEvaluator(d), st: ArbiterState{Cooldowns: map[string]time.Time{}}}, nil
}

// State returns a copy of the arbiter's memory.
func (a *Arbiter) State() ArbiterState {
	st := a.st
	st.Cooldowns = maps.Clone(a.st.Cooldowns)
	return st
}

// Restore replaces the arbiter's memory with st, as State returned it.
// Goals the domain no longer has are dropped.
func (a *Arbiter) Restore(st ArbiterState) {
	a.st = ArbiterState{Cooldowns: map[string]time.Time{}}
	if a.d.goals[st.Current] != nil {
		a.st.Current, a.st.Running = st.Current, st.Running
	}
	for g, t := range st.Cooldowns {
		if a.d.goals[g] != nil {
			a.st.Cooldowns[g] = t
		}
	}
}

// Current returns the current goal ("" if none) and whether its plan runs.
func (a *Arbiter) Current() (goal string, running bool) { return a.st.Current, a.st.Running }

// SetRunning tells the arbiter whether a plan for the current goal is
// executing. While it is, Select switches goals only by the preemption
// margin. Select clears it whenever it changes the current goal.
func (a *Arbiter) SetRunning(running bool) { a.st.Running = running && a.st.Current != "" }

// Clear forgets the current goal, e.g. after its plan succeeded.
func (a *Arbiter) Clear() { a.st.Current, a.st.Running = "", false }

// Failed puts a goal on cooldown until now + its Cooldown (seed: a plan
// exhausted with failures), and forgets it as the current goal.
func (a *Arbiter) Failed(goal string, now time.Time) error {
	g := a.d.goals[goal]
	if g == nil {
		return fmt.Errorf("%w: %q", ErrUnknownGoal, goal)
	}
	if g.Cooldown > 0 {
		a.st.Cooldowns[goal] = now.Add(g.Cooldown)
	}
	if a.st.Current == goal {
		a.Clear()
	}
	return nil
}

// CoolDown puts a goal on cooldown until until (a cooldown it has already
// that ends later stays), and forgets it as the current goal: Failed with
// a cooldown of the caller's, as an agent backing off after repeated
// failures sets.
func (a *Arbiter) CoolDown(goal string, until time.Time) error {
	if a.d.goals[goal] == nil {
		return fmt.Errorf("%w: %q", ErrUnknownGoal, goal)
	}
	if cur, ok := a.st.Cooldowns[goal]; !ok || until.After(cur) {
		a.st.Cooldowns[goal] = until
	}
	if a.st.Current == goal {
		a.Clear()
	}
	return nil
}

// Cooldown is the goal's own cooldown (Goal.Cooldown), or 0 for a goal the
// domain does not have.
func (a *Arbiter) Cooldown(goal string) time.Duration {
	if g := a.d.goals[goal]; g != nil {
		return g.Cooldown
	}
	return 0
}

// Report evaluates every goal in state s at time now, in domain order.
// Errors: ErrInvalidState for a mistyped fact, *EvalError for a utility,
// validity or derived fact expression that fails.
func (a *Arbiter) Report(s State, now time.Time) ([]GoalStatus, error) {
	v, err := a.vector(s)
	if err != nil {
		return nil, err
	}
	return a.report(v, now)
}

func (a *Arbiter) vector(s State) ([]value, error) {
	v := make([]value, a.d.slots())
	if err := a.d.vectorInto(v, s, a.ev); err != nil {
		return nil, err
	}
	return v, nil
}

func (a *Arbiter) report(v []value, now time.Time) ([]GoalStatus, error) {
	out := make([]GoalStatus, len(a.d.Goals))
	for i, g := range a.d.Goals {
		st := GoalStatus{Goal: g.Name, Valid: true, Satisfied: satisfied(g, v)}
		if until, ok := a.st.Cooldowns[g.Name]; ok && now.Before(until) {
			st.CoolingUntil = until
		}
		if g.valid != nil {
			ok, err := a.ev.boolean(g.valid, v, "goal "+g.Name+": valid")
			if err != nil {
				return nil, err
			}
			st.Valid = ok
		}
		if st.Valid {
			st.Utility = g.Utility
			if g.utility != nil {
				u, err := a.ev.number(g.utility, v, "goal "+g.Name+": utility")
				if err != nil {
					return nil, err
				}
				st.Utility = u
			}
		}
		st.Eligible = st.Valid && !st.Satisfied && st.CoolingUntil.IsZero() && st.Utility > 0
		out[i] = st
	}
	return out, nil
}

// Select picks the goal to pursue in state s at time now and makes it the
// current goal:
//
//   - no current goal: the eligible goal of highest utility (ReasonBest);
//   - the current goal is no longer eligible: the best eligible goal
//     (ReasonReplace);
//   - the current goal is the best: kept (ReasonCurrent);
//   - a better goal, between plans: it wins if its utility reaches the
//     current's × (1 + Hysteresis) (ReasonSwitch), else the current is
//     kept (ReasonHysteresis);
//   - a better goal while the current goal's plan runs: it wins if its
//     utility exceeds the current's + Preemption (ReasonPreempt), else
//     the current is kept (ReasonHysteresis).
//
// With no eligible goal the selection is empty (ReasonNone). Expired
// cooldowns are forgotten. Errors are Report's; the arbiter's memory is
// unchanged on error.
func (a *Arbiter) Select(s State, now time.Time) (Selection, error) {
	sel, _, err := a.SelectReport(s, now)
	return sel, err
}

// SelectReport is Select, which also returns every goal as the selection
// saw it (Report at the same state and time): the utilities behind the
// choice, which the seed's arbiter logs in debug mode. It costs nothing
// more than Select.
func (a *Arbiter) SelectReport(s State, now time.Time) (Selection, []GoalStatus, error) {
	v, err := a.vector(s)
	if err != nil {
		return Selection{}, nil, err
	}
	report, err := a.report(v, now)
	if err != nil {
		return Selection{}, nil, err
	}
	return a.choose(report, now), report, nil
}

// choose is Select's decision on a report of every goal.
func (a *Arbiter) choose(report []GoalStatus, now time.Time) Selection {
	for g, until := range a.st.Cooldowns {
		if !now.Before(until) {
			delete(a.st.Cooldowns, g)
		}
	}
	best := -1
	cur := -1
	for i, st := range report {
		if st.Eligible && (best < 0 || st.Utility > report[best].Utility) {
			best = i
		}
		if st.Goal == a.st.Current {
			cur = i
		}
	}
	pick := func(i int, r Reason, detail string) Selection {
		if i < 0 {
			a.Clear()
			return Selection{Reason: ReasonNone, Detail: detail}
		}
		if report[i].Goal != a.st.Current {
			a.st.Current, a.st.Running = report[i].Goal, false
		}
		return Selection{Goal: report[i].Goal, Utility: report[i].Utility, Reason: r, Detail: detail}
	}
	describe := func(i int) string { return fmt.Sprintf("%s (%s)", report[i].Goal, formatNumber(report[i].Utility)) }
	switch {
	case best < 0:
		detail := "no eligible goal"
		if cur >= 0 {
			detail += "; current goal " + report[cur].Goal + " is " + report[cur].why()
		}
		return pick(-1, ReasonNone, detail)
	case cur < 0 && a.st.Current != "":
		return pick(best, ReasonReplace, fmt.Sprintf("current goal %s is gone; best is %s", a.st.Current, describe(best)))
	case cur < 0:
		return pick(best, ReasonBest, "best is "+describe(best))
	case !report[cur].Eligible:
		return pick(best, ReasonReplace, fmt.Sprintf("current goal %s is %s; best is %s", report[cur].Goal, report[cur].why(), describe(best)))
	case best == cur || report[best].Utility <= report[cur].Utility:
		return pick(cur, ReasonCurrent, describe(cur)+" is still the best")
	}
	bu, cu := report[best].Utility, report[cur].Utility
	if a.st.Running {
		if a.cfg.Preemption >= 0 && bu > cu+a.cfg.Preemption {
			return pick(best, ReasonPreempt, fmt.Sprintf("%s beats running %s by more than %s", describe(best), describe(cur), formatNumber(a.cfg.Preemption)))
		}
		return pick(cur, ReasonHysteresis, fmt.Sprintf("%s does not beat running %s by more than the preemption margin", describe(best), describe(cur)))
	}
	if reaches(bu, cu*(1+a.cfg.Hysteresis)) {
		return pick(best, ReasonSwitch, fmt.Sprintf("%s beats %s by %s%% or more", describe(best), describe(cur), formatNumber(a.cfg.Hysteresis*100)))
	}
	return pick(cur, ReasonHysteresis, fmt.Sprintf("%s does not beat %s by %s%%", describe(best), describe(cur), formatNumber(a.cfg.Hysteresis*100)))
}

// reaches reports whether utility u reaches threshold t, the product of a
// utility and 1 + Hysteresis. The product is rounded in binary (3 × 1.2 is
// 3.5999999999999996), so u may fall short of it by a rounding error and
// still reach it, as it does in the decimal arithmetic domains are written
// in.
func reaches(u, t float64) bool { return u >= t-1e-9*math.Abs(t) }

package templates

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus/internal/plan"
)

// Action is what happens after a step's attempt.
type Action string

// Actions. Advance follows a verified (or unchecked) success; the others
// follow a failure: a failed tool or an output its gate refused.
const (
	ActionAdvance  Action = "advance"  // the step is done; go on
	ActionRetry    Action = "retry"    // run the step again
	ActionSkip     Action = "skip"     // give the step up and go on, as if it were optional
	ActionAbort    Action = "abort"    // stop the plan
	ActionFallback Action = "fallback" // run the fallback step in its place, or switch to the fallback plan
	// ActionWarn and ActionBlock are what a guided session does after a
	// failed check of a step whose onFail says guided: warn or block: the
	// step stays current and the agent may try it again, without limit;
	// the context carries a warning (warn) or says that the step failed
	// verification and holds the plan (block).
	ActionWarn  Action = "warn"
	ActionBlock Action = "block"
)

// DefaultRetries is the retries of a step without onFail: 3 attempts in
// all, like a plan tool without a retry policy.
const DefaultRetries = plan.DefaultMaxAttempts - 1

// OnFail says what follows a failed or unverified attempt of a step: up to
// Retries further attempts (while the failure is retryable), then Then.
//
// In JSON it is an object, or one of the shorthands "retry" (2 retries,
// then abort), "skip" and "abort" (no retries), "warn" and "block" (2
// retries then abort in a plan; in a guided session, Guided warn or
// block). The zero OnFail aborts at the first failure; a step decoded
// without onFail gets DefaultOnFail.
type OnFail struct {
	// Retries are the attempts after the first, 0..99.
	Retries int `json:"retries,omitempty"`
	// BackoffMs is the delay before the first retry, doubling for each
	// further one, as in a plan tool's retry policy. 0 means 100.
	BackoffMs int64 `json:"backoffMs,omitempty"`
	// Then is skip, abort or fallback; "" means abort.
	Then Action `json:"then,omitempty"`
	// Step names the fallback step (one of the template's fallbacks) that
	// runs in the failed step's place; Plan names the template the request
	// falls back to. Exactly one is set when Then is fallback.
	Step string `json:"step,omitempty"`
	Plan string `json:"plan,omitempty"`
	// Guided, warn or block, replaces Retries and Then in a guided
	// session: a failed check keeps the step current, for the agent to try
	// again as often as it takes (ResolveGuided). A plan has no agent to
	// wait for, so executed plans ignore it. "": a guided session follows
	// Retries and Then too.
	Guided Action `json:"guided,omitempty"`
}

// DefaultOnFail is the onFail of a step that gives none.
func DefaultOnFail() OnFail { return OnFail{Retries: DefaultRetries, Then: ActionAbort} }

// UnmarshalJSON accepts the object form and the shorthands.
func (o *OnFail) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch Action(s) {
		case ActionRetry:
			*o = OnFail{Retries: DefaultRetries, Then: ActionAbort}
		case ActionSkip:
			*o = OnFail{Then: ActionSkip}
		case ActionAbort:
			*o = OnFail{Then: ActionAbort}
		case ActionWarn, ActionBlock:
			*o = OnFail{Retries: DefaultRetries, Then: ActionAbort, Guided: Action(s)}
		default:
			return fmt.Errorf("onFail %q: want \"retry\", \"skip\", \"abort\", \"warn\", \"block\" or an object", s)
		}
		return nil
	}
	type plain OnFail
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*o = OnFail(p)
	return nil
}

// then is Then with its default.
func (o OnFail) then() Action {
	if o.Then == "" {
		return ActionAbort
	}
	return o.Then
}

// Attempts is how many times the step runs at most: 1 + Retries.
func (o OnFail) Attempts() int { return 1 + max(o.Retries, 0) }

func (o OnFail) backoff() int64 {
	if o.BackoffMs <= 0 {
		return plan.DefaultBackoffMs
	}
	return o.BackoffMs
}

// check validates the fields' combination, not the targets' existence.
func (o OnFail) check() error {
	switch o.then() {
	case ActionSkip, ActionAbort:
		if o.Step != "" || o.Plan != "" {
			return fmt.Errorf("step and plan are only for then \"fallback\", not %q", o.then())
		}
	case ActionFallback:
		if (o.Step == "") == (o.Plan == "") {
			return fmt.Errorf("then \"fallback\" needs exactly one of step (a fallback step) and plan (another template)")
		}
	default:
		return fmt.Errorf("then %q: want skip, abort or fallback", o.Then)
	}
	if o.Retries < 0 || o.Retries > 99 {
		return fmt.Errorf("retries %d: want 0..99", o.Retries)
	}
	if o.BackoffMs < 0 {
		return fmt.Errorf("backoffMs %d: want >= 0", o.BackoffMs)
	}
	switch o.Guided {
	case "", ActionWarn, ActionBlock:
	default:
		return fmt.Errorf("guided %q: want warn or block", o.Guided)
	}
	return nil
}

// Decision is what a tracker, dispatcher or planner does next with a step.
type Decision struct {
	Action Action `json:"action"`
	// Step is the fallback step to run, Plan the template to fall back to.
	Step string `json:"step,omitempty"`
	Plan string `json:"plan,omitempty"`
	// DelayMs is the wait before a retry.
	DelayMs int64 `json:"delayMs,omitempty"`
	// Reason says why, for people.
	Reason string `json:"reason,omitempty"`
}

// Resolve says what follows the failure of attempt (1-based) of a step
// whose onFail is o. A retryable failure with retries left is retried after
// BackoffMs × 2^(attempt−1); otherwise Then applies. A failure that is not
// retryable (a planbus.Retryable category that says no, such as invalid
// input) goes straight to Then. The attempt counts the attempts of the
// step that failed: a fallback step starts again at 1.
func (o OnFail) Resolve(attempt int, retryable bool) Decision {
	attempt = max(attempt, 1)
	if retryable && attempt <= o.Retries {
		delay := o.backoff()
		for i := 1; i < attempt && delay < 3_600_000; i++ {
			delay *= 2
		}
		return Decision{Action: ActionRetry, DelayMs: min(delay, 3_600_000),
			Reason: fmt.Sprintf("attempt %d of %d failed; retrying", attempt, o.Attempts())}
	}
	why := fmt.Sprintf("attempt %d of %d failed", attempt, o.Attempts())
	if !retryable && attempt < o.Attempts() {
		why = fmt.Sprintf("attempt %d failed and is not worth retrying", attempt)
	}
	switch d := (Decision{Action: o.then(), Step: o.Step, Plan: o.Plan}); d.Action {
	case ActionSkip:
		d.Reason = why + "; skipping the step"
		return d
	case ActionFallback:
		if d.Step != "" {
			d.Reason = fmt.Sprintf("%s; falling back to step %q", why, d.Step)
		} else {
			d.Reason = fmt.Sprintf("%s; falling back to plan %q", why, d.Plan)
		}
		return d
	default:
		d.Action, d.Step, d.Plan = ActionAbort, "", ""
		d.Reason = why + "; aborting the plan"
		return d
	}
}

// ResolveGuided says what follows a failed check of attempt (1-based) in a
// guided session: warn or block when Guided says so, whatever the attempt
// (the agent may try again without limit), else what Resolve says for a
// retryable failure, without its delay: the agent's next turn is the
// retry.
func (o OnFail) ResolveGuided(attempt int) Decision {
	switch o.Guided {
	case ActionWarn:
		return Decision{Action: ActionWarn, Reason: fmt.Sprintf("attempt %d failed; the step stays current (warn)", max(attempt, 1))}
	case ActionBlock:
		return Decision{Action: ActionBlock, Reason: fmt.Sprintf("attempt %d failed; the step blocks the plan until it passes", max(attempt, 1))}
	}
	d := o.Resolve(attempt, true)
	d.DelayMs = 0
	return d
}

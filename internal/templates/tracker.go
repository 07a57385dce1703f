package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/text"
)

// Errors of Tracker.Observe and Resume.
var (
	ErrUnknownStep   = errors.New("templates: unknown step")
	ErrNotReady      = errors.New("templates: step not ready")
	ErrResolved      = errors.New("templates: step already resolved")
	ErrEnded         = errors.New("templates: plan instance ended")
	ErrStateMismatch = errors.New("templates: state does not fit the template")
)

// Staleness says when a plan instance that makes no progress expires:
// after a number of turns (see Tracker.Turn), or after a time. Progress is
// the instance's start and each step that resolves: verified, completed
// or skipped.
type Staleness struct {
	// MaxAgeMs: the instance is stale once this long has passed since its
	// last progress. 0: no limit.
	MaxAgeMs int64 `json:"maxAgeMs,omitempty"`
	// MaxTurns: the instance is stale once it has seen more than this
	// many turns without progress. 0: no limit. Default DefaultMaxTurns.
	MaxTurns int `json:"maxTurns"`
}

// Check reports whether an active instance in state st is stale at now,
// and why. An instance that has ended is never stale.
func (s Staleness) Check(st *State, now time.Time) (stale bool, reason string) {
	if st.Status != StatusActive {
		return false, ""
	}
	if s.MaxTurns > 0 && st.Turns > s.MaxTurns {
		return true, fmt.Sprintf("no progress in %d turns, stale after %d", st.Turns, s.MaxTurns)
	}
	if s.MaxAgeMs > 0 {
		idle := now.Sub(st.ProgressAt)
		if idle >= time.Duration(s.MaxAgeMs)*time.Millisecond {
			return true, fmt.Sprintf("no progress for %s (maxAgeMs %d)", idle.Round(time.Millisecond), s.MaxAgeMs)
		}
	}
	return false, ""
}

// Status is a plan instance's state.
type Status string

// Instance states.
const (
	StatusActive    Status = "active"
	StatusCompleted Status = "completed"
	StatusAborted   Status = "aborted"
)

// StepStatus is a step's state.
type StepStatus string

// Step states. Completed is a success without a gate, verified one that
// passed its gate; skipped is a failure given up on (onFail skip), failed
// one that stopped the plan.
const (
	StepPending   StepStatus = "pending"
	StepCompleted StepStatus = "completed"
	StepVerified  StepStatus = "verified"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
)

func (s StepStatus) resolved() bool { return s != StepPending }

// done: the step's dependents may run.
func (s StepStatus) done() bool { return s == StepCompleted || s == StepVerified || s == StepSkipped }

// StepState is one step's progress.
type StepState struct {
	ID     string     `json:"id"`
	Status StepStatus `json:"status"`
	// Attempts counts the attempts of whichever step runs now: the step,
	// or its fallback step, which starts again at 1.
	Attempts int `json:"attempts,omitempty"`
	// Via is the fallback step running, or that ran, in the step's place.
	Via string `json:"via,omitempty"`
	// Reason is the last failure, or what a success was verified against.
	Reason string `json:"reason,omitempty"`
}

// State is a plan instance's progress, as JSON to keep between turns (in
// a KV bucket, say). Resume continues from it.
type State struct {
	Template   string            `json:"template"`
	Version    string            `json:"version"`
	Vars       map[string]string `json:"vars"`
	Status     Status            `json:"status"`
	StartedAt  time.Time         `json:"startedAt"`
	ProgressAt time.Time         `json:"progressAt"`
	// Turns counts the turns since the last progress.
	Turns int         `json:"turns"`
	Steps []StepState `json:"steps"`
	// FallbackPlan is the template an aborted instance falls back to.
	FallbackPlan string `json:"fallbackPlan,omitempty"`
	// Guided: the instance is followed in a guided session (see
	// NewGuidedTracker).
	Guided bool `json:"guided,omitempty"`
	// Reason says why the instance was aborted.
	Reason string `json:"reason,omitempty"`
}

func (st *State) clone() State {
	c := *st
	c.Vars = maps.Clone(st.Vars)
	c.Steps = slices.Clone(st.Steps)
	return c
}

// Result is one attempt's outcome, as the tracker observes it.
type Result struct {
	Step      string          // the step's id: the tool's id, also when its fallback step ran
	Succeeded bool            // the tool succeeded; its gate is still to be checked
	Output    json.RawMessage // the tool's output
	Retryable bool            // for a failure: whether another attempt may help
	Error     string          // for a failure: what went wrong
	At        time.Time
	// ExitCode is the exit code an agent reports with its output, if any
	// (guided sessions).
	ExitCode *int
}

// ResultOf turns a tool result into a Result.
func ResultOf(r *planbus.ToolResult) Result {
	res := Result{Step: r.ToolID, Succeeded: r.State == planbus.ToolSucceeded, Output: r.Output, Retryable: true, At: r.FinishedAt}
	if !res.Succeeded {
		res.Error = string(r.State)
		if r.Error != nil {
			res.Error = string(r.Error.Code) + ": " + r.Error.Message
			res.Retryable = planbus.Retryable(r.Error.Category)
		}
	}
	return res
}

// Tracker follows one plan instance step by step: it checks each result
// against the step's gate, applies the
// step's onFail, knows which steps come next, and says where the plan
// stands. It is a pure state machine: time comes in with each call. A
// Tracker belongs to one goroutine.
type Tracker struct {
	in *Instance
	st State
}

// NewTracker starts tracking an instance at now, as its plan runs: a
// failed step follows its onFail's retries and then.
func NewTracker(in *Instance, now time.Time) *Tracker {
	st := State{Template: in.Template.ID, Version: in.Template.Version, Vars: maps.Clone(in.Vars),
		Status: StatusActive, StartedAt: now, ProgressAt: now, Steps: make([]StepState, len(in.Steps))}
	for i, s := range in.Steps {
		st.Steps[i] = StepState{ID: s.ID, Status: StepPending}
	}
	return &Tracker{in: in, st: st}
}

// Resume continues tracking from a state saved with State. The state must
// be of this template, version and steps (ErrStateMismatch); its
// variables are instantiated again (errors match ErrVars).
func Resume(t *Template, st State) (*Tracker, error) {
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrStateMismatch, fmt.Sprintf(format, args...))
	}
	if st.Template != t.ID || st.Version != t.Version {
		return nil, mismatch("state of %s v%s, template %s v%s", st.Template, st.Version, t.ID, t.Version)
	}
	if len(st.Steps) != len(t.Steps) {
		return nil, mismatch("%d steps in the state, %d in the template", len(st.Steps), len(t.Steps))
	}
	switch st.Status {
	case StatusActive, StatusCompleted, StatusAborted:
	default:
		return nil, mismatch("unknown status %q", st.Status)
	}
	for i, s := range st.Steps {
		if s.ID != t.Steps[i].ID {
			return nil, mismatch("step %d is %q in the state, %q in the template", i+1, s.ID, t.Steps[i].ID)
		}
		switch s.Status {
		case StepPending, StepCompleted, StepVerified, StepFailed, StepSkipped:
		default:
			return nil, mismatch("step %q: unknown status %q", s.ID, s.Status)
		}
		if s.Via != "" && s.Via != t.Steps[i].OnFail.Step {
			return nil, mismatch("step %q: via %q, but its fallback step is %q", s.ID, s.Via, t.Steps[i].OnFail.Step)
		}
		if s.Attempts < 0 {
			return nil, mismatch("step %q: %d attempts", s.ID, s.Attempts)
		}
	}
	instantiate := Instantiate
	if st.Guided {
		instantiate = instantiateGuided
	}
	in, err := instantiate(t, st.Vars)
	if err != nil {
		return nil, err
	}
	return &Tracker{in: in, st: st.clone()}, nil
}

// NewGuidedTracker starts following template t at now in a guided
// session, where an agent runs each step itself and reports its output.
// Variables come from vars as in Instantiate, but one without a value (or
// with a value its pattern refuses) shows as <name> in the step's text,
// for the agent to fill in. The tracker checks a step's Check (keyed
// format) or else its gate, and a failed check follows
// OnFail.ResolveGuided: guided warn or block keep the step without limit.
func NewGuidedTracker(t *Template, vars map[string]string, now time.Time) (*Tracker, error) {
	in, err := instantiateGuided(t, vars)
	if err != nil {
		return nil, err
	}
	tr := NewTracker(in, now)
	tr.st.Guided = true
	return tr, nil
}

// State returns a copy of the tracker's state.
func (tr *Tracker) State() State { return tr.st.clone() }

// Instance returns the instance being tracked.
func (tr *Tracker) Instance() *Instance { return tr.in }

// Done reports whether the instance has completed or been aborted.
func (tr *Tracker) Done() bool { return tr.st.Status != StatusActive }

// Turn counts a turn: one message of the session, or one round of the
// agent's loop, whatever results it brings (Observe does not count turns).
// Progress resets the count; turns without progress make the instance
// stale.
func (tr *Tracker) Turn() {
	if tr.st.Status == StatusActive {
		tr.st.Turns++
	}
}

// Stale reports whether the instance has expired at now, and why.
func (tr *Tracker) Stale(now time.Time) (bool, string) {
	return tr.in.Template.Staleness.Check(&tr.st, now)
}

// ready reports whether step i may run: every step it runs after is done.
func (tr *Tracker) ready(i int) bool {
	for _, d := range tr.in.Template.deps[i] {
		if !tr.st.Steps[tr.in.Template.steps[d]].Status.done() {
			return false
		}
	}
	return true
}

// Next returns the steps that may run now, in template order.
func (tr *Tracker) Next() []string {
	if tr.st.Status != StatusActive {
		return nil
	}
	var out []string
	for i, s := range tr.st.Steps {
		if s.Status == StepPending && tr.ready(i) {
			out = append(out, s.ID)
		}
	}
	return out
}

// running returns the step that runs for step i: the step or its fallback.
func (tr *Tracker) running(i int) *Step {
	if via := tr.st.Steps[i].Via; via != "" {
		s, _ := tr.in.Step(via)
		return s
	}
	return &tr.in.Steps[i]
}

// Observe applies one attempt's result: a success is checked against the
// running step's gate (in a guided session, its Check if it has one), and
// a failure or a refused output goes through its onFail. The decision says
// what follows for the step. A result that resolves a step is progress
// and resets the turns without progress.
//
// Errors: ErrEnded once the instance has completed or aborted,
// ErrUnknownStep, ErrResolved for a step already resolved (a duplicate
// result), ErrNotReady for a step whose predecessors are not done. An
// error changes nothing.
func (tr *Tracker) Observe(r Result) (Decision, error) {
	if tr.st.Status != StatusActive {
		return Decision{}, fmt.Errorf("%w: %s is %s", ErrEnded, tr.st.Template, tr.st.Status)
	}
	i, ok := tr.in.Template.steps[r.Step]
	if !ok {
		return Decision{}, fmt.Errorf("%w: %q is not a step of %s", ErrUnknownStep, r.Step, tr.st.Template)
	}
	ss := &tr.st.Steps[i]
	if ss.Status.resolved() {
		return Decision{}, fmt.Errorf("%w: step %q is %s", ErrResolved, r.Step, ss.Status)
	}
	if !tr.ready(i) {
		return Decision{}, fmt.Errorf("%w: step %q runs after steps not done yet", ErrNotReady, r.Step)
	}
	run := tr.running(i)
	ss.Attempts++
	var d Decision
	progress := false
	if r.Succeeded {
		if ok, why := tr.check(run, r); ok {
			ss.Status, ss.Reason = StepCompleted, ""
			d = Decision{Action: ActionAdvance, Reason: fmt.Sprintf("step %q completed", r.Step)}
			if run.Verify != nil || tr.st.Guided && run.Check != nil {
				ss.Status, ss.Reason = StepVerified, why
				d.Reason = fmt.Sprintf("step %q verified: %s", r.Step, why)
			}
			progress = true
		} else {
			d, progress = tr.fail(i, run, "verification failed: "+why, true)
		}
	} else {
		why := r.Error
		if why == "" {
			why = "failed"
		}
		d, progress = tr.fail(i, run, why, r.Retryable)
	}
	if progress {
		tr.st.Turns = 0
		if !r.At.IsZero() {
			tr.st.ProgressAt = r.At
		}
	}
	if tr.st.Status == StatusActive && !slices.ContainsFunc(tr.st.Steps, func(s StepState) bool { return !s.Status.resolved() }) {
		tr.st.Status = StatusCompleted
	}
	return d, nil
}

// check checks a successful result against the running step: its gate,
// or in a guided session its Check when it has one. A guided result's
// exit code joins an object output that has none, so that exitCode gates
// see it.
func (tr *Tracker) check(run *Step, r Result) (bool, string) {
	if !tr.st.Guided {
		return run.Verify.Check(r.Output)
	}
	if run.Check != nil {
		return run.Check.Verify(r.Output, r.ExitCode)
	}
	return run.Verify.Check(withExitCode(r.Output, r.ExitCode))
}

// withExitCode adds exitCode to an object output that has none.
func withExitCode(output json.RawMessage, exitCode *int) json.RawMessage {
	if exitCode == nil {
		return output
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(output, &obj) != nil || obj == nil {
		return output
	}
	if _, has := obj["exitCode"]; has {
		return output
	}
	obj["exitCode"] = json.RawMessage(fmt.Sprint(*exitCode))
	out, err := json.Marshal(obj)
	if err != nil {
		return output
	}
	return out
}

// fail applies the running step's onFail to a failed attempt of step i.
func (tr *Tracker) fail(i int, run *Step, why string, retryable bool) (Decision, bool) {
	ss := &tr.st.Steps[i]
	d := run.OnFail.Resolve(ss.Attempts, retryable)
	if tr.st.Guided {
		d = run.OnFail.ResolveGuided(ss.Attempts)
	}
	ss.Reason = why
	d.Reason = fmt.Sprintf("step %q: %s; %s", ss.ID, why, d.Reason)
	abort := func() {
		ss.Status = StepFailed
		tr.st.Status = StatusAborted
		tr.st.Reason = fmt.Sprintf("step %q failed: %s", ss.ID, why)
	}
	switch d.Action {
	case ActionRetry, ActionWarn, ActionBlock:
		return d, false
	case ActionSkip:
		ss.Status = StepSkipped
		return d, true
	case ActionFallback:
		if d.Step != "" && ss.Via == "" {
			ss.Via, ss.Attempts = d.Step, 0
			return d, false
		}
		abort()
		tr.st.FallbackPlan = d.Plan
		return d, true
	default:
		abort()
		return d, true
	}
}

// Summary says where the plan stands, one line per step, with the next
// steps' action, skill, input and gate: the plan's context, for events,
// logs and an external planner's prompt. For example:
//
//	Plan git_feature_branch v1 "Feature branch": 1/5 done
//	Step 1/5: Check the working tree ✓ verified (/stdout contains "## ")
//	Step 2/5: Create branch feature/login → next
//	  Run: git switch -c feature/login main
//	  Verify: /stderr contains "Switched to a new branch"
//	Step 3/5: Stage the changes · pending
//	...
//	Next: Step 2/5 (branch). Do not skip ahead: each step is verified before the next.
func (tr *Tracker) Summary() string {
	st, t := &tr.st, tr.in.Template
	n := len(st.Steps)
	done, skipped := 0, 0
	for _, s := range st.Steps {
		if s.Status.done() {
			done++
		}
		if s.Status == StepSkipped {
			skipped++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Plan %s v%s %q: %d/%d done", t.ID, t.Version, t.Name, done, n)
	if skipped > 0 {
		fmt.Fprintf(&b, " (%d skipped)", skipped)
	}
	b.WriteByte('\n')
	var next []string
	for i, s := range st.Steps {
		step := &tr.in.Steps[i]
		fmt.Fprintf(&b, "Step %d/%d: %s ", i+1, n, step.Title())
		via := ""
		if s.Via != "" {
			via = " via fallback " + s.Via
		}
		switch {
		case s.Status == StepVerified || s.Status == StepCompleted:
			fmt.Fprintf(&b, "✓ %s%s", s.Status, via)
			if s.Reason != "" {
				fmt.Fprintf(&b, " (%s)", s.Reason)
			}
		case s.Status == StepSkipped:
			fmt.Fprintf(&b, "↷ skipped%s: %s", via, s.Reason)
		case s.Status == StepFailed:
			fmt.Fprintf(&b, "✗ failed%s: %s", via, s.Reason)
		case st.Status == StatusActive && tr.ready(i):
			fmt.Fprintf(&b, "→ next%s", via)
			if s.Attempts > 0 || s.Reason != "" {
				fmt.Fprintf(&b, " (attempt %d; last: %s)", s.Attempts+1, s.Reason)
			}
			next = append(next, fmt.Sprintf("Step %d/%d (%s)", i+1, n, s.ID))
			b.WriteByte('\n')
			tr.details(&b, tr.running(i))
			continue
		default:
			b.WriteString("· pending")
		}
		b.WriteByte('\n')
	}
	switch st.Status {
	case StatusCompleted:
		fmt.Fprintf(&b, "Completed: %d/%d steps done", done, n)
		if skipped > 0 {
			fmt.Fprintf(&b, ", %d skipped", skipped)
		}
		b.WriteString(".")
	case StatusAborted:
		fmt.Fprintf(&b, "Aborted: %s.", st.Reason)
		if st.FallbackPlan != "" {
			fmt.Fprintf(&b, " Falls back to plan %s.", st.FallbackPlan)
		}
	default:
		fmt.Fprintf(&b, "Next: %s. Do not skip ahead: each step is verified before the next.", strings.Join(next, ", "))
	}
	return b.String()
}

func (tr *Tracker) details(b *strings.Builder, s *Step) {
	if s.Action != "" {
		fmt.Fprintf(b, "  Action: %s\n", s.Action)
	}
	var shell struct {
		Argv []string `json:"argv"`
	}
	switch {
	case s.Manual():
		b.WriteString("  Manual: no tool; a person approves it once it is done\n")
	case s.Skill == "shell" && json.Unmarshal(s.Input, &shell) == nil && len(shell.Argv) > 0:
		args := make([]string, len(shell.Argv))
		for i, a := range shell.Argv {
			args[i] = shellQuote(a)
		}
		fmt.Fprintf(b, "  Run: %s\n", text.Clip(strings.Join(args, " "), 160))
	default:
		fmt.Fprintf(b, "  Skill: %s %s\n", s.Skill, text.Clip(string(inputOrEmpty(s.Input)), 160))
	}
	if s.Verify != nil {
		fmt.Fprintf(b, "  Verify: %s\n", s.Verify)
	}
}

// shellQuote writes an argument as a POSIX shell would need it, so that a
// person can read where each argument starts and ends (the shell skill
// itself runs no shell).
func shellQuote(a string) string {
	if a != "" && strings.IndexFunc(a, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:=@%+,-", r))
	}) < 0 {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

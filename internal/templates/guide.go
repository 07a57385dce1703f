package templates

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/text"
)

// A guided session is the library's other use, beside plans the planner
// runs: an agent that runs its tools itself reports each turn, and the
// session keeps one active plan, found by the turn's domain and message,
// checks the agent's last tool output against the current step, and says
// where the plan stands as context for the model. GuideTurn is one turn,
// pure: the session's state goes in and comes out, with the reply.

// GuideSession is a guided session's state between turns, as JSON.
type GuideSession struct {
	// Plan is the active plan's tracker state (State.Guided), nil when the
	// session has none.
	Plan *State `json:"plan,omitempty"`
}

// GuideInput is one turn of a guided session.
type GuideInput struct {
	// Message and Domain are matched against the library when the session
	// has no active plan; an empty message matches nothing.
	Message string
	Domain  string
	// Results are the tool outputs since the last turn; the last is
	// checked against the current step.
	Results []planbus.GuideToolResult
	// Now is the turn's time (staleness by age, progress times).
	Now time.Time
}

// GuideTurn plays one turn of a guided session on lib and returns the
// session's next state and the reply (its SessionID left for the caller):
//
//   - With an active plan, the turn counts: once the turns since the
//     plan's last progress exceed its staleness (stale_after_turns), it
//     expires and is dropped. Otherwise the last tool result, if any, is
//     checked against the current step: passed, the plan advances (and
//     completes after its last step); failed, the step's onFail decides as
//     OnFail.ResolveGuided says: warn, block and retry keep the step,
//     skip marks it failed and advances, abort drops the plan.
//   - Without one, a non-empty message is matched (Match) and the best
//     candidate becomes the active plan; that turn checks no result.
//   - A turn that ends the plan (completed, aborted, expired) goes on as a
//     turn without one, as the seed's selector does: its message is
//     matched and may start the next plan at once. The reply is then the
//     new plan's activation, with the end of the old one in Ended.
//
// A plan whose template is gone from the library, or changed so that its
// state no longer fits (ErrStateMismatch), is dropped as aborted. The
// reply's Context is the text for the model: the plan with its current
// step marked "← YOU ARE HERE", or what ended it (both, when a plan ended
// and another started); empty without a plan.
func GuideTurn(lib *Library, sess GuideSession, in GuideInput) (GuideSession, planbus.GuideReply) {
	if sess.Plan == nil {
		return activate(lib, in)
	}
	next, reply := follow(lib, *sess.Plan, in)
	if next.Plan != nil {
		return next, reply
	}
	started, act := activate(lib, in)
	if started.Plan == nil {
		if act.Message != "" {
			reply.Message += "; " + act.Message
		}
		return next, reply
	}
	act.Ended = &planbus.GuideEnded{Transition: reply.Transition, Plan: reply.Plan, Message: reply.Message}
	act.Check = reply.Check
	act.Context = reply.Context + "\n\n" + act.Context
	return started, act
}

// follow plays a turn of the active plan in state st.
func follow(lib *Library, st State, in GuideInput) (GuideSession, planbus.GuideReply) {
	t, ok := lib.Template(st.Template)
	var tr *Tracker
	err := fmt.Errorf("%w: no plan %q in the library", ErrStateMismatch, st.Template)
	if ok {
		tr, err = Resume(t, st)
	}
	if err != nil {
		return GuideSession{}, planbus.GuideReply{Transition: planbus.GuideAborted,
			Message: fmt.Sprintf("Plan aborted: %s is no longer in the library as it was: %v", st.Template, err),
			Context: fmt.Sprintf("[PLAN ABORTED: %s]\nThe plan was dropped: the plan library changed.", st.Template)}
	}
	tr.Turn()
	if stale, why := tr.Stale(in.Now); stale {
		reply := planbus.GuideReply{Transition: planbus.GuideExpired, Plan: tr.guidePlan(planbus.GuidePlanExpired),
			Message: fmt.Sprintf("Plan '%s' expired (%s)", t.Name, why),
			Context: fmt.Sprintf("[PLAN EXPIRED: %s]\nThe plan was dropped: %s.", t.ID, why)}
		return GuideSession{}, reply
	}
	reply := planbus.GuideReply{Transition: planbus.GuideNone}
	var note string
	if n := len(in.Results); n > 0 {
		reply, note = tr.guideCheck(in.Results[n-1], in.Now)
	}
	switch tr.st.Status {
	case StatusCompleted:
		reply.Plan = tr.guidePlan(planbus.GuidePlanCompleted)
		reply.Context = fmt.Sprintf("[PLAN COMPLETED: %s]\n%s", t.ID, tr.completedText())
		return GuideSession{}, reply
	case StatusAborted:
		reply.Plan = tr.guidePlan(planbus.GuidePlanAborted)
		reply.Context = fmt.Sprintf("[PLAN ABORTED: %s]\n%s", t.ID, note)
		return GuideSession{}, reply
	}
	next := tr.State()
	reply.Plan = tr.guidePlan(planbus.GuidePlanActive)
	reply.Context = tr.Context(note)
	return GuideSession{Plan: &next}, reply
}

// activate matches the turn's message and starts the best plan.
func activate(lib *Library, in GuideInput) (GuideSession, planbus.GuideReply) {
	none := planbus.GuideReply{Transition: planbus.GuideNone}
	if strings.TrimSpace(in.Message) == "" {
		return GuideSession{}, none
	}
	c, ok := Best(lib, MatchInput{Domain: in.Domain, Text: in.Message}, 0)
	if !ok {
		return GuideSession{}, none
	}
	tr, err := NewGuidedTracker(c.Template, c.Vars, in.Now)
	if err != nil {
		// A template that cannot be filled in even with <name> for its
		// missing variables (a key collision in an input) cannot guide.
		none.Message = fmt.Sprintf("Plan %s matched but cannot start: %v", c.Template.ID, err)
		return GuideSession{}, none
	}
	st := tr.State()
	return GuideSession{Plan: &st}, planbus.GuideReply{Transition: planbus.GuideActivated,
		Plan: tr.guidePlan(planbus.GuidePlanActive), Context: tr.Context(""),
		Message: fmt.Sprintf("Plan activated: %s (%d steps)", c.Template.Name, len(st.Steps))}
}

// current is the index of the step to do now: the first that may run.
func (tr *Tracker) current() (int, bool) {
	next := tr.Next()
	if len(next) == 0 {
		return 0, false
	}
	return tr.in.Template.steps[next[0]], true
}

// guideCheck checks result r against the current step and says what
// followed, with the note for the context.
func (tr *Tracker) guideCheck(r planbus.GuideToolResult, now time.Time) (planbus.GuideReply, string) {
	i, ok := tr.current()
	if !ok {
		return planbus.GuideReply{Transition: planbus.GuideNone}, ""
	}
	title := tr.running(i).Title()
	d, err := tr.Observe(Result{Step: tr.st.Steps[i].ID, Succeeded: true, Output: r.Output, ExitCode: r.ExitCode, At: now})
	if err != nil { // the current step is ready and pending: cannot happen
		return planbus.GuideReply{Transition: planbus.GuideNone, Message: err.Error()}, ""
	}
	ss := tr.st.Steps[i]
	check := &planbus.GuideCheck{Step: i + 1, Tool: r.Name(), Passed: d.Action == ActionAdvance, Action: string(d.Action)}
	reply := planbus.GuideReply{Check: check}
	if check.Passed {
		check.Reason = ss.Reason
		if check.Reason == "" {
			check.Reason = "no check"
		}
		reply.Transition = planbus.GuideAdvanced
		reply.Message = fmt.Sprintf("Step %d verified: %s", i+1, title)
		if tr.st.Status == StatusCompleted {
			reply.Transition = planbus.GuideCompleted
			reply.Message = fmt.Sprintf("Plan '%s' completed", tr.in.Template.Name)
		}
		return reply, ""
	}
	why := strings.TrimPrefix(ss.Reason, "verification failed: ")
	check.Reason = why
	failed := fmt.Sprintf("Step %d failed verification: %s", i+1, why)
	switch d.Action {
	case ActionWarn:
		// The seed's warn logs a warning and lets the agent retry: the
		// session goes on, unlike block, which holds the plan.
		reply.Transition, reply.Message = planbus.GuideWarned, failed
		return reply, fmt.Sprintf("WARNING: %s. Retry it.", failed)
	case ActionBlock:
		reply.Transition, reply.Message = planbus.GuideBlocked, failed
		return reply, fmt.Sprintf("%s. It blocks the plan: do not go on until it passes.", failed)
	case ActionRetry:
		reply.Transition, reply.Message = planbus.GuideBlocked, failed
		return reply, fmt.Sprintf("%s. Retry it (attempt %d of %d).", failed, ss.Attempts+1, tr.running(i).OnFail.Attempts())
	case ActionFallback:
		if d.Step != "" && tr.st.Status == StatusActive {
			reply.Transition, reply.Message = planbus.GuideBlocked, failed+"; its fallback step is current"
			return reply, fmt.Sprintf("%s. Do its fallback instead.", failed)
		}
	case ActionSkip:
		reply.Transition, reply.Message = planbus.GuideAdvanced, fmt.Sprintf("Step %d failed verification and was skipped: %s", i+1, why)
		if tr.st.Status == StatusCompleted {
			reply.Transition = planbus.GuideCompleted
			reply.Message = fmt.Sprintf("Plan '%s' completed", tr.in.Template.Name)
		}
		return reply, fmt.Sprintf("%s; it was skipped.", failed)
	}
	reply.Transition = planbus.GuideAborted
	reply.Message = fmt.Sprintf("Plan aborted: step '%s' failed verification", title)
	note := fmt.Sprintf("Plan aborted due to step %d failure: %s.", i+1, why)
	if p := tr.st.FallbackPlan; p != "" {
		note += fmt.Sprintf(" Its fallback is plan %s.", p)
	}
	return reply, note
}

// guidePlan is the plan's state for a reply.
func (tr *Tracker) guidePlan(status string) *planbus.GuidePlan {
	t := tr.in.Template
	p := &planbus.GuidePlan{ID: t.ID, Name: t.Name, Version: t.Version, Status: status, Of: len(tr.st.Steps),
		TurnsSinceProgress: tr.st.Turns, StaleAfterTurns: t.Staleness.MaxTurns}
	cur, active := tr.current()
	active = active && status == planbus.GuidePlanActive
	if active {
		p.Step = cur + 1
	}
	for i, s := range tr.st.Steps {
		gs := planbus.GuideStep{Index: i + 1, ID: s.ID, Name: tr.in.Steps[i].Title(), Status: planbus.GuideStepPending, Attempts: s.Attempts}
		switch {
		case s.Status == StepCompleted || s.Status == StepVerified:
			gs.Status = planbus.GuideStepCompleted
		case s.Status == StepSkipped || s.Status == StepFailed:
			gs.Status = planbus.GuideStepFailed
		case active && i == cur:
			gs.Status = planbus.GuideStepCurrent
		}
		p.Steps = append(p.Steps, gs)
	}
	return p
}

// Context is the active plan as context for the model, note (a failed
// check) before the instruction:
//
//	[ACTIVE PLAN: bugfix_workflow]
//	Step 1 of 5: Reproduce the bug [COMPLETED]
//	Step 2 of 5: Find the test ← YOU ARE HERE
//	  Action: Find where TestParse is defined
//	  Tool: shell
//	  Command hint: grep -rnE '--include=*.go' 'func TestParse' .
//	  Verify: /stdout is not empty
//	Step 3 of 5: Apply the fix [PENDING]
//	...
//
//	INSTRUCTION: Execute Step 2 now. Do not skip ahead. Verify the result before proceeding.
func (tr *Tracker) Context(note string) string {
	cur, active := tr.current()
	n := len(tr.st.Steps)
	var b strings.Builder
	fmt.Fprintf(&b, "[ACTIVE PLAN: %s]\n", tr.in.Template.ID)
	for i, s := range tr.st.Steps {
		title := tr.in.Steps[i].Title()
		if active && i == cur && s.Via != "" {
			title = fmt.Sprintf("%s (in place of: %s)", tr.running(i).Title(), title)
		}
		fmt.Fprintf(&b, "Step %d of %d: %s", i+1, n, title)
		switch {
		case s.Status == StepCompleted || s.Status == StepVerified:
			b.WriteString(" [COMPLETED]\n")
		case s.Status == StepSkipped || s.Status == StepFailed:
			b.WriteString(" [FAILED]\n")
		case active && i == cur:
			b.WriteString(" ← YOU ARE HERE\n")
			guideDetails(&b, tr.running(i))
		default:
			b.WriteString(" [PENDING]\n")
		}
	}
	b.WriteByte('\n')
	if active {
		tr.toFill(&b, tr.running(cur))
	}
	if note != "" {
		b.WriteString(note + "\n")
	}
	if active {
		fmt.Fprintf(&b, "INSTRUCTION: Execute Step %d now. Do not skip ahead. Verify the result before proceeding.", cur+1)
	}
	return strings.TrimRight(b.String(), "\n")
}

// guideDetails writes what the agent needs for step s: its action, tool,
// command hint and check.
func guideDetails(b *strings.Builder, s *Step) {
	if s.Action != "" {
		fmt.Fprintf(b, "  Action: %s\n", s.Action)
	}
	if !s.Manual() {
		fmt.Fprintf(b, "  Tool: %s\n", s.Skill)
	}
	if hint := stepHint(s); hint != "" {
		fmt.Fprintf(b, "  Command hint: %s\n", hint)
	}
	switch {
	case s.Check != nil && s.Check.Type != CheckManual:
		fmt.Fprintf(b, "  Verify: %s\n", s.Check)
	case s.Check == nil && s.Verify != nil:
		fmt.Fprintf(b, "  Verify: %s\n", s.Verify)
	}
}

// stepHint is the step's Hint, else the shell skill's argv, else the
// skill's input.
func stepHint(s *Step) string {
	if s.Hint != "" || s.Check != nil {
		return s.Hint
	}
	var shell struct {
		Argv []string `json:"argv"`
	}
	if s.Skill == "shell" && json.Unmarshal(s.Input, &shell) == nil && len(shell.Argv) > 0 {
		args := make([]string, len(shell.Argv))
		for i, a := range shell.Argv {
			args[i] = shellQuote(a)
		}
		return text.Clip(strings.Join(args, " "), 300)
	}
	in := string(inputOrEmpty(s.Input))
	if in == "{}" {
		return ""
	}
	return text.Clip(in, 300)
}

// completedText says how a completed plan went.
func (tr *Tracker) completedText() string {
	n, failed := len(tr.st.Steps), 0
	for _, s := range tr.st.Steps {
		if s.Status == StepSkipped || s.Status == StepFailed {
			failed++
		}
	}
	if failed == 0 {
		return fmt.Sprintf("Plan completed: %d of %d steps passed.", n, n)
	}
	return fmt.Sprintf("Plan completed: %d of %d steps passed, %d failed and skipped.", n-failed, n, failed)
}

// toFill says which placeholders of step s the request left unfilled
// (<name>, a variable neither the message nor a default gave) and what
// each stands for, so that the agent knows what to put there.
func (tr *Tracker) toFill(b *strings.Builder, s *Step) {
	text := s.Action + " " + string(s.Input) + " " + stepHint(s)
	var names []string
	for _, name := range slices.Sorted(maps.Keys(tr.in.Template.Vars)) {
		if _, given := tr.in.Vars[name]; !given && strings.Contains(text, "<"+name+">") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	b.WriteString("TO FILL IN: the request did not give these; put the values in place of the placeholders above:\n")
	for _, name := range names {
		what := tr.in.Template.Vars[name].Description
		if what == "" {
			what = "a value for " + name
		}
		fmt.Fprintf(b, "  <%s>: %s\n", name, what)
	}
	b.WriteByte('\n')
}

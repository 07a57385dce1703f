package planbus

import "encoding/json"

// The messages of planbus.guide.turn, the planner's endpoint for guided
// sessions: an agent that runs its tools itself (an LLM loop) calls it
// once per turn with the user's message and the outputs of the tools it
// ran; the planner keeps the session's active plan from the template
// library, checks the outputs against the current step, and answers with
// the plan's context to put before the model.

// GuideTurn is the body of a request to planbus.guide.turn
// (schemas/guide-turn.schema.json).
type GuideTurn struct {
	// SessionID names the session: its active plan is kept under it.
	SessionID string `json:"sessionId"`
	// TurnID, optional, makes the call safe to repeat: a turn whose id is
	// the session's last gets the same reply again and changes nothing.
	TurnID string `json:"turnId,omitempty"`
	// Message is the user's message (may be empty on a turn that only
	// reports tool results). With no active plan, it is matched against
	// the library's triggers.
	Message string `json:"message"`
	// Domain is the message's domain, such as "bugfix": a plan that lists
	// domains matches only a message with one of them.
	Domain string `json:"domain,omitempty"`
	// ToolResults are the outputs of the tools the agent ran since its
	// last turn, oldest first. The last is checked against the current
	// step.
	ToolResults []GuideToolResult `json:"toolResults,omitempty"`
}

// GuideToolResult is one tool output an agent reports.
type GuideToolResult struct {
	// Skill or Tool names what ran (either; the agent's name for it).
	Skill string `json:"skill,omitempty"`
	Tool  string `json:"tool,omitempty"`
	// Output is what the tool returned: a string, or any JSON (a skill's
	// output object, which gates with paths such as /stdout look into).
	Output json.RawMessage `json:"output"`
	// ExitCode is the command's exit code, when there is one.
	ExitCode *int `json:"exitCode,omitempty"`
}

// Name is the result's skill or tool name.
func (r GuideToolResult) Name() string {
	if r.Skill != "" {
		return r.Skill
	}
	return r.Tool
}

// What a turn did to the session's plan (GuideReply.Transition). Each but
// GuideNone is also published as an event, guide.<transition>.
const (
	// GuideActivated: the message matched a plan, which is now active.
	GuideActivated = "activated"
	// GuideAdvanced: the current step passed its check (or failed it and
	// was skipped) and the next step is current.
	GuideAdvanced = "advanced"
	// GuideCompleted: the last step passed; the plan is done and dropped.
	GuideCompleted = "completed"
	// GuideWarned: the current step failed its check and its onFail is
	// warn: the step stays current and the context carries a warning; the
	// agent retries it and the session goes on.
	GuideWarned = "warned"
	// GuideBlocked: the current step failed its check and holds the plan
	// (onFail block, retries left, or its fallback step is current): the
	// context says that it failed verification.
	GuideBlocked = "blocked"
	// GuideExpired: more turns than the plan's stale_after_turns went by
	// without progress; the plan is dropped.
	GuideExpired = "expired"
	// GuideAborted: a step failed its check and its onFail aborts the
	// plan (or the plan is no longer in the library); the plan is dropped.
	GuideAborted = "aborted"
	// GuideNone: nothing changed (no plan matched, or the active plan got
	// no tool result this turn).
	GuideNone = "none"
)

// Guided plan statuses (GuidePlan.Status).
const (
	GuidePlanActive    = "active"
	GuidePlanCompleted = "completed"
	GuidePlanAborted   = "aborted"
	GuidePlanExpired   = "expired"
)

// Guided step statuses (GuideStep.Status).
const (
	GuideStepCompleted = "completed" // passed its check
	GuideStepFailed    = "failed"    // failed its check: skipped, or the step that aborted the plan
	GuideStepCurrent   = "current"   // the step to do now
	GuideStepPending   = "pending"   // later
)

// GuideReply is the answer to a GuideTurn
// (schemas/guide-reply.schema.json).
type GuideReply struct {
	SessionID string `json:"sessionId"`
	// Transition is what this turn did: one of the Guide* constants.
	Transition string `json:"transition"`
	// Plan is the session's plan after the turn: the active one, or the
	// one this turn ended (completed, aborted or expired). Nil when the
	// session has none.
	Plan *GuidePlan `json:"plan,omitempty"`
	// Check is the verdict on the tool result checked this turn, if any.
	Check *GuideCheck `json:"check,omitempty"`
	// Context is the text to put before the model this turn: the active
	// plan with the current step marked "← YOU ARE HERE", or what ended
	// it. Empty when the session has no plan.
	Context string `json:"context"`
	// Message says what happened in one line, as the event does.
	Message string `json:"message,omitempty"`
	// Ended is set when the turn ended the session's plan (completed,
	// aborted or expired) and its message then started another: the turn's
	// message is matched once the plan is done, as it is without a plan.
	// Transition, Plan and Message are then the new plan's, Check is the
	// old plan's, Ended says how the old one ended, and Context has both.
	Ended *GuideEnded `json:"ended,omitempty"`
}

// GuideEnded is the plan a turn ended before its message started another.
type GuideEnded struct {
	// Transition is GuideCompleted, GuideAborted or GuideExpired.
	Transition string     `json:"transition"`
	Plan       *GuidePlan `json:"plan,omitempty"`
	Message    string     `json:"message"`
}

// GuidePlan is a guided plan's state.
type GuidePlan struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
	// Status is one of the GuidePlan* constants.
	Status string `json:"status"`
	// Step is the current step, 1-based (0 once the plan has ended), of
	// Of steps.
	Step int `json:"step"`
	Of   int `json:"of"`
	// Steps are every step's state, in order.
	Steps []GuideStep `json:"steps"`
	// TurnsSinceProgress counts the turns since the plan started or last
	// moved; the plan expires once it exceeds StaleAfterTurns (0: never).
	TurnsSinceProgress int `json:"turnsSinceProgress"`
	StaleAfterTurns    int `json:"staleAfterTurns"`
}

// GuideStep is one step of a guided plan.
type GuideStep struct {
	Index int    `json:"index"` // 1-based
	ID    string `json:"id"`
	Name  string `json:"name"`
	// Status is one of the GuideStep* constants.
	Status string `json:"status"`
	// Attempts counts the checks the step failed or passed.
	Attempts int `json:"attempts,omitempty"`
}

// GuideCheck is the verdict on the tool result checked in a turn.
type GuideCheck struct {
	// Step is the step checked, 1-based.
	Step int `json:"step"`
	// Tool is the result's skill or tool name, as reported.
	Tool   string `json:"tool,omitempty"`
	Passed bool   `json:"passed"`
	// Reason says what was checked and found.
	Reason string `json:"reason"`
	// Action is what followed: advance, or for a failed check warn
	// (transition warned), block, retry, fallback (blocked), skip or abort.
	Action string `json:"action"`
}

// EventGuidePrefix starts the event types of a guided session:
// guide.<transition> (guide.activated, guide.advanced, ...), published on
// planbus.events.<sessionId>.guide.<transition> with the session id as
// requestId.
const EventGuidePrefix EventType = "guide."

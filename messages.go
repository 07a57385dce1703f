package planbus

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Category is the kind of an error (ErrorInfo.Category), which says
// whether it is retried and how it weighs on a skill's health: timeout and
// network errors move a skill to temporaryFailure; invalid_input and
// permanent errors are never retried. The categories are the constants
// below (common.schema.json#/$defs/errorCategory).
type Category string

// Error categories.
const (
	CategoryTimeout      Category = "timeout"
	CategoryNetwork      Category = "network"
	CategoryTransient    Category = "transient"
	CategoryInvalidInput Category = "invalid_input"
	CategoryPermanent    Category = "permanent"
	CategoryInternal     Category = "internal"
	CategoryCancelled    Category = "cancelled"
	CategoryDependency   Category = "dependency"
)

// DefaultSession is the session of requests and plans that name none.
// Requests in it share its state (statePatch), but no skill health: they
// come from anyone, so no failure of one may disable a skill for the
// others (each request's replans still leave out the skills that failed
// it). Name a session to keep health across requests.
const DefaultSession = "default"

// Retryable reports whether an error of this category is worth retrying.
func Retryable(category Category) bool {
	return category != CategoryInvalidInput && category != CategoryPermanent && category != CategoryCancelled
}

// ErrorInfo is the error object of results and events.
type ErrorInfo struct {
	Code     Code     `json:"code"`
	Message  string   `json:"message"`
	Category Category `json:"category"`
}

func (e *ErrorInfo) Error() string { return string(e.Code) + ": " + e.Message }

// ToolState is where a tool of a running plan is (ToolOutcome.State), or
// how one attempt ended (ToolResult.State: succeeded, failed or timeout).
// The states are the constants below
// (common.schema.json#/$defs/toolState).
type ToolState string

// Tool states.
const (
	ToolPending   ToolState = "pending"
	ToolRunning   ToolState = "running"
	ToolRetrying  ToolState = "retrying"
	ToolSucceeded ToolState = "succeeded"
	ToolFailed    ToolState = "failed"
	ToolTimeout   ToolState = "timeout"
	ToolSkipped   ToolState = "skipped"
	ToolCancelled ToolState = "cancelled"
	// ToolWaitingApproval: the tool is ready but carries an approval
	// step; it is released once a person approves it
	// (planbus.plan.approve) and fails with code REJECTED if they reject
	// it. It holds no concurrency slot while it waits.
	ToolWaitingApproval ToolState = "waiting_approval"
)

// PlanState is where a plan is (ExecutionResult.State): running, or how
// it ended. The states are the constants below
// (common.schema.json#/$defs/planState).
type PlanState string

// Plan states.
const (
	PlanRunning   PlanState = "running"
	PlanSucceeded PlanState = "succeeded"
	PlanFailed    PlanState = "failed"
	PlanTimeout   PlanState = "timeout"
	PlanRejected  PlanState = "rejected"
	// PlanCancelled: stopped on request (planbus.plan.cancel).
	PlanCancelled PlanState = "cancelled"
)

// Reason says why a tool did not run to its end (ToolOutcome.Reason).
type Reason string

// Reasons a tool did not run to its end.
const (
	ReasonDependencyFailed Reason = "dependency_failed"
	ReasonPlanFailed       Reason = "plan_failed"
	ReasonPlanTimeout      Reason = "plan_timeout"
	// ReasonCancelled: the plan was cancelled while the tool was pending
	// (skipped) or running (cancelled).
	ReasonCancelled Reason = "cancelled"
)

// ToolCall is one attempt of one tool, as a worker receives it.
type ToolCall struct {
	PlanID         string          `json:"planId"`
	RequestID      string          `json:"requestId"`
	ToolID         string          `json:"toolId"`
	Skill          string          `json:"skill"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"maxAttempts"`
	Input          json.RawMessage `json:"input"`
	TimeoutMs      int64           `json:"timeoutMs"`
	IdempotencyKey string          `json:"idempotencyKey"`
	ReleasedAt     time.Time       `json:"releasedAt,omitzero"`
	// Token is the attempt's result token: the worker echoes it in the
	// result, and dispatchers apply only results with the right one.
	Token string `json:"token"`
	// CancelDigest is the digest of the plan's cancel token: a worker acts
	// on a cancel only if the token it reveals has this digest.
	CancelDigest string `json:"cancelDigest"`
}

// IdempotencyKey is planId/toolId/attempt: the Nats-Msg-Id of the call and
// of its result, and the key a tool can use to make its effects idempotent.
func IdempotencyKey(planID, toolID string, attempt int) string {
	return planID + "/" + toolID + "/" + strconv.Itoa(attempt)
}

// ToolResult is what a worker reports for one attempt.
type ToolResult struct {
	PlanID     string          `json:"planId"`
	RequestID  string          `json:"requestId"`
	ToolID     string          `json:"toolId"`
	Skill      string          `json:"skill"`
	Attempt    int             `json:"attempt"`
	State      ToolState       `json:"state"` // succeeded, failed or timeout
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *ErrorInfo      `json:"error,omitempty"`
	StatePatch json.RawMessage `json:"statePatch,omitempty"`
	WorkerID   string          `json:"workerId,omitempty"`
	StartedAt  time.Time       `json:"startedAt,omitzero"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
	DurationMs float64         `json:"durationMs,omitempty"`
	// Token is the call's token, echoed. Results published to the bus
	// must carry it; a direct invocation's reply has none.
	Token string `json:"token,omitempty"`
}

// Cancel is the body of a message on planbus.cancel.<planId>: workers
// stop the plan's calls whose cancelDigest is the digest of Token.
type Cancel struct {
	PlanID string `json:"planId"`
	Token  string `json:"cancelToken"`
}

// ToolOutcome is one tool's line in an execution result.
type ToolOutcome struct {
	ToolID     string          `json:"toolId"`
	Skill      string          `json:"skill"`
	State      ToolState       `json:"state"`
	Required   bool            `json:"required"`
	Attempts   int             `json:"attempts"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *ErrorInfo      `json:"error,omitempty"`
	Reason     Reason          `json:"reason,omitempty"`
	WorkerID   string          `json:"workerId,omitempty"`
	StartedAt  time.Time       `json:"startedAt,omitzero"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
	DurationMs float64         `json:"durationMs,omitempty"`
	// ResultSeq is where the tool's last result is in the RESULTS stream.
	ResultSeq uint64 `json:"resultSeq,omitempty"`
	// Reused: the tool did not run in this plan; it took the output of an
	// identical tool that succeeded in an earlier attempt of the same
	// request (Attempts, WorkerID, times and ResultSeq are that run's).
	Reused bool `json:"reused,omitempty"`
}

// ExecutionResult is a plan's outcome: its end state, each tool's outcome,
// the tools and skills that failed and whether a planner may try again
// (CanReplan).
type ExecutionResult struct {
	PlanID       string          `json:"planId"`
	RequestID    string          `json:"requestId"`
	State        PlanState       `json:"state"`
	Success      bool            `json:"success"`
	CanReplan    bool            `json:"canReplan"`
	Error        *ErrorInfo      `json:"error,omitempty"`
	FailedTools  []string        `json:"failedTools,omitempty"`
	FailedSkills []string        `json:"failedSkills,omitempty"`
	Tools        []ToolOutcome   `json:"tools"`
	StartedAt    time.Time       `json:"startedAt,omitzero"`
	FinishedAt   time.Time       `json:"finishedAt,omitzero"`
	DurationMs   float64         `json:"durationMs,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	// OutputsOmitted: the result with every output would not fit in a
	// message; the outputs are in the RESULTS stream at each resultSeq.
	OutputsOmitted bool `json:"outputsOmitted,omitempty"`
	// ToolsOmitted: even without outputs the result would not fit in a
	// message (a plan of tens of thousands of tools): Tools lists only the
	// tools that did not succeed, or none if those do not fit either.
	// Every tool's state is in the plan's state (KV planbus-plans,
	// <planId>.state) and its result in the RESULTS stream.
	ToolsOmitted bool `json:"toolsOmitted,omitempty"`
}

// EventType is the kind of an Event (Event.Type), and the last tokens
// of its subject, planbus.events.<requestId>.<type>. The types are the
// Event* constants (event.schema.json); a guided session's are
// EventGuidePrefix followed by a GuideTransition.
type EventType string

// Event types of a plan's execution, published by the dispatchers.
const (
	EventPlanStarted   EventType = "plan.started"
	EventPlanRejected  EventType = "plan.rejected"
	EventPlanSucceeded EventType = "plan.succeeded"
	EventPlanFailed    EventType = "plan.failed"
	EventPlanTimeout   EventType = "plan.timeout"
	EventPlanCancelled EventType = "plan.cancelled"
	EventToolReleased  EventType = "tool.released"
	EventToolStarted   EventType = "tool.started"
	EventToolSucceeded EventType = "tool.succeeded"
	EventToolFailed    EventType = "tool.failed"
	EventToolRetrying  EventType = "tool.retrying"
	EventToolTimeout   EventType = "tool.timeout"
	EventToolSkipped   EventType = "tool.skipped"
	EventToolCancelled EventType = "tool.cancelled"
	EventSkillHealth   EventType = "skill.health"
	// EventToolWaiting: the tool is ready and waits for a person's
	// approval; Message is the approval's prompt.
	EventToolWaiting EventType = "tool.waiting"
	// EventToolApproved: the tool was approved and will be released;
	// Message is the reason given, if any.
	EventToolApproved EventType = "tool.approved"
	// EventToolRejected: the tool was rejected and failed with code
	// REJECTED, without running.
	EventToolRejected EventType = "tool.rejected"
	// EventToolReused: the tool took the output of an identical tool of an
	// earlier attempt instead of running; Message names it.
	EventToolReused EventType = "tool.reused"
)

// Event types of a request's loop, published by the planner.
const (
	EventRequestAccepted EventType = "request.accepted"
	// EventRequestDuplicate: a request was sent again under its id, and
	// accepted without running anything new (Accepted.Duplicate); Message
	// says when the first was accepted.
	EventRequestDuplicate  EventType = "request.duplicate"
	EventRequestGenerating EventType = "request.generating"
	EventRequestGenerated  EventType = "request.generated"
	EventRequestReplanning EventType = "request.replanning"
	EventRequestSucceeded  EventType = "request.succeeded"
	EventRequestFailed     EventType = "request.failed"
	EventRequestFallback   EventType = "request.fallback"
	EventRequestCancelled  EventType = "request.cancelled"
)

// Event is a progress report for people and tools watching a request.
type Event struct {
	Type       EventType  `json:"type"`
	Time       time.Time  `json:"time"`
	RequestID  string     `json:"requestId"`
	PlanID     string     `json:"planId,omitempty"`
	ToolID     string     `json:"toolId,omitempty"`
	Skill      string     `json:"skill,omitempty"`
	Attempt    int        `json:"attempt,omitempty"`
	Message    string     `json:"message,omitempty"`
	Error      *ErrorInfo `json:"error,omitempty"`
	DelayMs    int64      `json:"delayMs,omitempty"`
	WorkerID   string     `json:"workerId,omitempty"`
	DurationMs float64    `json:"durationMs,omitempty"`
	SessionID  string     `json:"sessionId,omitempty"`
	From       string     `json:"from,omitempty"` // skill.health: the state before
	To         string     `json:"to,omitempty"`   // skill.health: the state after
	Attempts   int        `json:"attempts,omitempty"`
	Tools      int        `json:"tools,omitempty"`    // plan.started: the plan's size
	Goal       string     `json:"goal,omitempty"`     // agent.*: the goal concerned
	Template   string     `json:"template,omitempty"` // guide.*: the guided plan's template
	Step       int        `json:"step,omitempty"`     // guide.*: the step, 1-based
}

// Outcome is a request's final outcome (schemas/outcome.schema.json).
type Outcome struct {
	RequestID      string            `json:"requestId"`
	SessionID      string            `json:"sessionId,omitempty"`
	Status         RequestStatus     `json:"status"` // succeeded, failed, fallback or cancelled
	Success        bool              `json:"success"`
	Fallback       bool              `json:"fallback"`
	Narrative      string            `json:"narrative,omitempty"`
	Tools          []json.RawMessage `json:"tools,omitzero"` // [] in a fallback
	Attempts       int               `json:"attempts"`
	PlanID         string            `json:"planId,omitempty"`
	DisabledSkills []string          `json:"disabledSkills,omitempty"`
	Error          *ErrorInfo        `json:"error,omitempty"`
	History        []Attempt         `json:"history,omitempty"`
	Execution      *ExecutionResult  `json:"execution,omitempty"`
	FinishedAt     time.Time         `json:"finishedAt,omitzero"`
}

// RequestStatus is where a request is: the Status* constants once it
// has ended (Outcome.Status), the Request* constants before
// (RequestSummary.Status).
type RequestStatus string

// Outcome statuses.
const (
	StatusSucceeded RequestStatus = "succeeded"
	StatusFailed    RequestStatus = "failed"
	StatusFallback  RequestStatus = "fallback"
	// StatusCancelled: the request was cancelled (planbus.plan.cancel)
	// before it ended; no replan, no fallback.
	StatusCancelled RequestStatus = "cancelled"
)

// Attempt is one generation and its execution.
type Attempt struct {
	Attempt        int        `json:"attempt"`
	PlanID         string     `json:"planId,omitempty"`
	State          PlanState  `json:"state,omitempty"` // the plan's state, or AttemptGenerationFailed
	Error          *ErrorInfo `json:"error,omitempty"`
	FailedSkills   []string   `json:"failedSkills,omitempty"`
	DisabledSkills []string   `json:"disabledSkills,omitempty"`
}

// AttemptGenerationFailed is the State of an Attempt whose generation
// failed: no plan ran, so it has no plan state.
const AttemptGenerationFailed PlanState = "generation_failed"

// Accepted is the reply to an accepted request.
type Accepted struct {
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
	Status    string `json:"status"`
	// Duplicate is true when the request had been accepted before under
	// its id (a client sending it again after a lost answer): nothing new
	// runs, and the request's outcome is the first one's. Another request
	// under a used id is rejected at /requestId.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Rejected is the reply to a request that is not valid.
type Rejected struct {
	Status string     `json:"status"`
	Error  ReplyError `json:"error"`
}

// ReplyError names the problem.
type ReplyError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Output decodes the output of the tool toolID into v, as json.Unmarshal
// does. It is an error, naming the tool, when the result does not list
// the tool, when the tool did not succeed (its state and error), or when
// the result left outputs out to fit in a message (OutputsOmitted: the
// output is in the RESULTS stream at the tool's ResultSeq).
func (r *ExecutionResult) Output(toolID string, v any) error {
	for i := range r.Tools {
		t := &r.Tools[i]
		if t.ToolID != toolID {
			continue
		}
		if t.State != ToolSucceeded {
			if t.Error != nil {
				return fmt.Errorf("planbus: tool %s of plan %s %s: %s: %s", toolID, r.PlanID, t.State, t.Error.Code, t.Error.Message)
			}
			return fmt.Errorf("planbus: tool %s of plan %s %s, with no output", toolID, r.PlanID, t.State)
		}
		if len(t.Output) == 0 && r.OutputsOmitted {
			return fmt.Errorf("planbus: the result of plan %s leaves outputs out (too large for one message): tool %s's is in the RESULTS stream at sequence %d", r.PlanID, toolID, t.ResultSeq)
		}
		if len(t.Output) == 0 {
			return fmt.Errorf("planbus: tool %s of plan %s succeeded with no output", toolID, r.PlanID)
		}
		if err := json.Unmarshal(t.Output, v); err != nil {
			return fmt.Errorf("planbus: tool %s's output: %w", toolID, err)
		}
		return nil
	}
	if r.ToolsOmitted {
		return fmt.Errorf("planbus: the result of plan %s lists only its failed tools (too large for one message), and %s is not one", r.PlanID, toolID)
	}
	return fmt.Errorf("planbus: plan %s has no tool %s", r.PlanID, toolID)
}

// Output decodes the output of the tool toolID of the request's last plan
// into v (ExecutionResult.Output). A request that ran no plan (refused, or
// cancelled before one started) is an error saying so.
func (o *Outcome) Output(toolID string, v any) error {
	if o.Execution == nil {
		if o.Error != nil {
			return fmt.Errorf("planbus: request %s ran no plan (%s): %s: %s", o.RequestID, o.Status, o.Error.Code, o.Error.Message)
		}
		return fmt.Errorf("planbus: request %s ran no plan (%s)", o.RequestID, o.Status)
	}
	return o.Execution.Output(toolID, v)
}

package planbus

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Error categories. Timeout and network errors move a skill to
// temporaryFailure; invalid_input and permanent errors are never retried.
const (
	CategoryTimeout      = "timeout"
	CategoryNetwork      = "network"
	CategoryTransient    = "transient"
	CategoryInvalidInput = "invalid_input"
	CategoryPermanent    = "permanent"
	CategoryInternal     = "internal"
	CategoryCancelled    = "cancelled"
	CategoryDependency   = "dependency"
)

// DefaultSession is the session of requests and plans that name none.
// Requests in it share its state (statePatch), but no skill health: they
// come from anyone, so no failure of one may disable a skill for the
// others (each request's replans still leave out the skills that failed
// it). Name a session to keep health across requests.
const DefaultSession = "default"

// Error codes the system itself produces. Skills may use codes of their own.
const (
	CodeToolTimeout   = "TOOL_TIMEOUT"
	CodeToolFailed    = "TOOL_FAILED"
	CodePlanTimeout   = "PLAN_TIMEOUT"
	CodeInvalidPlan   = "INVALID_PLAN"
	CodeInvalidInput  = "INVALID_INPUT"
	CodeUnknownSkill  = "UNKNOWN_SKILL"
	CodeWorkerCrash   = "WORKER_CRASH"
	CodeToolPanic     = "TOOL_PANIC"
	CodeCancelled     = "CANCELLED"
	CodeRequiredTools = "REQUIRED_TOOL_FAILED"
	// CodeVerifyFailed: the tool succeeded but its verification gate
	// refused the output; the attempt counts as failed (category
	// transient, so the tool's retry policy applies).
	CodeVerifyFailed = "VERIFY_FAILED"
	// CodeRejected: a person rejected a tool that waited for approval
	// (planbus.plan.approve with approve false); the tool failed without
	// running (category permanent), and a plan it fails is not replanned.
	CodeRejected = "REJECTED"
	// CodeInvalidCall: the worker could not decode the tool call (its
	// input holds text a strict JSON decoder refuses, such as a lone
	// surrogate escape); the attempt failed without running (category
	// invalid_input, so it is not retried).
	CodeInvalidCall = "INVALID_CALL"
	// CodeInvalidResult: the worker's result could not be decoded (its
	// output holds text a strict JSON decoder refuses); the attempt
	// failed (category internal: the skill's bug).
	CodeInvalidResult = "INVALID_RESULT"
	// CodeOutputInvalid: the skill's output broke the output schema of its
	// manifest; the attempt failed (category permanent: the skill ran, and
	// running it again would most likely return the same).
	CodeOutputInvalid = "OUTPUT_INVALID"
)

// Retryable reports whether an error of this category is worth retrying.
func Retryable(category string) bool {
	return category != CategoryInvalidInput && category != CategoryPermanent && category != CategoryCancelled
}

// ErrorInfo is the error object of results and events.
type ErrorInfo struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Category string `json:"category"`
}

func (e *ErrorInfo) Error() string { return e.Code + ": " + e.Message }

// Tool states.
const (
	ToolPending   = "pending"
	ToolRunning   = "running"
	ToolRetrying  = "retrying"
	ToolSucceeded = "succeeded"
	ToolFailed    = "failed"
	ToolTimeout   = "timeout"
	ToolSkipped   = "skipped"
	ToolCancelled = "cancelled"
	// ToolWaitingApproval: the tool is ready but carries an approval
	// step; it is released once a person approves it
	// (planbus.plan.approve) and fails with code REJECTED if they reject
	// it. It holds no concurrency slot while it waits.
	ToolWaitingApproval = "waiting_approval"
)

// Plan states.
const (
	PlanRunning   = "running"
	PlanSucceeded = "succeeded"
	PlanFailed    = "failed"
	PlanTimeout   = "timeout"
	PlanRejected  = "rejected"
	// PlanCancelled: stopped on request (planbus.plan.cancel).
	PlanCancelled = "cancelled"
)

// Reasons a tool did not run to its end.
const (
	ReasonDependencyFailed = "dependency_failed"
	ReasonPlanFailed       = "plan_failed"
	ReasonPlanTimeout      = "plan_timeout"
	// ReasonCancelled: the plan was cancelled while the tool was pending
	// (skipped) or running (cancelled).
	ReasonCancelled = "cancelled"
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
	State      string          `json:"state"` // succeeded, failed or timeout
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
	State      string          `json:"state"`
	Required   bool            `json:"required"`
	Attempts   int             `json:"attempts"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *ErrorInfo      `json:"error,omitempty"`
	Reason     string          `json:"reason,omitempty"`
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
	State        string          `json:"state"`
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

// Event types, the last tokens of planbus.events.<requestId>.<type>.
const (
	EventPlanStarted   = "plan.started"
	EventPlanRejected  = "plan.rejected"
	EventPlanSucceeded = "plan.succeeded"
	EventPlanFailed    = "plan.failed"
	EventPlanTimeout   = "plan.timeout"
	EventPlanCancelled = "plan.cancelled"
	EventToolReleased  = "tool.released"
	EventToolStarted   = "tool.started"
	EventToolSucceeded = "tool.succeeded"
	EventToolFailed    = "tool.failed"
	EventToolRetrying  = "tool.retrying"
	EventToolTimeout   = "tool.timeout"
	EventToolSkipped   = "tool.skipped"
	EventToolCancelled = "tool.cancelled"
	EventSkillHealth   = "skill.health"
	// EventToolWaiting: the tool is ready and waits for a person's
	// approval; Message is the approval's prompt.
	EventToolWaiting = "tool.waiting"
	// EventToolApproved: the tool was approved and will be released;
	// Message is the reason given, if any.
	EventToolApproved = "tool.approved"
	// EventToolRejected: the tool was rejected and failed with code
	// REJECTED, without running.
	EventToolRejected = "tool.rejected"
	// EventToolReused: the tool took the output of an identical tool of an
	// earlier attempt instead of running; Message names it.
	EventToolReused = "tool.reused"
)

// Event types of a request's loop, published by the planner.
const (
	EventRequestAccepted = "request.accepted"
	// EventRequestDuplicate: a request was sent again under its id, and
	// accepted without running anything new (Accepted.Duplicate); Message
	// says when the first was accepted.
	EventRequestDuplicate  = "request.duplicate"
	EventRequestGenerating = "request.generating"
	EventRequestGenerated  = "request.generated"
	EventRequestReplanning = "request.replanning"
	EventRequestSucceeded  = "request.succeeded"
	EventRequestFailed     = "request.failed"
	EventRequestFallback   = "request.fallback"
	EventRequestCancelled  = "request.cancelled"
)

// Event is a progress report for people and tools watching a request.
type Event struct {
	Type       string     `json:"type"`
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
	Status         string            `json:"status"` // succeeded, failed, fallback or cancelled
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

// Outcome statuses.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusFallback  = "fallback"
	// StatusCancelled: the request was cancelled (planbus.plan.cancel)
	// before it ended; no replan, no fallback.
	StatusCancelled = "cancelled"
)

// Attempt is one generation and its execution.
type Attempt struct {
	Attempt        int        `json:"attempt"`
	PlanID         string     `json:"planId,omitempty"`
	State          string     `json:"state,omitempty"` // the plan's state, or "generation_failed"
	Error          *ErrorInfo `json:"error,omitempty"`
	FailedSkills   []string   `json:"failedSkills,omitempty"`
	DisabledSkills []string   `json:"disabledSkills,omitempty"`
}

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
	Code    string `json:"code"`
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

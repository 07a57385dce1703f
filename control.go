package planbus

import (
	"encoding/json"
	"time"
)

// The messages of the planner's endpoints besides planbus.plan.request:
// planbus.plan.cancel stops a request, planbus.plan.list lists recent
// ones, planbus.plan.approve approves or rejects a tool waiting for a
// person. Each request that is not valid gets a Rejected reply naming the
// field, with one of the reply codes (CodeInvalidRequest and the others
// in codes.go).

// CancelRequest is the body of a request to planbus.plan.cancel
// (schemas/cancel-request.schema.json): exactly one of RequestID and
// PlanID, and optionally why. A plan id stands for the request the plan
// belongs to; a plan submitted without a request is cancelled alone. A
// request id with no request is looked up as a plan id, since a plan
// published directly has its own id as request id.
type CancelRequest struct {
	RequestID string `json:"requestId,omitempty"`
	PlanID    string `json:"planId,omitempty"`
	// Reason is said in the outcome and the events; at most 1,024
	// characters.
	Reason string `json:"reason,omitempty"`
}

// CancelReply statuses.
const (
	// CancelCancelling: the cancel is recorded and the dispatchers were
	// told to stop the running plan. The plan ends in state cancelled and
	// the request's outcome follows with status cancelled, unless the plan
	// ended on its own first (a plan that succeeded stays succeeded).
	CancelCancelling = "cancelling"
	// CancelCancelled: no plan was running (the request was queued or
	// generating one): the request ended cancelled at once and its outcome
	// is published.
	CancelCancelled = "cancelled"
	// CancelEnded: the request or plan had already ended; nothing changed.
	CancelEnded = "ended"
)

// CancelReply is the answer to a CancelRequest.
type CancelReply struct {
	RequestID string `json:"requestId,omitempty"`
	PlanID    string `json:"planId,omitempty"`
	Status    string `json:"status"` // cancelling, cancelled or ended
	// Ended is, for status ended, how the request or plan ended: its
	// outcome's status or the plan's state.
	Ended   string `json:"ended,omitempty"`
	Message string `json:"message"`
}

// Request statuses in a RequestSummary, besides the outcome statuses
// (StatusSucceeded, StatusFailed, StatusFallback, StatusCancelled) of
// requests that ended.
const (
	// RequestQueued: accepted, not yet taken up by a planner.
	RequestQueued RequestStatus = "queued"
	// RequestGenerating: a plan is being generated.
	RequestGenerating RequestStatus = "generating"
	// RequestExecuting: a plan runs.
	RequestExecuting RequestStatus = "executing"
	// RequestCancelling: a plan runs and a cancel has been asked for.
	RequestCancelling RequestStatus = "cancelling"
)

// ListRequest is the body of a request to planbus.plan.list
// (schemas/list-request.schema.json); every field is optional.
type ListRequest struct {
	// Status keeps the requests in this status only (a Request* status or
	// an outcome status).
	Status RequestStatus `json:"status,omitempty"`
	// SessionID keeps the requests of this session only.
	SessionID string `json:"sessionId,omitempty"`
	// Limit is the most requests listed: default 50, at most 1,000.
	Limit int `json:"limit,omitempty"`
	// Since and Until keep the requests accepted in that time range.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Kind keeps the requests of this kind (plan, htn, goap, ...).
	Kind string `json:"kind,omitempty"`
	// Text keeps the requests whose id, description, goal or input text contains it,
	// ignoring case; at most 256 characters.
	Text string `json:"text,omitempty"`
	// Before pages on: only requests accepted before this cursor, a
	// ListReply's Next.
	Before uint64 `json:"before,omitempty"`
	// Waiting keeps the requests whose running plan has a tool waiting
	// for approval.
	Waiting bool `json:"waiting,omitempty"`
}

// ListReply lists requests, the most recently accepted first.
type ListReply struct {
	Requests []RequestSummary `json:"requests"`
	// More: older requests were not looked at, because Limit were found
	// or the planner looks at most at 10,000 requests a call; Next, given
	// as the next call's Before, goes on from there.
	More bool   `json:"more,omitempty"`
	Next uint64 `json:"next,omitempty"`
}

// RequestSummary is one line of a ListReply.
type RequestSummary struct {
	RequestID string        `json:"requestId"`
	SessionID string        `json:"sessionId"`
	Kind      string        `json:"kind"`
	Status    RequestStatus `json:"status"`
	// Attempts are the plan generations so far.
	Attempts int `json:"attempts"`
	// PlanID is the plan of the latest attempt, if one was generated.
	PlanID     string    `json:"planId,omitempty"`
	AcceptedAt time.Time `json:"acceptedAt"`
	UpdatedAt  time.Time `json:"updatedAt,omitzero"`
	// Waiting are the tools of the running plan waiting for approval.
	Waiting []string `json:"waiting,omitempty"`
}

// ApproveRequest is the body of a request to planbus.plan.approve
// (schemas/approve-request.schema.json): the tool ToolID of a request's
// running plan (RequestID) or of a plan (PlanID), exactly one of the
// two, is approved (Approve true: it is released) or rejected (it fails
// with code REJECTED). Reason is said in the events, and for a
// rejection in the tool's error; at most 1,024 characters.
type ApproveRequest struct {
	RequestID string `json:"requestId,omitempty"`
	PlanID    string `json:"planId,omitempty"`
	ToolID    string `json:"toolId"`
	Approve   bool   `json:"approve"`
	Reason    string `json:"reason,omitempty"`
}

// ApproveReply statuses.
const (
	// ApproveApproved: the approval is recorded; a dispatcher releases the
	// tool (it survives dispatcher restarts).
	ApproveApproved = "approved"
	// ApproveRejected: the rejection is recorded; a dispatcher fails the
	// tool with code REJECTED, and the tool's failure semantics apply.
	ApproveRejected = "rejected"
)

// ApproveReply is the answer to an ApproveRequest that was accepted. A
// tool that is not waiting gets a Rejected reply with code
// CodeNotWaiting instead; an unknown id or tool, CodeNotFound.
type ApproveReply struct {
	RequestID string `json:"requestId,omitempty"`
	PlanID    string `json:"planId"`
	ToolID    string `json:"toolId"`
	Status    string `json:"status"` // approved or rejected
	Message   string `json:"message"`
}

// Skill health states (SkillHealth.State), kept per session: a
// permanentFailure skill is disabled for planning in its session until
// the session is reset (planbus.session.reset) or a new one is used.
const (
	HealthHealthy          = "healthy"
	HealthDegraded         = "degraded"
	HealthTemporaryFailure = "temporaryFailure"
	HealthPermanentFailure = "permanentFailure"
)

// SkillHealth is a skill's health in a session.
type SkillHealth struct {
	Skill string `json:"skill"`
	// State is one of the Health constants.
	State string `json:"state"`
	// Failures counts consecutive failures in the current state.
	Failures int `json:"failures"`
	// LastError is the error of the last failure.
	LastError string `json:"lastError,omitempty"`
}

// SkillStatus is an advertised skill with its health in a session.
type SkillStatus struct {
	Manifest SkillManifest `json:"manifest"`
	Health   SkillHealth   `json:"health"`
}

// SkillsReply is the answer of planbus.skills (body {"sessionId": "..."},
// or nothing for the default session): every skill workers advertise,
// by name, with its health in the session.
type SkillsReply struct {
	SessionID string        `json:"sessionId"`
	Skills    []SkillStatus `json:"skills"`
}

// SessionResetRequest is the body of a request to planbus.session.reset.
type SessionResetRequest struct {
	SessionID string `json:"sessionId"`
	// State clears the session's state document too.
	State bool `json:"state,omitempty"`
}

// SessionReset is the answer of planbus.session.reset: the skills that
// were not healthy in the session and are again, and whether the session's
// state was cleared.
type SessionReset struct {
	SessionID    string   `json:"sessionId"`
	Healed       []string `json:"healed"`
	StateCleared bool     `json:"stateCleared"`
}

// SettledQuery asks the dispatchers whether an attempt of a tool already
// ended (planbus.dispatcher.settled): a worker asks it for a call
// delivered again, which may have run before a crash (its result stored,
// its acknowledgement lost). Token is the call's, which proves the asker
// holds the call.
type SettledQuery struct {
	PlanID  string `json:"planId"`
	ToolID  string `json:"toolId"`
	Attempt int    `json:"attempt"`
	Token   string `json:"token"`
}

// SettledReply answers a SettledQuery: Settled is true when the attempt
// has a result stored, or no longer runs (the plan moved on or ended), so
// running it again would repeat its work for nothing; Why says which.
type SettledReply struct {
	Settled bool   `json:"settled"`
	Why     string `json:"why"`
}

// PlannerQuestion is what an external planner receives on its subject for
// each attempt of a request of kind external (docs/protocol.md, "External
// planners"). It answers with a Plan, or with {"error": ErrorInfo}.
type PlannerQuestion struct {
	RequestID   string `json:"requestId"`
	SessionID   string `json:"sessionId"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"maxAttempts"`
	// Input is the request's input, as given.
	Input json.RawMessage `json:"input,omitempty"`
	// DisabledSkills must not be used: those of earlier failed plans and
	// those permanently failed in the session.
	DisabledSkills []string `json:"disabledSkills"`
	// ParentPlanID and LastExecution are the previous attempt's plan and
	// its execution result, from attempt 2.
	ParentPlanID  string           `json:"parentPlanId,omitempty"`
	LastExecution *ExecutionResult `json:"lastExecution,omitempty"`
	// Skills are every registered manifest, sorted by name, with its
	// health in the session.
	Skills []PlannerSkill `json:"skills"`
	// Session is the session's state document.
	Session map[string]any `json:"session"`
}

// PlannerSkill is a skill as an external planner sees it: its manifest
// and its health in the request's session (a planbus health state:
// healthy, degraded, temporaryFailure or permanentFailure).
type PlannerSkill struct {
	SkillManifest
	Health string `json:"health"`
}

// PlannerFailure is an external planner's answer when it has no plan.
type PlannerFailure struct {
	Error ErrorInfo `json:"error"`
}

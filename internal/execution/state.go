package execution

import (
	"encoding/json"

	"github.com/planbus/planbus"
)

// State is a plan's execution state, as stored in KV. Times are Unix
// milliseconds.
type State struct {
	PlanID         string            `json:"planId"`
	RequestID      string            `json:"requestId"`
	SessionID      string            `json:"sessionId,omitempty"`
	Status         planbus.PlanState `json:"status"`
	MaxConcurrency int               `json:"maxConcurrency"`
	StartedAt      int64             `json:"startedAt"`
	Deadline       int64             `json:"deadline"`
	// WaitingSince is when the plan's clock stopped: a tool began to wait
	// for approval and none waited before. While one waits, the plan's
	// timeout does not run; when the last is decided the deadline moves on
	// by the time waited. 0 while none waits.
	WaitingSince int64              `json:"waitingSince,omitempty"`
	FinishedAt   int64              `json:"finishedAt,omitempty"`
	Error        *planbus.ErrorInfo `json:"error,omitempty"`
	Tools        []ToolState        `json:"tools"`
	// GateSteps is the part of the plan's verification budget its gates
	// have used (see Engine: GateBudget).
	GateSteps int64 `json:"gateSteps,omitempty"`
	// Trace is the W3C trace context of the plan's span (traceparent,
	// tracestate) and, under "parent", the span id of that span's parent,
	// when the plan is traced: any dispatcher parents the plan's tool spans
	// with it. The engine only keeps it.
	Trace map[string]string `json:"trace,omitempty"`

	// chunks is where the state is stored, when it is stored in chunks.
	chunks chunks
}

// ToolState is one tool's part of State, in plan order.
type ToolState struct {
	ID         string             `json:"id"`
	State      planbus.ToolState  `json:"state"`
	Attempt    int                `json:"attempt,omitempty"` // the attempt running, or the last one
	ReleasedAt int64              `json:"releasedAt,omitempty"`
	RetryAt    int64              `json:"retryAt,omitempty"`
	FinishedAt int64              `json:"finishedAt,omitempty"`
	Output     json.RawMessage    `json:"output,omitempty"`
	Error      *planbus.ErrorInfo `json:"error,omitempty"`
	Reason     planbus.Reason     `json:"reason,omitempty"`
	WorkerID   string             `json:"workerId,omitempty"`
	StartedAt  int64              `json:"startedAt,omitempty"` // when the worker started the last attempt
	DurationMs float64            `json:"durationMs,omitempty"`
	// ResultSeq is the RESULTS stream sequence of the result that set
	// State, when one did.
	ResultSeq uint64 `json:"resultSeq,omitempty"`
	// Approved: a person approved the tool's approval step (it is
	// pending until a slot is free, then released).
	Approved bool `json:"approved,omitempty"`
	// Reused: the tool took an earlier plan's result (ResultSeq) instead
	// of running.
	Reused bool `json:"reused,omitempty"`
	// Refused: the tool's gate refused the succeeded result at
	// ResultSeq, whose verdict Error holds.
	Refused bool `json:"refused,omitempty"`
}

func terminal(state planbus.ToolState) bool {
	switch state {
	case planbus.ToolSucceeded, planbus.ToolFailed, planbus.ToolTimeout, planbus.ToolSkipped, planbus.ToolCancelled:
		return true
	}
	return false
}

// inFlight: the tool holds one of the plan's concurrency slots.
func inFlight(state planbus.ToolState) bool {
	return state == planbus.ToolRunning || state == planbus.ToolRetrying
}

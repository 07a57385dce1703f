package execution

import (
	"fmt"
	"time"
)

// TimerMessage is a Timer as it travels on planbus.timers.<planId>
// (stream PLANBUS_TIMERS), which the dispatchers consume: they publish
// retries and plan timeouts themselves; planners publish the cancels of
// cancelled requests' plans (TimerCancel) and people's decisions on tools
// waiting for approval (TimerApprove, TimerReject), so these wait in the
// stream for a dispatcher like any timer.
type TimerMessage struct {
	PlanID  string `json:"planId"`
	Kind    string `json:"kind"`
	Tool    int    `json:"tool,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	FireAt  int64  `json:"fireAt"` // Unix ms
	Reason  string `json:"reason,omitempty"`
}

// Message returns t as the message of plan planID.
func (t Timer) Message(planID string) TimerMessage {
	return TimerMessage{PlanID: planID, Kind: t.Kind, Tool: t.Index, Attempt: t.Attempt, FireAt: t.FireAt.UnixMilli(), Reason: t.Reason}
}

// Timer returns the timer m carries.
func (m TimerMessage) Timer() Timer {
	return Timer{Kind: m.Kind, Index: m.Tool, Attempt: m.Attempt, FireAt: time.UnixMilli(m.FireAt), Reason: m.Reason}
}

// MsgID is the message's Nats-Msg-Id: one per plan and deadline for its
// timeout (the deadline moves when an approval has stood the plan's
// clock), one per plan for its cancel, one per attempt for retries, so
// that publishing a timer again (after a crash, or a cancel asked for
// twice) is de-duplicated.
func (m TimerMessage) MsgID() string {
	switch m.Kind {
	case TimerRetry:
		return fmt.Sprintf("%s/retry/%d/%d", m.PlanID, m.Tool, m.Attempt)
	case TimerCancel:
		return m.PlanID + "/cancel"
	case TimerApprove, TimerReject:
		// One id for both: the first decision on a tool wins.
		return fmt.Sprintf("%s/approval/%d", m.PlanID, m.Tool)
	}
	return fmt.Sprintf("%s/timeout/%d", m.PlanID, m.FireAt)
}

// CancelMessage is the command that cancels plan planID, as of now.
func CancelMessage(planID, reason string, now time.Time) TimerMessage {
	return Timer{Kind: TimerCancel, FireAt: now, Reason: reason}.Message(planID)
}

// ApprovalMessage is the command that approves (approve) or rejects
// tool index of plan planID, as of now, with a reason.
func ApprovalMessage(planID string, index int, approve bool, reason string, now time.Time) TimerMessage {
	kind := TimerReject
	if approve {
		kind = TimerApprove
	}
	return Timer{Kind: kind, Index: index, FireAt: now, Reason: reason}.Message(planID)
}

package planbus

import "time"

// The messages of a session's GOAP agent. An agent is started on
// planbus.agent.start (or by a plan request of kind goap with
// "goap": {"agent": true}) and pursues the goals of its domain, one plan
// at a time, in its session's state, until it is stopped on
// planbus.agent.stop or no goal is left to pursue. planbus.agent.status
// reports it. Its events are published on planbus.events.<agentId>.agent.*,
// beside the plan.* and tool.* events of the plans it runs.

// Agent statuses.
const (
	// AgentRunning: the agent pursues a goal, or waits for a cooldown or a
	// change of the world.
	AgentRunning = "running"
	// AgentStopped: stopped on planbus.agent.stop.
	AgentStopped = "stopped"
	// AgentIdle: ended because no goal was valid, unsatisfied, useful and
	// off cooldown, and none was cooling down.
	AgentIdle = "idle"
	// AgentFailed: ended because its domain could not be used any more
	// (error INVALID_DOMAIN), or because it gave up: several decisions in
	// a row found no plan for any goal (error AGENT_GAVE_UP).
	AgentFailed = "failed"
)

// Event types of an agent, published by the planner.
const (
	// EventAgentStarted: the agent was started.
	EventAgentStarted EventType = "agent.started"
	// EventAgentGoalSelected: the arbiter chose a goal to pursue (Goal);
	// the message says its utility and why.
	EventAgentGoalSelected EventType = "agent.goal.selected"
	// EventAgentGoalSucceeded: the goal's conditions hold in the session
	// state.
	EventAgentGoalSucceeded EventType = "agent.goal.succeeded"
	// EventAgentGoalFailed: no plan reaches the goal, or its plans kept
	// failing: it cools down.
	EventAgentGoalFailed EventType = "agent.goal.failed"
	// EventAgentPreempted: a goal beat the running plan's by the
	// preemption margin; the running plan was cancelled. Goal is the goal
	// preempted.
	EventAgentPreempted EventType = "agent.preempted"
	// EventAgentReplanned: the goal got a new plan, after a failed step or
	// a change of the world that broke the plan.
	EventAgentReplanned EventType = "agent.replanned"
	// EventAgentIdle: no goal to pursue now: the agent waits for a
	// cooldown, or ends.
	EventAgentIdle EventType = "agent.idle"
	// EventAgentStopped: the agent was stopped.
	EventAgentStopped EventType = "agent.stopped"
	// EventAgentGaveUp: several decisions in a row found no plan for any
	// goal, backing off after each: the agent ends, status failed.
	EventAgentGaveUp EventType = "agent.gave_up"
)

// AgentStopRequest is the body of a request to planbus.agent.stop
// (schemas/agent-stop-request.schema.json).
type AgentStopRequest struct {
	SessionID string `json:"sessionId"`
	// Reason is said in the events and the outcome; at most 1,024
	// characters.
	Reason string `json:"reason,omitempty"`
}

// AgentStopReply statuses: the agent was stopped, or had already ended.
const (
	AgentStopStopped = "stopped"
	AgentStopEnded   = "ended"
)

// AgentStopReply is the answer to an AgentStopRequest.
type AgentStopReply struct {
	SessionID string `json:"sessionId"`
	AgentID   string `json:"agentId"`
	Status    string `json:"status"` // stopped or ended
	// Ended is, for status ended, the agent's status (idle, stopped,
	// failed).
	Ended string `json:"ended,omitempty"`
	// PlanID is the plan that was running and is being cancelled.
	PlanID  string `json:"planId,omitempty"`
	Message string `json:"message"`
}

// AgentStatusRequest is the body of a request to planbus.agent.status
// (schemas/agent-status-request.schema.json).
type AgentStatusRequest struct {
	SessionID string `json:"sessionId"`
}

// AgentStatus is a session's agent as planbus.agent.status reports it
// (schemas/agent-status.schema.json): what it pursues, its goal report
// in the session's state now, and what it did.
type AgentStatus struct {
	AgentID   string `json:"agentId"`
	SessionID string `json:"sessionId"`
	Domain    string `json:"domain"`
	Status    string `json:"status"`
	// Goal is the current goal; Running says a plan for it runs.
	Goal    string `json:"goal,omitempty"`
	Running bool   `json:"running"`
	// Plan is the current plan's actions and Next the step in progress.
	Plan []string `json:"plan,omitempty"`
	Next int      `json:"next"`
	// PlanID is the plan of the step in progress (one tool).
	PlanID string `json:"planId,omitempty"`
	// WakeAt is when the agent looks again, waiting for a cooldown.
	WakeAt time.Time `json:"wakeAt,omitzero"`
	// Goals are every goal of the domain in its order, evaluated in the
	// session's state now.
	Goals []AgentGoal `json:"goals"`
	// Report is Goals as text, one line per goal: "  chop: 60.0 ←
	// CURRENT", "  rest: 0 [ZERO]", with [INVALID], [SATISFIED] and
	// [COOLDOWN 4.2s] marks.
	Report string `json:"report"`
	// Detail is the agent's last decision, in words.
	Detail string `json:"detail,omitempty"`
	// SessionRevision is the revision of the session state the agent
	// last acted on.
	SessionRevision uint64 `json:"sessionRevision"`
	// Plans counts the plans (one step each) the agent published.
	Plans int `json:"plans"`
	// Planner is the planner that stored the agent's state last.
	Planner   string     `json:"planner,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	Error     *ErrorInfo `json:"error,omitempty"`
}

// AgentGoal is one goal of an AgentStatus.
type AgentGoal struct {
	Goal string `json:"goal"`
	// Utility is 0 when the goal is not valid.
	Utility   float64 `json:"utility"`
	Valid     bool    `json:"valid"`
	Satisfied bool    `json:"satisfied"`
	// Eligible: valid, unsatisfied, of utility > 0 and not cooling down.
	Eligible     bool      `json:"eligible"`
	CoolingUntil time.Time `json:"coolingUntil,omitzero"`
	Current      bool      `json:"current,omitempty"`
	Stats        GoalStats `json:"stats"`
}

// GoalStats count what an agent did for one goal.
type GoalStats struct {
	// Plans made for the goal, replans included.
	Plans int `json:"plans"`
	// Succeeded: times the goal's conditions came to hold while it was
	// pursued.
	Succeeded int `json:"succeeded"`
	// Failed: times the goal was given up (no plan, or its plans kept
	// failing) and put on cooldown.
	Failed int `json:"failed"`
	// Replans: plans made again for the goal after a failed step or a
	// change of the world.
	Replans int `json:"replans"`
	// Preemptions: times a more useful goal interrupted its plan.
	Preemptions int `json:"preemptions"`
}

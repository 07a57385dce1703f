// Package agent runs the planner's GOAP agents. An agent pursues a
// domain's goals in one session until it is stopped or no goal is left:
// it perceives the session state through the shared consumer
// planner-sessions on the sessions bucket, decides with a goap.Arbiter,
// runs its plan one step (a plan of one tool) at a time with inputs
// rendered from the live state, and monitors every result and change
// with a goap.Tracker (agent.go: its decisions, without I/O). Its state
// is one document per session in planbus-agents, stored with
// compare-and-set before it is acted on, so another planner resumes it
// where it was (service.go: the effect shell).
//
// The planner owns the Service: it starts agents for requests of kind
// goap with goap.agent (Start), hands it the messages that drive them
// (OnWake, OnSessionChange, OnExecution, Abandon) and the endpoints
// planbus.agent.stop and planbus.agent.status (HandleStop,
// HandleStatus), and lends it what it needs of the planner through Host.
package agent

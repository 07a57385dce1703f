package telemetry

import "go.opentelemetry.io/otel/attribute"

// Span names, one per step a request goes through.
const (
	SpanAccept   = "planbus.accept"   // planner: the request endpoint
	SpanRequest  = "planbus.request"  // planner: an accepted request, up to its first plan
	SpanResume   = "planbus.resume"   // planner: a plan's end, up to the next plan or the outcome
	SpanGenerate = "planbus.generate" // planner: one generation
	SpanPlan     = "planbus.plan"     // dispatcher: a plan, from its start to its end
	SpanTool     = "planbus.tool"     // dispatcher: a tool attempt, from its release to its end
	SpanToolRun  = "planbus.tool.run" // worker: a tool call run by a skill
	// SpanAgentTurn is the planner's: one turn of a session's GOAP agent,
	// on a wake-up, a change of the session's state, the end of its step
	// or a stop, up to what it decided stored and carried out.
	SpanAgentTurn = "planbus.agent.turn"
	// SpanGuideTurn is the planner's: one turn of a guided session
	// (planbus.guide.turn), from the request to the reply.
	SpanGuideTurn = "planbus.guide.turn"
)

// Attribute keys of planbus spans.
const (
	AttrRequestID  = attribute.Key("planbus.request_id")
	AttrSessionID  = attribute.Key("planbus.session_id")
	AttrPlanID     = attribute.Key("planbus.plan_id")
	AttrToolID     = attribute.Key("planbus.tool_id")
	AttrSkill      = attribute.Key("planbus.skill")
	AttrAttempt    = attribute.Key("planbus.attempt")
	AttrKind       = attribute.Key("planbus.kind")
	AttrState      = attribute.Key("planbus.state")
	AttrErrorCode  = attribute.Key("planbus.error_code")
	AttrWorkerID   = attribute.Key("planbus.worker_id")
	AttrTools      = attribute.Key("planbus.tools")
	AttrTrigger    = attribute.Key("planbus.trigger") // what an agent's turn answers: wake, session, step or stop
	AttrGoal       = attribute.Key("planbus.goal")
	AttrTemplate   = attribute.Key("planbus.template")   // a guided session's plan template
	AttrStep       = attribute.Key("planbus.step")       // its step, 1-based
	AttrTransition = attribute.Key("planbus.transition") // what a guided turn did to the plan
)

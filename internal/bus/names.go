package bus

// Subjects. Tokens in angle brackets are filled by the functions below.
const (
	// SubjectPlanRequest is the planner's request/reply endpoint.
	SubjectPlanRequest = "planbus.plan.request"
	// planbus.plans.<planId>: Plan JSON to execute (stream PLANS).
	SubjectPlansAll = "planbus.plans.>"
	// planbus.tools.<skill>: tool calls, a work queue per skill (stream TOOLS).
	SubjectToolsAll = "planbus.tools.>"
	// planbus.results.<planId>: tool results (stream RESULTS).
	SubjectResultsAll = "planbus.results.>"
	// planbus.timers.<planId>: durable timers of the dispatchers (stream TIMERS).
	SubjectTimersAll = "planbus.timers.>"
	// planbus.executions.<planId>: execution results, one per plan (stream EXECUTIONS).
	SubjectExecutionsAll = "planbus.executions.>"
	// planbus.events.<requestId>.<type>: progress events (stream EVENTS).
	SubjectEventsAll = "planbus.events.>"
	// planbus.cancel.<planId>: core NATS; workers stop the plan's running calls.
	SubjectCancelAll = "planbus.cancel.>"
	// planbus.requests.<requestId>: accepted plan requests (stream REQUESTS).
	SubjectRequestsAll = "planbus.requests.>"
	// planbus.outcomes.<requestId>: each request's final outcome (stream OUTCOMES).
	SubjectOutcomesAll = "planbus.outcomes.>"
	// SubjectSessionReset is the planner's endpoint that restarts a session.
	SubjectSessionReset = "planbus.session.reset"
	// SubjectSkills is the planner's endpoint that lists skills and their health.
	SubjectSkills = "planbus.skills"
	// planbus.invoke.<skill>: a worker's micro endpoint that runs a skill
	// outside any plan; for operators.
	SubjectInvokeAll = "planbus.invoke.>"
	// SubjectDispatcherStatus is every dispatcher's micro endpoint with its
	// counters.
	SubjectDispatcherStatus = "planbus.dispatcher.status"
	// SubjectExternalPlanners is where external planners answer when
	// authorization is on: a request of kind external names a subject
	// under it (planners.travel), and only that namespace is open to the
	// planner's requests and to external planners' subscriptions.
	SubjectExternalPlanners = "planners.>"
)

// Endpoints a client may call, and only these (RoleClient): the planner's,
// and those the roadmap reserves for it, so that the client role does not
// change when they arrive.
const (
	// SubjectPlanCancel is the planner's endpoint that cancels a request
	// or a plan (planbus.CancelRequest).
	SubjectPlanCancel = "planbus.plan.cancel"
	// SubjectPlanList is the planner's endpoint that lists recent
	// requests (planbus.ListRequest).
	SubjectPlanList = "planbus.plan.list"
	// SubjectPlanApprove is the planner's endpoint that approves or
	// rejects a tool waiting for approval (planbus.ApproveRequest).
	SubjectPlanApprove = "planbus.plan.approve"
	// SubjectPlanStatus is reserved: a request's or a plan's state.
	SubjectPlanStatus = "planbus.plan.status"
	// SubjectAgents is reserved: planbus.agent.<name>, agent endpoints.
	SubjectAgents = "planbus.agent.*"
	// SubjectGuideTurn is reserved: one turn of a guided session.
	SubjectGuideTurn = "planbus.guide.turn"
)

// ClientEndpoints are the request/reply subjects a client may call. The
// planner (or the service that will answer the reserved ones) may
// subscribe to them; nobody else may.
func ClientEndpoints() []string {
	return []string{SubjectPlanRequest, SubjectSessionReset, SubjectSkills, SubjectPlanCancel, SubjectPlanList,
		SubjectPlanStatus, SubjectAgents, SubjectGuideTurn, SubjectPlanApprove}
}

// Streams.
const (
	StreamPlans      = "PLANBUS_PLANS"
	StreamTools      = "PLANBUS_TOOLS"
	StreamResults    = "PLANBUS_RESULTS"
	StreamTimers     = "PLANBUS_TIMERS"
	StreamExecutions = "PLANBUS_EXECUTIONS"
	StreamEvents     = "PLANBUS_EVENTS"
	StreamRequests   = "PLANBUS_REQUESTS"
	StreamOutcomes   = "PLANBUS_OUTCOMES"
)

// Durable consumers. Every dispatcher shares the dispatcher ones; every
// worker serving a skill shares that skill's.
const (
	ConsumerDispatcherPlans   = "dispatcher-plans"
	ConsumerDispatcherResults = "dispatcher-results"
	ConsumerDispatcherTimers  = "dispatcher-timers"
	ConsumerPlannerRequests   = "planner-requests"
	ConsumerPlannerExecutions = "planner-executions"
	consumerSkillPrefix       = "skill-"
)

// KV buckets.
const (
	// BucketPlans holds <planId>.plan (the validated plan) and
	// <planId>.state (its execution state, updated with compare-and-set).
	BucketPlans = "planbus-plans"
	// BucketSkills holds one skill manifest per skill name.
	BucketSkills = "planbus-skills"
	// BucketHealth holds <sessionId>.<skill>: a skill's health in a session.
	BucketHealth = "planbus-health"
	// BucketSessions holds one state document per session id.
	BucketSessions = "planbus-sessions"
	// BucketRequests holds each request's replan loop state.
	BucketRequests = "planbus-requests"
	// BucketKeys holds secrets only dispatchers (and operators) may read:
	// the key that signs tool calls so their results cannot be forged.
	BucketKeys = "planbus-keys"
)

// Micro service names.
const (
	ServiceDispatcher = "planbus-dispatcher"
	ServiceToolworker = "planbus-toolworker"
	ServicePlanner    = "planbus-planner"
)

// Headers.
const (
	// HeaderFireAt carries a timer's due time in Unix milliseconds.
	HeaderFireAt = "Planbus-Fire-At"
)

// PlanSubject is where a plan is submitted.
func PlanSubject(planID string) string { return "planbus.plans." + planID }

// ToolSubject is the work queue of one skill.
func ToolSubject(skill string) string { return "planbus.tools." + skill }

// ResultSubject is where workers report results of one plan's tools.
func ResultSubject(planID string) string { return "planbus.results." + planID }

// TimerSubject carries the timers of one plan.
func TimerSubject(planID string) string { return "planbus.timers." + planID }

// ExecutionSubject is where a plan's execution result is published.
func ExecutionSubject(planID string) string { return "planbus.executions." + planID }

// EventSubject is where events of a request are published; eventType is
// dotted ("tool.released"), so planbus.events.<requestId>.tool.> selects
// every tool event of a request.
func EventSubject(requestID, eventType string) string {
	return "planbus.events." + requestID + "." + eventType
}

// EventsOfRequest selects every event of one request.
func EventsOfRequest(requestID string) string { return "planbus.events." + requestID + ".>" }

// InvokeSubject is the micro endpoint that runs one skill directly.
func InvokeSubject(skill string) string { return "planbus.invoke." + skill }

// CancelSubject tells workers to stop a plan's running calls.
func CancelSubject(planID string) string { return "planbus.cancel." + planID }

// SkillConsumer is the durable consumer all workers of a skill share.
func SkillConsumer(skill string) string { return consumerSkillPrefix + skill }

// RequestSubject is where an accepted request waits for a planner.
func RequestSubject(requestID string) string { return "planbus.requests." + requestID }

// OutcomeSubject is where a request's outcome is published.
func OutcomeSubject(requestID string) string { return "planbus.outcomes." + requestID }

// HealthKey is a key of BucketHealth.
func HealthKey(sessionID, skill string) string { return sessionID + "." + skill }

// PlanKey and StateKey are keys of BucketPlans.
func PlanKey(planID string) string  { return planID + ".plan" }
func StateKey(planID string) string { return planID + ".state" }

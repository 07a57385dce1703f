package bus

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/planbus/planbus"
)

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
	// planbus.timers.<planId>: durable timers of the dispatchers (stream
	// TIMERS); planbus.timers.scheduled.<planId>.timeout: a running plan's
	// timeout as a message schedule (TimeoutScheduleSubject).
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
	// planbus.agents.<sessionId>: wake-ups of a session's GOAP agent, due
	// now or at a time (stream AGENTS); planners only.
	SubjectAgentsAll = "planbus.agents.>"
	// planbus.schedules.def.<name>: a schedule as a message schedule
	// whose ticks the server stores on planbus.schedules.tick.<name>;
	// planbus.schedules.paused.<name>: a paused one (stream SCHEDULES).
	SubjectSchedulesAll = "planbus.schedules.>"
	// SubjectScheduleTicks is every schedule's ticks, which the planners
	// turn into requests.
	SubjectScheduleTicks = "planbus.schedules.tick.>"
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
	// SubjectCallSettled is the dispatchers' endpoint a worker asks, for a
	// call delivered again, whether its attempt already has a result
	// stored (so it is not run twice); the body is a planbus.SettledQuery.
	SubjectCallSettled = "planbus.dispatcher.settled"
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
	// SubjectAgents is planbus.agent.<name>, the agent endpoints:
	// SubjectAgentStart, SubjectAgentStop, SubjectAgentStatus.
	SubjectAgents = "planbus.agent.*"
	// SubjectAgentStart starts a session's GOAP agent (a plan request of
	// kind goap; goap.agent is implied).
	SubjectAgentStart = "planbus.agent.start"
	// SubjectAgentStop stops a session's agent (planbus.AgentStopRequest).
	SubjectAgentStop = "planbus.agent.stop"
	// SubjectAgentStatus reports a session's agent and its goals
	// (planbus.AgentStatusRequest, planbus.AgentStatus).
	SubjectAgentStatus = "planbus.agent.status"
	// SubjectGuideTurn is the planner's endpoint for one turn of a guided
	// session (planbus.GuideTurn).
	SubjectGuideTurn = "planbus.guide.turn"
	// SubjectSchedules is planbus.schedule.<verb>, the schedule
	// endpoints: SubjectScheduleAdd, SubjectScheduleList,
	// SubjectScheduleRemove, SubjectSchedulePause, SubjectScheduleResume.
	SubjectSchedules = "planbus.schedule.*"
	// SubjectScheduleAdd adds a schedule (planbus.ScheduleSpec).
	SubjectScheduleAdd = "planbus.schedule.add"
	// SubjectScheduleList lists the schedules (planbus.ScheduleList).
	SubjectScheduleList = "planbus.schedule.list"
	// SubjectScheduleRemove, SubjectSchedulePause and
	// SubjectScheduleResume act on one schedule (planbus.ScheduleName).
	SubjectScheduleRemove = "planbus.schedule.rm"
	SubjectSchedulePause  = "planbus.schedule.pause"
	SubjectScheduleResume = "planbus.schedule.resume"
)

// Named clients (planner auth add-client NAME) call the endpoints on
// subjects of their own, planbus.client.<name>.<endpoint without
// "planbus.">, planbus.client.alice.plan.request for instance: only alice
// may publish there (her grants), so the planner knows who asks from the
// subject alone, and keeps what alice makes hers. Admins may publish on
// every client's.
const (
	clientPrefix = "planbus.client."
	// SubjectClientsAll is every named client's endpoints.
	SubjectClientsAll = clientPrefix + ">"
)

// ClientSubject is endpoint (one of ClientEndpoints) as client name calls
// it; for name "" (the shared client role) it is endpoint itself.
func ClientSubject(name, endpoint string) string {
	if name == "" {
		return endpoint
	}
	return clientPrefix + name + "." + strings.TrimPrefix(endpoint, "planbus.")
}

// OwnedEndpoint is endpoint on every named client's subject: what the
// planner listens on (planbus.client.*.plan.request).
func OwnedEndpoint(endpoint string) string { return ClientSubject("*", endpoint) }

// OwnerOfSubject is the named client a request's subject names, or "" for
// an endpoint's own subject.
func OwnerOfSubject(subject string) string {
	rest, ok := strings.CutPrefix(subject, clientPrefix)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ".")
	return name
}

// ClientEndpoints are the request/reply subjects a client may call. The
// planner (or the service that will answer the reserved ones) may
// subscribe to them; nobody else may.
func ClientEndpoints() []string {
	return []string{SubjectPlanRequest, SubjectSessionReset, SubjectSkills, SubjectPlanCancel, SubjectPlanList,
		SubjectPlanStatus, SubjectAgents, SubjectGuideTurn, SubjectPlanApprove, SubjectSchedules}
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
	StreamAgents     = "PLANBUS_AGENTS"
	StreamSchedules  = "PLANBUS_SCHEDULES"
)

// Durable consumers. Every dispatcher shares the dispatcher ones; every
// worker serving a skill shares that skill's. The dispatcher ones take
// the messages stored before their streams were partitioned (see
// Partitioned); partition k of each has a consumer of its own,
// PartitionConsumer.
const (
	ConsumerDispatcherPlans   = "dispatcher-plans"
	ConsumerDispatcherResults = "dispatcher-results"
	ConsumerDispatcherTimers  = "dispatcher-timers"
	ConsumerPlannerRequests   = "planner-requests"
	ConsumerPlannerExecutions = "planner-executions"
	// ConsumerPlannerAgents takes agent wake-ups (PLANBUS_AGENTS);
	// ConsumerPlannerSessions takes every change of a session's state
	// (the stream of the planbus-sessions bucket), which an agent of the
	// session perceives.
	ConsumerPlannerAgents = "planner-agents"
	// ConsumerPlannerSchedules: the planners' shared consumer of
	// schedules' ticks.
	ConsumerPlannerSchedules = "planner-schedules"
	ConsumerPlannerSessions  = "planner-sessions"
	consumerSkillPrefix      = "skill-"
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
	// BucketAgents holds, per session id, the state of the session's GOAP
	// agent (arbiter, tracker, step in flight, goal stats), changed with
	// compare-and-set by the planners.
	BucketAgents = "planbus-agents"
	// BucketGuides holds one guided session per session id: its active
	// plan, updated with compare-and-set by whichever planner answers the
	// turn.
	BucketGuides = "planbus-guides"
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

// Partitioned is how a stream of per-plan subjects (SubjectPlansAll,
// SubjectResultsAll, SubjectTimersAll) is split by plan id into
// partitions: the subjects published, planbus.results.<planId>, and the
// subjects stored, planbus.results.<partition>.<planId>. all is the
// stream's subjects (planbus.results.>).
type Partitioned string

func (all Partitioned) prefix() string { return strings.TrimSuffix(string(all), ">") }

// Published selects the subjects messages are published on.
func (all Partitioned) Published() string { return all.prefix() + "*" }

// Transform is the stream's subject transform into n partitions.
func (all Partitioned) Transform(n int) string {
	return all.prefix() + "{{partition(" + strconv.Itoa(n) + ",1)}}.{{wildcard(1)}}"
}

// Partition selects the subjects stored in partition k.
func (all Partitioned) Partition(k int) string { return all.prefix() + strconv.Itoa(k) + ".*" }

// Partitions selects the subjects stored in any partition.
func (all Partitioned) Partitions() string { return all.prefix() + "*.*" }

// Of selects the subject plan id's messages are stored under, whatever
// the number of partitions: planbus.results.*.<planId>. (Its messages are
// published on planbus.results.<planId>.)
func (all Partitioned) Of(planID string) string { return all.prefix() + "*." + planID }

// In is the subject plan id's messages are stored under in a stream of n
// partitions: planbus.results.<k>.<planId>. A literal subject, where Of
// has a wildcard: the server finds the messages of a literal subject
// from its index of subjects, and those of a wildcard filter by reading
// every message in between once a stream holds more than 64K subjects,
// which a day of retained plans does.
func (all Partitioned) In(planID string, n int) string {
	return all.prefix() + strconv.Itoa(PartitionOf(planID, n)) + "." + planID
}

// PartitionOf is the partition of n that a plan's messages are stored
// in: the server's partition transform, FNV-1a of the plan id modulo n.
func PartitionOf(planID string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(planID))
	return int(h.Sum32() % uint32(max(n, 1)))
}

// PartitionConsumer is the durable consumer of partition k of the stream
// whose shared consumer is durable.
func PartitionConsumer(durable string, k int) string { return durable + "-" + strconv.Itoa(k) }

// PlanOfSubject is the plan id a per-plan subject names: its last token,
// partitioned or not.
func PlanOfSubject(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// PlanSubject is where a plan is submitted.
func PlanSubject(planID string) string { return "planbus.plans." + planID }

// KeeperSubject is where dispatchers keep a short-lived message in the
// tool queue's store, so that its last block does not empty (and is not
// deleted and created again) every time the queue drains. It is no
// skill's subject ("~" is not in a skill name), so no worker takes it.
const KeeperSubject = "planbus.tools.~keeper"

// ToolSubject is the work queue of one skill.
func ToolSubject(skill string) string { return "planbus.tools." + skill }

// ResultSubject is where workers report results of one plan's tools.
func ResultSubject(planID string) string { return "planbus.results." + planID }

// TimerSubject carries the timers of one plan.
func TimerSubject(planID string) string { return "planbus.timers." + planID }

// TimeoutScheduleSubject is where the timeout of running plan planID waits
// until it is due: a message schedule (Nats-Schedule "@at <time>") of the
// TIMERS stream, which the server publishes on TimerSubject(planID) at its
// time and then removes. Five tokens: neither the stream's partition
// transform (three) nor any dispatcher's consumer (three, four) takes it,
// so it is no delivery anyone holds while it waits.
func TimeoutScheduleSubject(planID string) string {
	return "planbus.timers.scheduled." + planID + ".timeout"
}

// ExecutionSubject is where a plan's execution result is published.
func ExecutionSubject(planID string) string { return "planbus.executions." + planID }

// EventSubject is where events of a request are published; eventType is
// dotted ("tool.released"), so planbus.events.<requestId>.tool.> selects
// every tool event of a request.
func EventSubject(requestID string, eventType planbus.EventType) string {
	return "planbus.events." + requestID + "." + string(eventType)
}

// EventSubjectsKept are the subjects the events stream keeps with k:
// SubjectEventsAll, or for KeepOutcomeEvents every event's but
// tool.released's and tool.started's.
func EventSubjectsKept(k KeepEvents) []string {
	if k != KeepOutcomeEvents {
		return []string{SubjectEventsAll}
	}
	out := []string{}
	for _, family := range []string{"plan", "request", "skill", "agent", "guide"} {
		out = append(out, "planbus.events.*."+family+".>")
	}
	for _, t := range []string{"succeeded", "failed", "retrying", "timeout", "skipped", "cancelled", "waiting", "approved", "rejected", "reused"} {
		out = append(out, "planbus.events.*.tool."+t)
	}
	return out
}

// EventsOfRequest selects every event of one request.
func EventsOfRequest(requestID string) string { return "planbus.events." + requestID + ".>" }

// InvokeSubject is the micro endpoint that runs one skill directly.
func InvokeSubject(skill string) string { return "planbus.invoke." + skill }

// CancelSubject tells workers to stop a plan's running calls.
func CancelSubject(planID string) string { return "planbus.cancel." + planID }

// SkillConsumer is the durable consumer all workers of a skill share.
func SkillConsumer(skill string) string {
	// A consumer's name has no dot; '~' is in no skill name, so namespaced
	// names stay apart from the others.
	return consumerSkillPrefix + strings.ReplaceAll(skill, ".", "~")
}

// ScheduleSubject holds schedule name while it runs: a message schedule
// of the SCHEDULES stream.
func ScheduleSubject(name string) string { return "planbus.schedules.def." + name }

// SchedulePausedSubject holds schedule name while it is paused.
func SchedulePausedSubject(name string) string { return "planbus.schedules.paused." + name }

// ScheduleTickSubject is where the server stores schedule name's ticks.
func ScheduleTickSubject(name string) string { return "planbus.schedules.tick." + name }

// ScheduleTicksKept is how many of a schedule's last ticks its stream
// keeps (what planner schedule ls shows of them).
const ScheduleTicksKept = 100

// RequestSubject is where an accepted request waits for a planner.
func RequestSubject(requestID string) string { return "planbus.requests." + requestID }

// OutcomeSubject is where a request's outcome is published.
func OutcomeSubject(requestID string) string { return "planbus.outcomes." + requestID }

// HealthKey is a key of BucketHealth.
func HealthKey(sessionID, skill string) string { return sessionID + "." + skill }

// AgentSubject carries the wake-ups of a session's agent.
func AgentSubject(sessionID string) string { return "planbus.agents." + sessionID }

// SessionChanges selects every change of the session state bucket, as
// subjects of its stream; SessionOfChange is the session id a change's
// subject names.
const SessionChanges = "$KV." + BucketSessions + ".>"

// SessionsStream is the stream that holds the planbus-sessions bucket.
const SessionsStream = "KV_" + BucketSessions

// SessionOfChange returns the session id of a subject of SessionChanges.
func SessionOfChange(subject string) string {
	return strings.TrimPrefix(subject, "$KV."+BucketSessions+".")
}

// KVSubject is the subject a put or delete of key in bucket is published
// on.
func KVSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// PlanKey and StateKey are keys of BucketPlans. A plan whose state is
// stored in chunks has its chunks under the state's key too (see
// execution.ChunkKey).
func PlanKey(planID string) string  { return planID + ".plan" }
func StateKey(planID string) string { return planID + ".state" }

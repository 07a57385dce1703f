package bus

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Role is who a connection is when the server has authorization on: each
// role is one nkey user whose permissions allow what that kind of
// component does on the bus and nothing else. Everything not granted below
// is denied. This file is the only place permissions are written; the
// embedded server (ServerAuth) and the NATS config of a cluster
// (NATSAuthConfig) both take them from here.
type Role string

// The roles. Each has a seed file <role>.nk (see Seeds).
const (
	// RoleAdmin is for operators: everything, including the secrets of
	// planbus-keys and every stream's configuration.
	RoleAdmin Role = "admin"
	// RolePlanner is the planner service: takes requests, publishes plans
	// and outcomes, keeps the replan loop's state.
	RolePlanner Role = "planner"
	// RoleDispatcher is a dispatcher: runs plans, releases tool calls,
	// applies results. The only role besides admin that holds the signing
	// key in planbus-keys.
	RoleDispatcher Role = "dispatcher"
	// RoleWorker is a tool worker (or an external planner): pulls calls,
	// publishes their results.
	RoleWorker Role = "worker"
	// RoleClient is a user of the system: sends requests and reads what
	// came of them.
	RoleClient Role = "client"
)

// Roles lists every role.
func Roles() []Role { return []Role{RoleAdmin, RolePlanner, RoleDispatcher, RoleWorker, RoleClient} }

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(Roles(), r) {
		return "", fmt.Errorf("bus: unknown role %q (roles: %v)", s, Roles())
	}
	return r, nil
}

// InboxPrefix is the prefix of the reply subjects of the role's
// connections. Only the client role receives replies on the NATS default
// _INBOX (so the stock nats CLI works as a client); every other role has
// its own, which no other role may subscribe to, so a client cannot read a
// dispatcher's key or the planner's replies by subscribing to _INBOX.>.
// Operators using the nats CLI as admin should pass --inbox-prefix
// _INBOX_admin for the same reason.
func (r Role) InboxPrefix() string {
	if r == RoleClient || r == "" {
		return "_INBOX"
	}
	return "_INBOX_" + string(r)
}

// Grants are a role's allowed subjects: deny by default, allow these.
type Grants struct {
	// Publish lists subjects (with wildcards) the role may publish to.
	Publish []string
	// Subscribe lists subjects the role may subscribe to, and
	// SubscribeDeny those it may not among them.
	Subscribe     []string
	SubscribeDeny []string
	// Respond lets the role answer each request it receives, once, within
	// ResponseExpiry, whatever its reply subject (NATS allow_responses).
	// The expiry is always given: the server's default (2m) would be
	// filled in differently by the embedded server and a config file.
	Respond        bool
	ResponseExpiry time.Duration
}

// The JetStream API and the subjects its clients use. A KV bucket b is the
// stream KV_b on subjects $KV.b.>.
func jsAPI(parts ...string) string  { return "$JS.API." + strings.Join(parts, ".") }
func kvStream(bucket string) string { return "KV_" + bucket }

// declaring: CreateOrUpdateStream sends UPDATE, then CREATE if the stream
// is missing; CreateOrUpdateKeyValue first reads the account's limits
// ($JS.API.INFO). Declare reads a stream's info to wait for one the role
// may not create.
func declaring(stream string) []string {
	return []string{jsAPI("STREAM", "INFO", stream), jsAPI("STREAM", "CREATE", stream), jsAPI("STREAM", "UPDATE", stream)}
}

// reading a stream's messages by sequence or last by subject: direct gets
// (every planbus stream and bucket allows them) and the leader's get for a
// stream without them, plus the info that binding to a stream or bucket
// reads first.
func reading(stream string) []string {
	return []string{jsAPI("STREAM", "INFO", stream), jsAPI("DIRECT", "GET", stream), jsAPI("DIRECT", "GET", stream, ">"),
		jsAPI("STREAM", "MSG", "GET", stream)}
}

// watching a bucket (KV Watch, ListKeys, the health and skill caches): an
// ordered push consumer, created (and recreated after a gap) by the
// watcher, its flow control answered by it.
func watching(bucket string) []string {
	s := kvStream(bucket)
	return []string{jsAPI("CONSUMER", "CREATE", s), jsAPI("CONSUMER", "CREATE", s, ">"), jsAPI("CONSUMER", "DELETE", s, "*"),
		jsAPI("CONSUMER", "INFO", s, "*"), "$JS.FC." + s + ".>"}
}

// watchingKey is watching one key of a bucket: the ordered consumer's
// create request names its filter, the key's subject.
func watchingKey(bucket, key string) []string {
	s := kvStream(bucket)
	return []string{jsAPI("CONSUMER", "CREATE", s, "*", "$KV."+bucket+"."+key), jsAPI("CONSUMER", "DELETE", s, "*"),
		jsAPI("CONSUMER", "INFO", s, "*"), "$JS.FC." + s + ".>"}
}

// writing a bucket: put, create, update, delete and purge are publishes on
// the key's subject.
func writing(bucket string) string { return "$KV." + bucket + ".>" }

// consuming through a durable pull consumer: create or update it (the
// request subject carries its filter, so the consumer can only be made on
// that filter), read its info, ask for messages, and ack, nak, term or mark
// them in progress. Acks are in the server's default (v1) format,
// $JS.ACK.<stream>.<consumer>.<five numbers>.
func consuming(stream, durable, filter string) []string {
	return []string{jsAPI("CONSUMER", "CREATE", stream, durable, filter), jsAPI("CONSUMER", "INFO", stream, durable),
		jsAPI("CONSUMER", "MSG", "NEXT", stream, durable), "$JS.ACK." + stream + "." + durable + ".>"}
}

// serving a micro service: its discovery subjects $SRV.PING|INFO|STATS,
// alone, with the service's name, and with its name and instance id.
func serving(service string) []string {
	return []string{"$SRV.*", "$SRV.*." + service, "$SRV.*." + service + ".*"}
}

// inbox: replies to the role's own requests, JetStream API answers and
// pulled messages arrive there.
func inbox(r Role) string { return r.InboxPrefix() + ".>" }

// eventsOf is the events a component publishes: planbus.events.<requestId>.<kind>.>.
func eventsOf(kind string) string { return "planbus.events.*." + kind + ".>" }

// Grants returns the role's permissions. Every grant says which part of
// planbus needs it; a grant no component uses is a bug.
func (r Role) Grants() Grants {
	var g Grants
	pub := func(s ...string) { g.Publish = append(g.Publish, s...) }
	sub := func(s ...string) { g.Subscribe = append(g.Subscribe, s...) }
	switch r {
	case RoleAdmin:
		// Operators: the nats CLI, stream maintenance, reading and
		// rotating secrets, and the in-process declaration of an
		// embedded node.
		pub(">")
		sub(">")
		// But not the client role's shared inbox, _INBOX.>: an operator's
		// nats CLI left on it (without --inbox-prefix _INBOX_admin) would
		// get its replies, the dispatchers' key among them, where any
		// client can read them. Refused, the CLI says so at once.
		g.SubscribeDeny = []string{inbox(RoleClient)}

	case RolePlanner:
		// Declare: a planner creates or updates every stream and bucket
		// at start but planbus-keys, which only dispatchers use. $JS.API.INFO
		// is read before a bucket is made; replacing the events stream
		// (file storage to memory) deletes it first.
		pub(jsAPI("INFO"))
		for _, sc := range (Config{}).Streams() {
			pub(declaring(sc.Name)...)
		}
		pub(jsAPI("STREAM", "DELETE", StreamEvents))
		for _, kc := range (Config{}).Buckets() {
			if kc.Bucket != BucketKeys {
				pub(declaring(kvStream(kc.Bucket))...)
			}
		}
		// The endpoint queues accepted requests; the loop publishes each
		// attempt's plan and the request's outcome (JetStream publishes).
		pub(SubjectRequestsAll, SubjectPlansAll, SubjectOutcomesAll)
		// The shared consumers of the loop: accepted requests, and
		// execution results of the plans it published.
		pub(consuming(StreamRequests, ConsumerPlannerRequests, SubjectRequestsAll)...)
		pub(consuming(StreamExecutions, ConsumerPlannerExecutions, SubjectExecutionsAll)...)
		// Loop state per request (get, create, compare-and-set).
		pub(reading(kvStream(BucketRequests))...)
		pub(writing(BucketRequests))
		// planbus.plan.list reads the accepted requests newest first by
		// sequence; planbus.plan.cancel finds a request still queued by
		// subject.
		pub(reading(StreamRequests)...)
		// An agent's start looks its id up among the outcomes: an id that
		// ended before is not started again.
		pub(reading(StreamOutcomes)...)
		// planbus.plan.cancel by plan id, or of a plan submitted without a
		// request: the plan's state names its request and says whether it
		// still runs. Read only: plan state is the dispatchers'.
		pub(reading(kvStream(BucketPlans))...)
		// Manifests of advertised skills: read to check and plan.
		pub(reading(kvStream(BucketSkills))...)
		pub(watching(BucketSkills)...)
		// Skill health: the health cache watches it, and
		// planbus.session.reset purges a session's entries.
		pub(reading(kvStream(BucketHealth))...)
		pub(watching(BucketHealth)...)
		pub(writing(BucketHealth))
		// Session state: read for planning, purged by a reset with
		// "state": true.
		pub(reading(kvStream(BucketSessions))...)
		pub(writing(BucketSessions))
		// Guided sessions: planbus.guide.turn reads and writes a
		// session's active plan (get, create, compare-and-set).
		pub(reading(kvStream(BucketGuides))...)
		pub(writing(BucketGuides))
		// request.* progress events, and guide.* events of guided
		// sessions.
		pub(eventsOf("request"), eventsOf("guide"))
		// GOAP agents: their wake-ups on planbus.agents.<sessionId>
		// (published and consumed through the shared planner-agents),
		// every change of a session's state (a durable consumer on the
		// sessions bucket's stream: what an agent perceives), their state
		// in planbus-agents (get, create, compare-and-set) and agent.*
		// events.
		pub(SubjectAgentsAll)
		pub(consuming(StreamAgents, ConsumerPlannerAgents, SubjectAgentsAll)...)
		pub(consuming(kvStream(BucketSessions), ConsumerPlannerSessions, SessionChanges)...)
		pub(reading(kvStream(BucketAgents))...)
		pub(writing(BucketAgents))
		pub(eventsOf("agent"))
		// Schedules: planbus.schedule.* writes, pauses and purges them
		// in their stream and reads it; the shared planner-schedules
		// turns their ticks into requests.
		pub(SubjectSchedulesAll)
		pub(reading(StreamSchedules)...)
		pub(jsAPI("STREAM", "PURGE", StreamSchedules))
		pub(consuming(StreamSchedules, ConsumerPlannerSchedules, SubjectScheduleTicks)...)
		// planbus.plan.cancel: the planner hands the dispatchers a
		// cancelled request's plan as a durable command on
		// planbus.timers.<planId> (kind cancel), which waits in the TIMERS
		// stream for a dispatcher across restarts. The dispatcher ends the
		// plan and alone makes the signed cancel that stops the workers'
		// calls, so the planner has no grant on planbus.cancel.>.
		// planbus.plan.approve hands them a person's decision on a tool
		// waiting for approval the same way (kinds approve and reject).
		// Other timers it might publish change nothing: a plan timeout before
		// its deadline and a retry of a tool that is not retrying are
		// ignored.
		pub(SubjectTimersAll)
		// Requests to external planners, which may only live under
		// planners.>: a client names the subject, and the planner must
		// not become its way to publish anywhere else.
		pub(SubjectExternalPlanners)
		// The client endpoints it serves, as the shared client role and
		// every named client call them; its micro service discovery.
		sub(ClientEndpoints()...)
		sub(SubjectClientsAll)
		sub(serving(ServicePlanner)...)
		sub(inbox(r))
		// Answers to the client endpoints and to discovery, within
		// seconds.
		g.Respond, g.ResponseExpiry = true, 2*time.Minute

	case RoleDispatcher:
		// Declare: every stream and bucket, planbus-keys included, which
		// nobody else but an admin may touch.
		pub(jsAPI("INFO"))
		for _, sc := range (Config{}).Streams() {
			pub(declaring(sc.Name)...)
		}
		pub(jsAPI("STREAM", "DELETE", StreamEvents))
		for _, kc := range (Config{}).Buckets() {
			pub(declaring(kvStream(kc.Bucket))...)
		}
		// Plans, tool results, timers: the consumers of the partitions
		// (any number of them, on the subjects of a partition), and the
		// shared ones of the messages stored before the streams were
		// partitioned.
		for _, c := range []struct{ stream, durable, all string }{
			{StreamPlans, ConsumerDispatcherPlans, SubjectPlansAll},
			{StreamResults, ConsumerDispatcherResults, SubjectResultsAll},
			{StreamTimers, ConsumerDispatcherTimers, SubjectTimersAll},
		} {
			pub(consuming(c.stream, "*", Partitioned(c.all).Partitions())...)
			pub(consuming(c.stream, c.durable, Partitioned(c.all).Published())...)
		}
		// Who else dispatches, to share the partitions.
		pub("$SRV.PING." + ServiceDispatcher)
		// A plan's engine is rebuilt from results read back by sequence;
		// a plan's results are read through an ordered consumer of its
		// subject (whether an attempt's result is stored: the settled
		// check, and the calls a state implies), deleted when read.
		pub(reading(StreamResults)...)
		pub(jsAPI("CONSUMER", "DELETE", StreamResults, "*"))
		// The timers of an ended plan are purged from their stream (by
		// the plan's subject); so are the keeper messages a dispatcher's
		// newest one replaces in the tool queue (KeeperSubject).
		pub(jsAPI("STREAM", "INFO", StreamTimers), jsAPI("STREAM", "PURGE", StreamTimers))
		pub(jsAPI("STREAM", "INFO", StreamTools), jsAPI("STREAM", "PURGE", StreamTools))
		// Effects: tool calls, durable timers, execution results
		// (JetStream publishes), cancels of a finished plan's running
		// calls and every plan.*, tool.* and skill.* event.
		pub(SubjectToolsAll, SubjectTimersAll, SubjectExecutionsAll, SubjectCancelAll)
		pub(eventsOf("plan"), eventsOf("tool"), eventsOf("skill"))
		// Plans and their state (get, create, compare-and-set).
		pub(reading(kvStream(BucketPlans))...)
		pub(writing(BucketPlans))
		// Manifests: the skill cache watches them to validate plans.
		pub(reading(kvStream(BucketSkills))...)
		pub(watching(BucketSkills)...)
		// Health: changed with compare-and-set as results arrive.
		pub(reading(kvStream(BucketHealth))...)
		pub(watching(BucketHealth)...)
		pub(writing(BucketHealth))
		// Session state: results' statePatch merged with compare-and-set.
		pub(reading(kvStream(BucketSessions))...)
		pub(writing(BucketSessions))
		// The signing key of tool calls: read, and created by the first
		// dispatcher.
		pub(reading(kvStream(BucketKeys))...)
		pub(watching(BucketKeys)...)
		pub(writing(BucketKeys))
		// Metrics (planbus_skill_*): each skill's consumer info (its
		// backlog) and the tool workers' micro service info (who serves
		// it), read when Prometheus scrapes.
		pub(jsAPI("CONSUMER", "INFO", StreamTools, "*"), "$SRV.INFO."+ServiceToolworker)
		sub(SubjectDispatcherStatus, SubjectCallSettled)
		sub(serving(ServiceDispatcher)...)
		sub(inbox(r))
		// Answers to status and discovery requests.
		g.Respond, g.ResponseExpiry = true, 2*time.Minute

	case RoleWorker:
		workerGrants(&g, nil)

	case RoleClient:
		// The endpoints: plan requests, session reset, skills, and those
		// the roadmap reserves.
		pub(ClientEndpoints()...)
		// Discovery: nats micro ls|info|stats, and `planner run` asking
		// whether a dispatcher is up.
		pub("$SRV.>")
		// Outcomes, execution results and events, by subject (nats stream
		// get --last-for, the client's wait for an outcome, a watch's
		// reading of past events), and accepted requests (a request not
		// yet taken up by a planner has no loop state: planner watch and
		// status find it there).
		for _, s := range []string{StreamOutcomes, StreamExecutions, StreamEvents, StreamRequests} {
			pub(reading(s)...)
		}
		// The status buckets, by key (nats kv get, planner status). No
		// watches or listings: they need consumers, and a consumer's
		// deliver subject is not checked against its creator's
		// permissions.
		for _, b := range []string{BucketRequests, BucketPlans, BucketHealth, BucketSessions, BucketSkills, BucketAgents} {
			pub(reading(kvStream(b))...)
		}
		// The web view's system page (internal/web), which runs as a
		// client: each stream's size and each durable consumer's backlog.
		// Info only: it reads no message of the streams it had no grant
		// for (plans, tool calls, results, timers) and creates nothing.
		for _, sc := range (Config{}).Streams() {
			pub(jsAPI("STREAM", "INFO", sc.Name), jsAPI("CONSUMER", "INFO", sc.Name, "*"))
		}
		sub(SubjectOutcomesAll, SubjectExecutionsAll, SubjectEventsAll)
		sub(inbox(r))
	}
	g.Publish, g.Subscribe = dedupe(g.Publish), dedupe(g.Subscribe)
	return g
}

// ClientGrants are the permissions of the named client name (planner auth
// add-client): the client role's reads, but the endpoints on its own
// subjects alone (ClientSubject), so what it asks for is its own and it
// may cancel, approve or reset nothing of another's; and its own inbox,
// _INBOX_client_<name>, so no other client reads its replies. Outcomes,
// execution results, events and the status buckets stay readable, as for
// the client role.
func ClientGrants(name string) Grants {
	g := RoleClient.Grants()
	own := map[string]bool{}
	for _, e := range ClientEndpoints() {
		own[e] = true
	}
	pub := g.Publish[:0:0]
	for _, s := range g.Publish {
		if !own[s] {
			pub = append(pub, s)
		}
	}
	g.Publish = append(pub, clientPrefix+name+".>")
	sub := g.Subscribe[:0:0]
	for _, s := range g.Subscribe {
		if s != inbox(RoleClient) {
			sub = append(sub, s)
		}
	}
	g.Subscribe = append(sub, ClientInbox(name)+".>")
	return g
}

// ClientInbox is the inbox prefix of the named client name (or the client
// role's, for "").
func ClientInbox(name string) string {
	if name == "" {
		return RoleClient.InboxPrefix()
	}
	return "_INBOX_client_" + name
}

// WorkerGrants are the worker role's permissions narrowed to skills: a
// worker holding them takes the calls of those skills only, advertises
// only their manifests and answers only their direct invocations (see
// WorkerGroup). With no skills they are the role's own, for every skill.
func WorkerGrants(skills []string) Grants {
	var g Grants
	workerGrants(&g, skills)
	g.Publish, g.Subscribe = dedupe(g.Publish), dedupe(g.Subscribe)
	return g
}

func workerGrants(g *Grants, skills []string) {
	pub := func(s ...string) { g.Publish = append(g.Publish, s...) }
	sub := func(s ...string) { g.Subscribe = append(g.Subscribe, s...) }
	if len(skills) == 0 {
		// Pull the calls of its skills: a durable consumer skill-<skill>
		// per skill on the TOOLS work queue, created or updated by
		// whichever worker starts first, filtered on planbus.tools.>.
		// No direct or sequence reads of TOOLS: calls come only through
		// the consumers.
		pub(jsAPI("CONSUMER", "CREATE", StreamTools, "*", SubjectToolsAll), jsAPI("CONSUMER", "INFO", StreamTools, "*"),
			jsAPI("CONSUMER", "MSG", "NEXT", StreamTools, "*"), "$JS.ACK."+StreamTools+".*.>")
		// Register its skills' manifests, and watch them to put its own
		// back when one is changed under it.
		pub(writing(BucketSkills))
		pub(watching(BucketSkills)...)
		// planbus.invoke.<skill> (answered for admins).
		sub(SubjectInvokeAll)
	}
	for _, s := range skills {
		// The same, for each of its skills alone: its consumer on its
		// own subject, its manifest's key, its invocations.
		pub(consuming(StreamTools, SkillConsumer(s), ToolSubject(s))...)
		pub("$KV." + BucketSkills + "." + s)
		pub(watchingKey(BucketSkills, s)...)
		sub(InvokeSubject(s))
	}
	// Results of its calls, and tool.started events. A result needs the
	// token of its call, so a worker cannot forge the result of a call
	// it was not given. Results in an atomic batch are the same messages
	// with batch headers; the server answers the commit (and any message
	// of the batch sent as a request) on the worker's inbox.
	pub(SubjectResultsAll, eventsOf("tool"))
	// Ask the dispatchers, for a call delivered again, whether its
	// attempt already ended (with the call's token).
	pub(SubjectCallSettled)
	pub(jsAPI("STREAM", "INFO", kvStream(BucketSkills)))
	// Read the manifests advertised, to warn when a skill's differs from
	// its own (the planbus.skills endpoint shows them to clients anyway).
	pub(reading(kvStream(BucketSkills))...)
	// Declare lets a worker wait for the streams it needs when it
	// starts before a planner or dispatcher has declared them.
	pub(jsAPI("STREAM", "INFO", StreamTools), jsAPI("STREAM", "INFO", StreamResults))
	// Stop a plan's running calls when its dispatcher says so.
	sub(SubjectCancelAll)
	// Discovery of the workers' micro service.
	sub(serving(ServiceToolworker)...)
	// External planners connect with the worker role's own seed: they
	// answer the planner's requests under planners.> and need nothing
	// else. A worker group's seed does not get them: a plan an external
	// planner answers may call any skill, which would undo the group's
	// confinement to its own.
	if len(skills) == 0 {
		sub(SubjectExternalPlanners)
	}
	sub(inbox(RoleWorker))
	// A skill invoked directly may run as long as its timeout.
	g.Respond, g.ResponseExpiry = true, time.Hour
}

// dedupe drops repeated subjects (two grants may need the same one),
// keeping the first.
func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mayDeclare reports whether the role creates and updates the stream or
// bucket named name at start (Declare).
func (r Role) mayDeclare(name string) bool {
	switch r {
	case RoleAdmin, "":
		return true
	case RoleDispatcher:
		return true
	case RolePlanner:
		return name != BucketKeys
	}
	return false
}

// needs reports whether the role's components cannot start without the
// stream or bucket named name: Declare waits for those it may not create.
func (r Role) needs(name string) bool {
	switch r {
	case RoleWorker:
		return name == StreamTools || name == StreamResults || name == BucketSkills
	case RoleClient:
		return false
	}
	return r.mayDeclare(name)
}

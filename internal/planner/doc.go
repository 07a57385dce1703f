// Package planner is the planner service (Service: New, Run, Ready): it
// takes plan requests, produces Plan JSON with one of its generators,
// publishes the plans for the dispatchers, and owns each request's bounded
// replan loop.
//
// # Endpoints
//
// The micro service planbus-planner (endpoints.go) answers:
//   - planbus.plan.request: a request (Request, DecodeRequest;
//     schemas/plan-request.schema.json) is checked — its size, the schema,
//     budgets no higher than this planner's, then what its kind needs —
//     and queued on the REQUESTS stream before the reply says accepted; a
//     refused one gets a reply naming the field (RequestError) and nothing
//     is published;
//   - planbus.plan.cancel (cancel.go, DecodeCancel): a request, or the
//     request a plan belongs to, ends cancelled: at once when no plan runs;
//     through a cancel mark in the loop's state and a durable command to
//     the dispatchers when one does;
//   - planbus.plan.list (list.go, DecodeList): the most recently accepted
//     requests with their status, filtered by status and session;
//   - planbus.plan.approve (approve.go, DecodeApprove): a tool waiting for
//     approval in a request's running plan is approved or rejected,
//     through a durable command to the dispatchers, as cancels go; a tool
//     that does not exist or is not waiting is refused (NOT_FOUND,
//     NOT_WAITING);
//   - planbus.session.reset: a session's skills back to healthy, and its
//     state cleared on request;
//   - planbus.skills: the advertised skills with their health in a
//     session;
//   - planbus.agent.start, planbus.agent.stop, planbus.agent.status
//     (agent_endpoints.go): a session's GOAP agent.
//   - planbus.guide.turn (guide.go, DecodeGuideTurn): one turn of a guided
//     session, played on Config.Templates (templates.GuideTurn) against
//     the session's state in KV planbus-guides, written with
//     compare-and-set so that any planner answers any turn; each
//     transition is a guide.* event on the session's events.
//
// # Generators
//
// A Generator makes one plan from a GenInput: the request, the attempt,
// the disabled skills, the last plan and its execution result, the
// session's state, the skill manifests with their health, and the
// generation's budgets. One per request kind:
//   - plan: the request's own plan (kind plan runs once);
//   - external: asks the NATS subject the request names (under planners.>
//     when authorization is on) with an ExternalRequest, and takes the Plan
//     JSON it answers (generate.go);
//   - htn: the first plan of the InductorHtn domain (a file in
//     Config.DomainsDir or inline) for the goal, with the session's facts
//     added and operators whose skill is disabled or unserved refused, so
//     the search backtracks (generate.go, internal/htn);
//   - goap: A* over a GOAP domain from the session state with the
//     request's facts over it, towards the request's goal or the one the
//     arbiter finds most useful; actions whose skill is disabled or
//     unserved are left out (goap.go, internal/goap);
//   - template: the template the request names, or the best match of its
//     text, from Config.Templates; a replan takes the template the failed
//     step falls back to (template.go, internal/templates).
//
// A GenError says why a generation failed; one of category timeout,
// network or transient uses an attempt and the loop tries again, any
// other ends the loop at once.
//
// # The loop
//
// The loop (loop.go) stores every step in the KV bucket planbus-requests
// with compare-and-set before acting on it, and acts idempotently (plans
// published as <requestId>-<attempt>), so a planner killed mid-loop is
// replaced by another without losing or repeating an attempt. After a
// failed execution that can be replanned it generates again with the
// failed skills and the session's permanently failed ones disabled, up to
// the request's maxAttempts (DefaultMaxAttempts); then it publishes a
// fallback outcome, a text from Config.FallbackTemplates. A cancelled
// request ends with status cancelled, neither replanned nor fallen back.
// A replan keeps finished work (reuse.go): tools identical to ones that
// succeeded in earlier attempts take those results instead of running.
// store.go keeps a loop state within the store's value limit.
//
// # Agents
//
// A GOAP agent (agent.go: its decisions; agent_service.go: the effect
// shell) pursues a domain's goals in one session until it is stopped or
// no goal is left: it perceives the session state through the shared
// consumer planner-sessions on the sessions bucket, decides with a
// goap.Arbiter, runs its plan one step (a plan of one tool) at a time with
// inputs rendered from the live state, and monitors every result and
// change with a goap.Tracker. Its state is one document per session in
// planbus-agents, stored with compare-and-set before it is acted on, so
// another planner resumes it where it was.
//
// # Budgets
//
// Generations run within budgets (budget.go; Config: memory and nodes per
// kind, GenerationTimeout) through a gate that bounds how many run at once
// and the memory they may hold together; a request may lower its budgets
// (Budget), never raise them. Running out of one is a permanent failure
// with a code naming it (CodeHTNMemoryBudget and the others). Every
// message has a delivery limit past which it takes a terminal path (an
// outcome, or a logged and counted drop).
package planner

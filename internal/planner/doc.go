// Package planner is the planner service (Service: New, Run, Ready): it
// takes plan requests, produces Plan JSON with one of its generators,
// publishes the plans for the dispatchers, and owns each request's bounded
// replan loop.
//
// # Endpoints
//
// The micro service planbus-planner (endpoints.go) answers:
//   - planbus.plan.request: a request (request.Request, request.Decode;
//     schemas/plan-request.schema.json) is checked — its size, the schema,
//     budgets no higher than this planner's, then what its kind needs —
//     and queued on the REQUESTS stream before the reply says accepted; a
//     refused one gets a reply naming the field (request.Error) and nothing
//     is published;
//   - planbus.plan.cancel (cancel.go, request.DecodeCancel): a request, or the
//     request a plan belongs to, ends cancelled: at once when no plan runs;
//     through a cancel mark in the loop's state and a durable command to
//     the dispatchers when one does;
//   - planbus.plan.list (list.go, request.DecodeList): the most recently accepted
//     requests with their status, filtered by status and session;
//   - planbus.plan.approve (approve.go, request.DecodeApprove): a tool waiting for
//     approval in a request's running plan is approved or rejected,
//     through a durable command to the dispatchers, as cancels go; a tool
//     that does not exist or is not waiting is refused (NOT_FOUND,
//     NOT_WAITING);
//   - planbus.session.reset: a session's skills back to healthy, and its
//     state cleared on request;
//   - planbus.skills: the advertised skills with their health in a
//     session;
//   - planbus.agent.start, planbus.agent.stop, planbus.agent.status: a
//     session's GOAP agent (internal/agent);
//   - planbus.guide.turn: one turn of a guided session, played on
//     Config.Templates (internal/guide).
//
// # Generators
//
// Each request kind has its Generator (internal/generator), which makes
// one plan from the request, the attempt, the disabled skills, the last
// plan and its result, the session's state and the skills with their
// health. A generator.Error says why a generation failed; one of
// category timeout, network or transient uses an attempt and the loop
// tries again, any other ends the loop at once.
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
// A request of kind goap with goap.agent starts the session's GOAP agent
// (internal/agent) instead of a loop; the planner hands it the messages
// that drive it and answers its endpoints through it.
//
// # Budgets
//
// Generations run within budgets (Config: memory and nodes per kind;
// generator.GenerationTimeout) through gates (generator.Gate) that bound
// how many run at once and the memory they may hold together; a request
// may lower its budgets, never raise them (budget.go). Running out of one
// is a permanent failure with a code naming it. Every message has a
// delivery limit past which it takes a terminal path (an outcome, or a
// logged and counted drop).
package planner

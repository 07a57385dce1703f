// Package planner is the planner service: it takes plan requests on
// planbus.plan.request, produces Plan JSON with one of its generators
// (a given plan, an external planner asked over NATS, the HTN planner),
// publishes the plans for dispatchers, and owns each request's bounded
// replan loop (seed 003 §5): after a failed execution that can be replanned
// it generates again with the failed skills disabled, up to maxAttempts,
// and then publishes a fallback outcome. The loop's state lives in the KV
// bucket planbus-requests, so a planner killed mid-loop is replaced by
// another without losing the request.
//
// It serves the client endpoints besides planbus.plan.request:
// planbus.plan.cancel stops a request (cancel.go: at once when no plan
// runs; through a durable command to the dispatchers, and a mark in the
// loop's state, when one does), planbus.plan.list lists recent requests
// (list.go), planbus.session.reset and planbus.skills.
//
// Generations run within budgets (Config: memory and nodes per kind, the
// 5 s time budget) through a gate that bounds how many run at once and
// the memory they may hold together; running out of a budget is a
// permanent failure with a code naming it. Every message has a delivery
// limit past which it takes a terminal path (an outcome, or a logged and
// counted drop), and a loop state never outgrows the store.
package planner

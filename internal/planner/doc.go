// Package planner is the planner service: it takes plan requests on
// planbus.plan.request, produces Plan JSON with one of its generators
// (a given plan, an external planner asked over NATS, the HTN planner),
// publishes the plans for dispatchers, and owns each request's bounded
// replan loop (seed 003 §5): after a failed execution that can be replanned
// it generates again with the failed skills disabled, up to maxAttempts,
// and then publishes a fallback outcome. The loop's state lives in the KV
// bucket planbus-requests, so a planner killed mid-loop is replaced by
// another without losing the request.
package planner

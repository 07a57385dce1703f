// Package worker serves skills (package skill) to planbus on a NATS
// connection, with the lifecycle of planbus's own tool workers: for each
// skill it advertises the manifest in the KV bucket planbus-skills and
// pulls calls from the skill's durable consumer skill-<name> on the stream
// PLANBUS_TOOLS, which every worker of that skill shares, so starting
// another worker process adds capacity.
//
//	nc, err := nats.Connect(url) // with authorization on: the worker role's nkey and worker.RoleInbox()
//	w, err := worker.New(nc, worker.Config{Skills: []skill.Skill{wordcount}}, worker.WithLogger(log))
//	err = w.Run(ctx) // serves until ctx ends, then drains
//
// Each call runs with a deadline (its timeoutMs) under panic recovery and
// with its input checked against the skill's input schema; while it runs
// the worker tells JetStream it is in progress every AckWait/3, so a slow
// call is not redelivered but a call whose worker died is. The result is
// published, and acknowledged by JetStream, before the call's message is
// acknowledged: a worker killed at any moment loses no result, and a call
// may run again only if its worker died before reporting it (at-least-once;
// the idempotency key planId/toolId/attempt is the same for every
// delivery). A call delivered more than MaxDeliver times is reported
// failed with WORKER_CRASH without running. Results that finish while
// many of the worker's are in flight are stored together, each still its
// own message, as one atomic batch (nats-server 2.12+), which a server
// synced always flushes to disk once.
//
// Calls carry a result token that the worker echoes and a cancel digest:
// a cancel on planbus.cancel.<planId> whose token matches the digest stops
// the plan's running calls (their context ends) and drops its calls that
// arrive later; forged cancels stop nothing. Handlers never see either.
//
// The worker registers the NATS micro service planbus-toolworker: `nats
// micro stats planbus-toolworker` shows per-skill call counts, and
// planbus.invoke.<skill> runs a skill directly, outside any plan.
//
// On shutdown (ctx ends) the worker stops pulling, lets running calls
// finish for up to DrainTimeout, and hands the rest back for another
// worker.
package worker

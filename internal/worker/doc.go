// Package worker runs tool calls: for each skill it serves it pulls calls
// from the skill's durable consumer, which every worker of that skill
// shares, so starting another worker process adds capacity.
//
// Each call runs with a deadline (its timeoutMs) under panic recovery; while
// it runs the worker tells JetStream it is in progress, so a slow call is
// not redelivered but a call whose worker died is. The result is published,
// and acknowledged by JetStream, before the call's message is acknowledged:
// a worker killed at any moment loses no result, and a call may run again
// only if its worker died before reporting it (at-least-once; the
// idempotency key planId/toolId/attempt is the same for every delivery).
package worker

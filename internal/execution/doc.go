// Package execution is the state machine of one plan's run: which tools
// are released and when (as soon as their dependencies finish, within the
// plan's concurrency), verification gates, retries with exponential
// backoff, fallbacks, failure semantics, plan timeouts, cancels, tools
// that wait for a person's approval, earlier results a replan's tools
// reuse instead of running, and the execution result. It is pure: it is
// given the time and the events (tool results, due timers, a cancel, an
// approval) and the skill health it needs, and answers with the new state
// and the effects to carry out (calls to release with their timeouts,
// timers to set, events, the final result). The dispatcher persists the
// State in KV and performs the effects; an in-process executor drives the
// same machine with goroutines as a baseline.
//
// An Engine is not safe for concurrent use.
package execution

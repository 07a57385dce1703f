// Package execution is the state machine of one plan's run (seed 003 §4,
// §7): which tools are released and when, retries with exponential backoff,
// failure semantics, plan timeouts and the execution result. It is pure: it
// is given the time and the events (tool results, due timers) and answers
// with the new state and the effects to carry out (calls to release, timers
// to set, events, the final result). The dispatcher persists the State in
// KV and performs the effects; an in-process executor drives the same
// machine with goroutines as a baseline.
//
// An Engine is not safe for concurrent use.
package execution

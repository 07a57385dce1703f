// Package goap is goal-oriented action planning (seed 002): a domain of
// facts, actions and goals, an A* planner that finds the cheapest sequence
// of actions reaching a goal, a goal arbiter with hysteresis, preemption and
// cooldowns, and a tracker with the executor's rules (failure threshold,
// monitoring, replanning). See docs/goap.md for the domain format.
//
// The package is pure: no I/O, no goroutines, no clock (times are passed
// in), no global state. A *Domain is immutable and safe for concurrent use;
// an Arbiter or a Tracker belongs to one caller at a time.
package goap

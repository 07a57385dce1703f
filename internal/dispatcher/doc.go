// Package dispatcher executes plans: it consumes plans, tool results and
// due timers from JetStream, drives each plan's execution.Engine, keeps the
// engine's state in KV with compare-and-set, and performs the effects —
// tool calls on planbus.tools.<skill>, durable timers, events, the
// execution result and the signed cancels that stop workers' calls. The
// cancels planners ask for arrive as timers of kind cancel, so they wait
// for a dispatcher as durably as any timer.
//
// Any number of dispatchers can run: they share three durable consumers,
// and every state change is a compare-and-set on the plan's KV entry, so
// two dispatchers never both apply a change. Effects are published after
// the state that implies them is stored and before the message that caused
// them is acknowledged; a dispatcher that dies in between leaves the
// message to be redelivered, and whoever handles it again republishes the
// state's outstanding effects under the same message ids, which JetStream
// de-duplicates. Within one process, all messages of a plan go to the same
// shard goroutine, which batches them into one state write.
package dispatcher

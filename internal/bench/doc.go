// Package bench is the DAG benchmark behind `planner bench` and `make
// bench`.
//
// A Workload is one system-neutral JSON file (tools, dependencies, sleeps,
// a concurrency bound and, for many-plan workloads, a number of
// instances), the same files peer systems run. Builtin returns the ones
// embedded from workloads/; Load reads a directory of others. Workload.Plan
// turns one into Plan JSON of echo (no-op) and sleep calls.
//
// Measure runs a workload through a Runner, once to warm up and then a
// number of times, and keeps the makespans and plan latencies. There are
// two Runners: System, the whole system over NATS (plans published,
// execution results awaited on one subscription), and FloorRunner, the
// floor: the same execution engine driven by goroutines and channels with
// no bus (RunFloor). Report prints a Markdown table of both with the ratio
// of their median makespans; ms per critical-path step, tools/s, plans/s
// and latency percentiles come from Result. Nothing here asserts a speed.
package bench

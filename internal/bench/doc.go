// Package bench is the DAG benchmark behind `planner bench` and `make
// bench`.
//
// A Workload is one system-neutral JSON file (tools, dependencies, sleeps,
// a concurrency bound and, for many-plan workloads, a number of
// instances), the same files peer systems run. Builtin returns the ones
// embedded from workloads/; Load reads a directory of others; Generate
// makes the scaling workloads (chain-N, fanout-N, many-plans-N) on the
// fly. Workload.Plan turns one into Plan JSON of echo (no-op) and sleep
// calls.
//
// Measure runs a workload through a Runner, once to warm up and then a
// number of times, and keeps the makespans and plan latencies, and, with
// the clocks of its Options, the whole system's CPU time (SelfCPU, and
// Procs.CPU for components in processes of their own) and the
// dispatchers' compare-and-set conflicts (Conflicts, from their micro
// service stats). There are two Runners: System, the whole system over
// NATS (plans published, execution results awaited on one subscription),
// and FloorRunner, the engine floor: the same execution engine driven by
// goroutines and channels with no bus (RunFloor).
//
// MeasureBus measures the bus floor on the server the workloads use:
// three server trips (publish+ack, KV compare-and-set, work-queue
// delivery) and two bus-only programs doing a chain step's and a
// fan-out's messages with no planbus code. Report, ReportBus and
// ReportRatios print Markdown tables; the ratios are cost ratios, planbus
// ÷ bus floor. Soak submits plans at a steady rate and samples RSS. Nothing
// here asserts a speed.
package bench

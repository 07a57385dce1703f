// Package metrics holds planbus's Prometheus metrics: one Registry per
// process, with the Go and process collectors, and the metric families of
// each component (Dispatcher, Planner, Worker) created the first time a
// component of that kind asks for them, so several components of a kind in
// one process (a node) add to the same series. The skill collector
// (AddSkillSource) reads each skill's consumer and the tool workers that
// serve it when Prometheus scrapes.
//
// Every method is safe on a nil receiver and then does nothing: a
// component given no Registry keeps no metrics. Labels are bounded: skill
// names, states, kinds and components, never a plan or request id.
//
// docs/observability.md lists the metrics; Names returns them, so the
// dashboard and the alert rules in deploy/ are checked against the code.
package metrics

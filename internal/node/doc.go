// Package node runs planbus in one process: an embedded JetStream server
// (unless an external NATS URL is configured), planner services,
// dispatchers and tool workers, each on its own connection as if it were
// its own process, connected with its role's seed when authorization is on.
// It is the embedded default of `planner run` and `planner serve`, and the
// harness of the integration tests (which stop or kill single components
// to play a crash).
//
// Start brings a node up and returns once every component is ready;
// AddPlanner, AddDispatcher, AddWorker and Add start more; Stop stops them
// all gracefully, then the embedded server. A component that dies on its
// own after it was ready does not take the others with it: the node
// reports it through Done and Err, and its owner decides (`planner serve`
// logs the error, stops the node and exits 1).
package node

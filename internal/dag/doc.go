// Package dag holds the pure graph algorithms of plan execution: validation
// of a tool dependency graph (duplicate or empty ids, unknown dependencies,
// self-dependencies, cycles reported with their path), Kahn's topological
// order, incremental ready sets, transitive dependents and the critical
// path (the heaviest chain of dependencies).
//
// Nodes are addressed by their index in the slice given to New; the order of
// that slice is the document order, and every result of this package is
// deterministic with respect to it. The package does no I/O and starts no
// goroutines; a Graph is immutable after New and safe for concurrent use,
// while a Tracker belongs to one goroutine.
package dag

// Package planbus holds the messages that cross the bus between planbus's
// components and the programs people write for it: tool calls and their
// results (what a worker receives and publishes), skill manifests (what it
// advertises), events, execution results of plans, and the outcomes and
// replies of plan requests. Their JSON is
// the wire format; the JSON Schemas in schemas/ say the same.
//
// The packages people build on use these types: skill (tool handlers),
// worker (serving skills) and client (submitting and watching requests).
package planbus

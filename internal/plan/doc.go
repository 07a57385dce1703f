// Package plan defines the messages of plan execution — Plan JSON, tool
// calls, tool results, execution results and events — as Go types that
// mirror the JSON Schemas in schemas/, and decodes plans with every check
// the dispatcher relies on: the schema, the dependency graph and the input
// references.
//
// # Input references
//
// A tool's input may take a dependency's output: any JSON object in the
// input whose only member is "$ref" is replaced, when the tool is released,
// by that output. The value names a tool and optionally a JSON pointer
// (RFC 6901) into its output:
//
//	{"$ref": "fetch"}              the whole output of tool "fetch"
//	{"$ref": "fetch#/body/items"}  the member body.items of that output
//
// The referenced tool must be one the tool depends on, directly or through
// other tools, so its output exists when the tool is released. When it was
// optional and failed, or the pointer names nothing in its output, the
// reference becomes null.
//
// # Verification gates
//
// A tool's "verify" is a gate (package gate) that the execution engine
// checks against the output of each of its attempts that succeeds; its
// fallback has a gate of its own. Decode compiles them, and takes a gate
// from metadata.verify for a tool without a verify, where plans carried
// gates before.
//
// # Defaults
//
// Decode gives absent fields their defaults and remembers which of a
// tool's timeoutMs and retryPolicy the document left out (Tool.Defaults),
// so the dispatcher can give those the skill manifest's. Encoding a Tool
// leaves them out again while they keep their default values, so a plan
// decoded and encoded again, as the planner and the client do, still
// takes its skills' defaults.
package plan

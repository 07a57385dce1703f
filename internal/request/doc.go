// Package request is the plan request (schemas/plan-request.schema.json)
// as the planner and its agents read it: Request and its parts, Decode,
// which checks a document against its schema and fills the defaults, and
// Error, which names the field at fault, with Reject and RejectCode, the
// refusals an endpoint answers with.
// It does no I/O; every package that takes requests shares its types.
package request

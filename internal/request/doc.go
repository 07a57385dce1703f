// Package request holds what clients send the planner's endpoints: the
// plan request (schemas/plan-request.schema.json) as the planner and its
// agents read it, Request and its parts, with Decode, which checks a
// document against its schema and fills the defaults; the control
// requests (DecodeCancel, DecodeApprove, DecodeList); and Error, which
// names the field at fault, with Reject and RejectCode, the refusals an
// endpoint answers with. It does no I/O: every package that takes
// requests shares its types.
package request

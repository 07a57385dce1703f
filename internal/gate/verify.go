package gate

import "github.com/planbus/planbus"

// CodeVerifyFailed is the error code of a result whose output its tool's
// gate refused.
const CodeVerifyFailed = planbus.CodeVerifyFailed

// VerifyResult applies a tool's gate to one of its results: a succeeded
// result whose output the gate refuses comes back failed, with code
// VERIFY_FAILED, category transient (so the tool's retry policy applies)
// and the output kept; any other result comes back as it is. ok reports
// whether the result was left alone. The gate is deterministic, so a
// result applied again (redelivered, or read back to rebuild a plan's
// state) gets the same verdict.
func VerifyResult(r planbus.ToolResult, g *Gate) (out planbus.ToolResult, ok bool) {
	if g == nil || r.State != planbus.ToolSucceeded {
		return r, true
	}
	pass, why := g.Check(r.Output)
	if pass {
		return r, true
	}
	r.State = planbus.ToolFailed
	r.Error = &planbus.ErrorInfo{Code: CodeVerifyFailed, Category: planbus.CategoryTransient, Message: "verification failed: " + why}
	return r, false
}

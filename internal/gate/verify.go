package gate

import "github.com/planbus/planbus"

// CodeVerifyFailed is the error code of a result whose output its tool's
// gate refused.
const CodeVerifyFailed = planbus.CodeVerifyFailed

// VerifyResult applies a tool's gate to one of its results within a
// budget of steps (see CheckWithin): a succeeded result whose output the
// gate refuses comes back failed, with code VERIFY_FAILED, category
// transient (so the tool's retry policy applies) and the output kept; one
// whose check used up the budget comes back failed the same way but with
// category permanent, since checking it again would stop again; any other
// result comes back as it is. ok reports whether the result was left
// alone; used is the steps the check took. The verdict depends on the
// gate, the output and steps alone, so a result applied again
// (redelivered) gets the same one.
func VerifyResult(r planbus.ToolResult, g *Gate, steps int64) (out planbus.ToolResult, ok bool, used int64) {
	if g == nil || r.State != planbus.ToolSucceeded {
		return r, true, 0
	}
	ck, pass, why, err := g.checkWithin(r.Output, steps)
	if ck != nil {
		used = ck.meter.Used()
	}
	if pass {
		return r, true, used
	}
	category := planbus.CategoryTransient
	if err != nil {
		category = planbus.CategoryPermanent
	}
	r.State = planbus.ToolFailed
	r.Error = &planbus.ErrorInfo{Code: CodeVerifyFailed, Category: category, Message: "verification failed: " + why}
	return r, false, used
}

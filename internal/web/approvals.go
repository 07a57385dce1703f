package web

import (
	"context"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

// ClientApprovals decides waiting tools through the planner's
// planbus.plan.approve endpoint, as `planner approve` does; it needs no
// right beyond the client role's.
type ClientApprovals struct{ C *client.Client }

// Waiting reports whether the plan's tool waits for a person's decision.
func (a ClientApprovals) Waiting(ctx context.Context, planID, toolID string) (bool, error) {
	st, err := a.C.Status(ctx, planID)
	if err != nil || st.Plan == nil {
		return false, err
	}
	for _, t := range st.Plan.Tools {
		if t.ToolID == toolID {
			return t.State == planbus.ToolWaitingApproval, nil
		}
	}
	return false, nil
}

// Decide approves or rejects the tool.
func (a ClientApprovals) Decide(ctx context.Context, planID, toolID string, approve bool, reason string) error {
	var err error
	if approve {
		_, err = a.C.Approve(ctx, planID, toolID, reason)
	} else {
		_, err = a.C.Reject(ctx, planID, toolID, reason)
	}
	return err
}

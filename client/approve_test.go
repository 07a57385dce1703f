package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
)

// Status shows a tool waiting for approval with its prompt; Reject fails
// it, and the request with it; decisions on what does not wait, or does
// not exist, are refused.
func TestRejectAWaitingTool(t *testing.T) {
	c := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	acc, err := c.SubmitPlanJSON(ctx, []byte(`{"planId": "gate", "tools": [
		{"toolId": "ask", "skill": "echo", "approval": {"prompt": "Send the invoices?"}},
		{"toolId": "send", "skill": "echo", "dependencies": ["ask"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := c.Status(ctx, acc.RequestID)
		if err == nil && st.Plan != nil && st.Plan.Tools[0].State == planbus.ToolWaitingApproval {
			if st.Plan.Tools[0].Prompt != "Send the invoices?" {
				t.Errorf("prompt %q", st.Plan.Tools[0].Prompt)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the tool never waited for approval")
		case <-time.After(10 * time.Millisecond):
		}
	}
	var rej *client.RejectedError
	if _, err := c.Approve(ctx, acc.RequestID, "send", ""); !errors.As(err, &rej) || rej.Reply.Error.Code != planbus.CodeNotWaiting {
		t.Errorf("approve a tool that is not waiting: %v, want NOT_WAITING", err)
	}
	if _, err := c.Approve(ctx, "ghost", "ask", ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("approve in no request: %v, want ErrNotFound", err)
	}
	if _, err := c.Reject(ctx, acc.RequestID, "ask", strings.Repeat("x", 1025)); !errors.As(err, &rej) ||
		rej.Reply.Error.Code != planbus.CodeInvalidRequest || rej.Reply.Error.Field != "/reason" {
		t.Errorf("a reason too long: %v, want INVALID_REQUEST at /reason", err)
	}
	reply, err := c.Reject(ctx, "gate", "ask", "not this month")
	if err != nil || reply.Status != planbus.ApproveRejected || reply.PlanID != "gate-1" {
		t.Fatalf("reject: %+v, %v", reply, err)
	}
	out, err := c.Await(ctx, acc.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != planbus.StatusFailed || out.Error.Code != planbus.CodeRejected || out.Execution.Tools[1].State != planbus.ToolSkipped {
		t.Errorf("outcome %s %+v, tools %+v", out.Status, out.Error, out.Execution.Tools)
	}
}

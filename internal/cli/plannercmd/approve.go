package plannercmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/plan"
)

const approveUsage = `Usage: planner approve --nats-url URL [flags] ID TOOL

Approves tool TOOL of request ID's running plan (or of plan ID), which waits
for approval (state waiting_approval; 'planner watch ID' shows the wait and
its prompt): a dispatcher releases it. With --reject the tool fails instead,
with code REJECTED, without running: a required tool fails the plan and the
request (no replan, no fallback), an optional one lets its dependents run.
Prints the planner's answer. Exits 0 when the decision is recorded, 1 when
nothing has the id or the tool, when the tool is not waiting for approval
(no approval step, not ready yet, decided on already, plan ended) or the
planner cannot be reached, 2 on bad usage.`

func plannerApprove(ctx context.Context, args []string, io cli.IO) int {
	var reject bool
	var reason string
	v, code, ok := parseAnswerVerb("planner approve", approveUsage, args, io, func(f *cli.Flags) {
		f.Bool(&reject, "reject", "", false, "reject the tool: it fails with code REJECTED without running")
		f.String(&reason, "reason", "", "", "why, said in the events and a rejection's error (at most 1024 characters)")
	})
	if !ok {
		return code
	}
	f := v.f
	if f.NArg() != 2 || !plan.ValidID(f.Arg(0)) {
		fmt.Fprintln(io.Stderr, "planner approve: want a request or plan id and a tool id"+f.LateFlags())
		return cli.ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	decide := cl.Approve
	if reject {
		decide = cl.Reject
	}
	reply, err := decide(ctx, f.Arg(0), f.Arg(1), reason)
	var rej *client.RejectedError
	switch {
	case errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeInvalidRequest:
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return cli.ExitUsage
	case errors.As(err, &rej):
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return cli.ExitFailed
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	return v.print(io, reply, func(w writer) { fmt.Fprintln(w, reply.Message) })
}

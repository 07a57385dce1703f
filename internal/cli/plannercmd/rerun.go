package plannercmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/plan"
)

const rerunUsage = `Usage: planner rerun --nats-url URL [flags] ID

Runs request ID (or a plan run on its own, by its id) again under a new
request id, and prints that id; 'planner watch NEW' follows it. The new
request's metadata names ID under rerunOf.

With --failed-only, only the tools of ID's latest plan that did not
succeed run, as a plan of their own: the tools that succeeded do not run
again (a payment is not paid twice), and inputs that referred to them take
their outputs. The plan must have ended.

Exits 0 once the planner has accepted the new request, 1 when nothing has
the id, the plan has not ended or every tool of it succeeded (with
--failed-only), or the planner cannot be reached, 2 on bad usage.`

func plannerRerun(ctx context.Context, args []string, io cli.IO) int {
	var o client.RerunOptions
	v, code, ok := parseAnswerVerbAnyOrder("planner rerun", rerunUsage, args, io, func(f *cli.Flags) {
		f.Bool(&o.FailedOnly, "failed-only", "", false, "run only the tools of the latest plan that did not succeed, with the outputs of those that did")
		f.String(&o.RequestID, "id", "", "", "the new request's id (default: a new one)")
	})
	if !ok {
		return code
	}
	if v.f.NArg() != 1 || !plan.ValidID(v.f.Arg(0)) {
		fmt.Fprintln(io.Stderr, "planner rerun: want one request or plan id")
		return cli.ExitUsage
	}
	if o.RequestID != "" && !plan.ValidID(o.RequestID) {
		fmt.Fprintf(io.Stderr, "planner rerun: --id %q: want 1 to 128 letters, digits, '_' or '-'\n", o.RequestID)
		return cli.ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner rerun: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	acc, err := cl.Rerun(ctx, v.f.Arg(0), o)
	var rej *client.RejectedError
	switch {
	case errors.As(err, &rej):
		fmt.Fprintf(io.Stderr, "planner rerun: %v\n", err)
		return cli.ExitUsage
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner rerun: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	return v.print(io, acc, func(w writer) { fmt.Fprintln(w, acc.RequestID) })
}

package plannercmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

const submitUsage = `Usage: planner submit --nats-url URL [flags] FILE

Sends FILE ('-' for stdin) to the planner and does not wait for it to run:
a plan request ({"kind": "plan" | "external" | "htn" | "goap" |
"template", ...}) or a bare Plan JSON, which goes as a request of kind plan
and runs as <requestId>-1 (its requestId being the plan's requestId, else
its planId, else a new one). Prints the requestId on stdout; a request
whose id was accepted before runs nothing new, and stderr says
"duplicate:" (the first one's outcome is the request's). Exits 0 when the
planner accepted it (a duplicate included), 2 when FILE is not valid or the planner refused
it (the reason on stderr), 1 when the planner could not be reached or
could not store it just then (UNAVAILABLE: send it again). Follow it with
'planner watch ID', stop it with 'planner cancel ID'.`

func plannerSubmit(ctx context.Context, args []string, io cli.IO) int {
	var c common
	f := cli.NewFlags("planner submit", io.Stderr, io.Env, submitUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	log, code, ok := clientFlags(f, &c, args, io, "planner submit")
	if !ok {
		return code
	}
	if f.NArg() != 1 {
		fmt.Fprintln(io.Stderr, "planner submit: want exactly one FILE (or - for stdin)"+f.LateFlags())
		return cli.ExitUsage
	}
	name := f.Arg(0)
	doc, err := readInput(name, io.Stdin)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %v\n", err)
		return cli.ExitUsage
	}
	// Checked here first, so that a bad file is refused as run refuses it,
	// without a round trip.
	bare := !isRequest(doc)
	if bare {
		p, err := plan.Decode(doc)
		if err == nil && len(p.Tools) == 0 {
			err = errors.New("at /tools: the plan has no tools: there is nothing to run")
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner submit: %s: %v\n", name, err)
			return cli.ExitUsage
		}
	} else if _, err := request.Decode(doc); err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %s: %v\n", name, err)
		return cli.ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	var acc *planbus.Accepted
	if bare {
		acc, err = cl.SubmitPlanJSON(ctx, doc)
	} else {
		acc, err = cl.SubmitRequest(ctx, doc)
	}
	if refusedInput(err) {
		fmt.Fprintf(io.Stderr, "planner submit: %s: %v\n", name, err)
		return cli.ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %v\n", unavailable(err))
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	fmt.Fprintln(io.Stdout, acc.RequestID)
	if acc.Duplicate {
		fmt.Fprintf(io.Stderr, "planner submit: duplicate: request %s was accepted before under this id; nothing new runs, and its outcome is the first one's (planner watch %s)\n",
			acc.RequestID, acc.RequestID)
	}
	return cli.ExitOK
}

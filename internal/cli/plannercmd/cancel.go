package plannercmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
)

const cancelUsage = `Usage: planner cancel --nats-url URL [flags] ID

Cancels a request, by its id or the id of one of its plans, or a plan
published on its own. A running plan ends in state cancelled: its running
calls are stopped, its tools not yet released skipped; the request ends
with outcome status cancelled, without replan or fallback. A request still
queued or generating ends cancelled at once. Prints the planner's answer.
Exits 0 when the request is cancelled or being cancelled, or had already
ended (nothing changes; the answer says so), 1 when nothing has the id or
the planner cannot be reached, 2 on bad usage.`

func plannerCancel(ctx context.Context, args []string, io cli.IO) int {
	var reason string
	v, code, ok := parseAnswerVerb("planner cancel", cancelUsage, args, io, func(f *cli.Flags) {
		f.String(&reason, "reason", "", "", "why, said in the outcome and the events (at most 1024 characters)")
	})
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := v.dialForID(ctx, io, "request or plan id")
	if !ok {
		return code
	}
	defer closeConn()
	reply, err := cl.Cancel(ctx, id, reason)
	var rej *client.RejectedError
	switch {
	case errors.Is(err, client.ErrNotFound):
		hint := ""
		if ag, aerr := cl.AgentStatus(ctx, id); aerr == nil && ag != nil && ag.AgentID != "" {
			// A GOAP agent is not a request: it stops rather than cancels.
			if ag.Status == planbus.AgentRunning {
				hint = fmt.Sprintf("; %s is the session of agent %s: stop it with 'planner agent stop --nats-url %s %s'",
					id, ag.AgentID, bus.RedactURL(v.c.Bus.URL), id)
			} else {
				hint = fmt.Sprintf("; %s is the session of agent %s, which has ended (%s)", id, ag.AgentID, ag.Status)
			}
		}
		fmt.Fprintf(io.Stderr, "planner cancel: %v%s\n", err, hint)
		return cli.ExitFailed
	case errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeInvalidRequest:
		fmt.Fprintf(io.Stderr, "planner cancel: %v\n", err)
		return cli.ExitUsage
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner cancel: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	return v.print(io, reply, func(w writer) { fmt.Fprintln(w, reply.Message) })
}

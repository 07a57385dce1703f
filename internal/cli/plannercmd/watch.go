package plannercmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/progress"
)

const watchUsage = `Usage: planner watch --nats-url URL [flags] ID

Attaches to a request (or a plan published on its own, or the GOAP agent
of the session ID), running or ended, and shows its progress as 'planner run' does: the events that already
happened (they are kept for an hour), then the ones to come, until it
ends. Then prints what run prints as the last line on stdout: the
request's outcome, or for a bare Plan JSON (planner submit FILE, planner
run) the plan's execution result. Exits as run does: 0 when it succeeded,
1 when it failed, timed out, fell back or was cancelled, or when nothing
has the id; 2 on bad usage.`

func plannerWatch(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var quiet, verbose bool
	var wait time.Duration
	f := cli.NewFlags("planner watch", io.Stderr, io.Env, watchUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.Bool(&quiet, "quiet", "", false, "no progress on stderr")
	f.Bool(&verbose, "v", "", false, "a progress line for every event, even for plans of more than 50 tools (which otherwise get one summary line)")
	f.Duration(&wait, "wait", "", 0, "how long to wait for the end (0: until it ends)")
	log, code, ok := clientFlags(f, &c, args, io, "planner watch")
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := c.dialForID(ctx, f, log, io, "planner watch", "request or plan id")
	if !ok {
		return code
	}
	defer closeConn()
	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	st, err := cl.Status(sctx, id)
	agentID := ""
	if errors.Is(err, client.ErrNotFound) {
		// A GOAP agent is not a request of the loop: follow the agent of
		// the session with this id.
		if ag, aerr := cl.AgentStatus(sctx, id); aerr == nil && ag != nil && ag.AgentID != "" {
			agentID, err = ag.AgentID, nil
		}
	}
	scancel()
	if err != nil {
		hint := ""
		if errors.Is(err, client.ErrNotFound) {
			hint = "; nor a session with an agent (an agent is watched by its session's id)"
		}
		fmt.Fprintf(io.Stderr, "planner watch: %v%s\n", err, hint)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	var onEvent func(planbus.Event)
	endProgress := func() {}
	if !quiet {
		pr := progress.New(io.Stderr, verbose)
		defer pr.Close()
		onEvent, endProgress = pr.Event, pr.Close
	}
	wctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	if agentID != "" {
		o, err := cl.Watch(wctx, agentID, onEvent)
		endProgress()
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner watch: %v\n", err)
			return cli.CtxExit(ctx, cli.ExitFailed)
		}
		return printOutcome("planner watch", o, io)
	}
	if st.Request == nil {
		res, err := cl.WatchPlan(wctx, id, onEvent)
		endProgress()
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner watch: %v%s\n", err, goesOnAfterWatch(ctx, &c, id))
			return cli.CtxExit(ctx, cli.ExitFailed)
		}
		return printExecution("planner watch", res, io)
	}
	o, err := cl.Watch(wctx, st.Request.RequestID, onEvent)
	endProgress()
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner watch: %v%s\n", err, goesOnAfterWatch(ctx, &c, st.Request.RequestID))
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	if st.Request.BarePlan {
		return printPlanOutcome("planner watch", o, io)
	}
	return printOutcome("planner watch", o, io)
}

// goesOnAfterWatch is what an interrupted watch (ctx is the command's,
// ended by the interrupt) adds to its error: what it watched goes on.
func goesOnAfterWatch(ctx context.Context, c *common, id string) string {
	if ctx.Err() == nil {
		return ""
	}
	u := bus.RedactURL(c.Bus.URL)
	return fmt.Sprintf("\nplanner watch: stopped watching; %s goes on running on %s (stop it with 'planner cancel --nats-url %s %s')", id, u, u, id)
}

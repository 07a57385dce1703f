package plannercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
)

const agentUsage = `Usage: planner agent start|stop|status --nats-url URL [flags] ...

  agent start [--session S] [--id ID] --domain NAME | FILE
      starts the session's GOAP agent with the planner's domain NAME
      (<NAME>.goap.json in its --domains), or with FILE ('-' for stdin), a
      plan request of kind goap ({"sessionId": "s", "goap": {"domain":
      "camp"}}; goap.agent is implied). Prints the agent's id; follow the
      agent with 'planner watch SESSION'.
  agent stop [--reason TEXT] SESSION
      stops the session's agent; the plan it runs is cancelled.
  agent status [--json] SESSION
      shows the session's agent: its goal and step, each goal's utility,
      validity and cooldown in the session state now, and per goal the
      plans made, reached, failed, replanned and preempted (also shown by
      'planner status SESSION').

An agent pursues its domain's goals in the session state until it is
stopped or no goal is left: the most useful goal first, kept against one
less than 1.2 times as useful, interrupted by one more useful by more than
30; a goal whose plan fails cools down. Change its world with the remember
skill (or, without --auth, 'nats kv put planbus-sessions SESSION ...').
Exits 0 on success, 1 when the planner could not be reached or has no
agent in the session, 2 on bad usage or a request the planner refused.`

func plannerAgent(ctx context.Context, args []string, io cli.IO) int {
	if len(args) == 0 {
		fmt.Fprintln(io.Stderr, agentUsage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "start":
		return agentStart(ctx, args[1:], io)
	case "stop":
		return agentStop(ctx, args[1:], io)
	case "status":
		return agentStatus(ctx, args[1:], io)
	case "help", "-h", "--help", "-help":
		fmt.Fprintln(io.Stdout, agentUsage)
		return cli.ExitOK
	}
	fmt.Fprintf(io.Stderr, "planner agent: unknown command %q\n\n%s\n", args[0], agentUsage)
	return cli.ExitUsage
}

func agentStart(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var sessionID, id, domain string
	f := cli.NewFlags("planner agent start", io.Stderr, io.Env, agentUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.String(&sessionID, "session", "", "", "the agent's session (default: the request's, else default)")
	f.String(&id, "id", "", "", "the agent's id (default: the request's, else a new one)")
	f.String(&domain, "domain", "", "", "a GOAP domain of the planner's --domains directory")
	log, code, ok := clientFlags(f, &c, args, io, "planner agent start")
	if !ok {
		return code
	}
	var doc map[string]any
	switch {
	case domain != "" && f.NArg() == 0:
		doc = map[string]any{"goap": map[string]any{"domain": domain}}
	case domain == "" && f.NArg() == 1:
		data, err := readInput(f.Arg(0), io.Stdin)
		if err == nil {
			err = json.Unmarshal(data, &doc)
		}
		if err != nil || doc == nil {
			fmt.Fprintf(io.Stderr, "planner agent start: %s: want a plan request of kind goap (%v)\n", f.Arg(0), err)
			return cli.ExitUsage
		}
	default:
		fmt.Fprintln(io.Stderr, "planner agent start: want --domain NAME or one FILE")
		return cli.ExitUsage
	}
	if sessionID != "" {
		doc["sessionId"] = sessionID
	}
	if id != "" {
		doc["requestId"] = id
	}
	body, _ := json.Marshal(doc)
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner agent start: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	acc, err := cl.StartAgent(ctx, body)
	switch {
	case refusedInput(err):
		fmt.Fprintf(io.Stderr, "planner agent start: %v\n", err)
		return cli.ExitUsage
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner agent start: %v\n", unavailable(err))
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	fmt.Fprintln(io.Stdout, acc.RequestID)
	return cli.ExitOK
}

func agentStop(ctx context.Context, args []string, io cli.IO) int {
	var reason string
	v, code, ok := parseAnswerVerb("planner agent stop", agentUsage, args, io, func(f *cli.Flags) {
		f.String(&reason, "reason", "", "", "why, said in the events and the outcome (at most 1024 characters)")
	})
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := v.dialForID(ctx, io, "session id")
	if !ok {
		return code
	}
	defer closeConn()
	reply, err := cl.StopAgent(ctx, id, reason)
	if code, failed := agentErr(ctx, io, "planner agent stop", err); failed {
		return code
	}
	return v.print(io, reply, func(w writer) { fmt.Fprintln(w, reply.Message) })
}

func agentStatus(ctx context.Context, args []string, io cli.IO) int {
	v, code, ok := parseAnswerVerb("planner agent status", agentUsage, args, io, nil)
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := v.dialForID(ctx, io, "session id")
	if !ok {
		return code
	}
	defer closeConn()
	st, err := cl.AgentStatus(ctx, id)
	if code, failed := agentErr(ctx, io, "planner agent status", err); failed {
		return code
	}
	return v.print(io, st, func(w writer) { printAgent(w, st) })
}

// agentErr reports an agent endpoint's error and the exit code it means.
func agentErr(ctx context.Context, io cli.IO, cmd string, err error) (int, bool) {
	var rej *client.RejectedError
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, client.ErrNotFound):
		fmt.Fprintf(io.Stderr, "%s: %v\n", cmd, err)
		return cli.ExitFailed, true
	case errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeInvalidRequest:
		fmt.Fprintf(io.Stderr, "%s: %v\n", cmd, err)
		return cli.ExitUsage, true
	}
	fmt.Fprintf(io.Stderr, "%s: %v\n", cmd, err)
	return cli.CtxExit(ctx, cli.ExitFailed), true
}

// printAgent shows an agent: what it does, its goal report and its counts
// per goal.
func printAgent(w io.Writer, st *planbus.AgentStatus) {
	line := fmt.Sprintf("agent %s (session %s, domain %s): %s", st.AgentID, st.SessionID, st.Domain, st.Status)
	switch {
	case st.Goal != "" && len(st.Plan) > 0 && st.Next < len(st.Plan):
		line += fmt.Sprintf(", goal %s, step %d of %d (%s", st.Goal, st.Next+1, len(st.Plan), strings.Join(st.Plan, " → "))
		if st.PlanID != "" {
			line += ", plan " + st.PlanID
		}
		line += ")"
	case st.Goal != "":
		line += ", goal " + st.Goal
	case !st.WakeAt.IsZero():
		line += ", waiting until " + st.WakeAt.Local().Format(time.TimeOnly)
	}
	fmt.Fprintln(w, line)
	if st.Detail != "" {
		fmt.Fprintf(w, "  last: %s\n", st.Detail)
	}
	if st.Error != nil {
		fmt.Fprintf(w, "  %s: %s\n", st.Error.Code, st.Error.Message)
	}
	fmt.Fprintf(w, "  %d plan(s), session state revision %d, updated %s by %s\n", st.Plans, st.SessionRevision,
		st.UpdatedAt.Local().Format(time.DateTime), st.Planner)
	fmt.Fprint(w, st.Report)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  GOAL\tPLANS\tSUCCEEDED\tFAILED\tREPLANS\tPREEMPTIONS")
	for _, g := range st.Goals {
		s := g.Stats
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\n", g.Goal, s.Plans, s.Succeeded, s.Failed, s.Replans, s.Preemptions)
	}
	_ = tw.Flush()
}

// statusOfAgent prints the agent of session id for planner status; ok is
// false when the session has none (or none could be asked).
func statusOfAgent(ctx context.Context, conn *bus.Conn, io cli.IO, id string, asJSON bool) (int, bool) {
	cl, err := clientOn(conn)
	if err != nil {
		return 0, false
	}
	st, err := cl.AgentStatus(ctx, id)
	if errors.Is(err, client.ErrNotFound) {
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner status: agent of session %s: %v\n", id, err)
		return cli.ExitFailed, true
	}
	if asJSON {
		line, _ := jsonLine(st)
		fmt.Fprintln(io.Stdout, line)
	} else {
		printAgent(io.Stdout, st)
	}
	return cli.ExitOK, true
}

package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/planbus/planbus"
)

const skillsUsage = `Usage: planner skills --nats-url URL [flags]

Lists the skills the workers advertise, by name: version, health in the
session (--session, else the default one), consecutive failures and the
last error. A skill in permanentFailure is disabled for planning in that
session until 'planner reset SESSION'. --json prints the planner's answer,
{"sessionId": ..., "skills": [{"manifest": ..., "health": ...}]}.`

func plannerSkills(ctx context.Context, args []string, io IO) int {
	var c common
	var session string
	var asJSON bool
	f := newFlags("planner skills", io.Stderr, io.Env, skillsUsage)
	c.register(f, asClient)
	c.registerClient(f)
	f.String(&session, "session", "", "", "the session whose health is shown (default: the default session)")
	f.Bool(&asJSON, "json", "", false, "print JSON")
	log, code, ok := clientFlags(f, &c, args, io, "planner skills")
	if !ok {
		return code
	}
	if f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner skills: takes no arguments; choose the session with --session")
		return ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner skills: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer closeConn()
	reply, err := cl.Skills(ctx, session)
	if refusedInput(err) {
		fmt.Fprintf(io.Stderr, "planner skills: --session: %v\n", err)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner skills: %v\n", unavailable(err))
		return ctxExit(ctx, ExitFailed)
	}
	if asJSON {
		line, _ := jsonLine(reply)
		fmt.Fprintln(io.Stdout, line)
		return ExitOK
	}
	tw := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SKILL\tVERSION\tHEALTH (session %s)\tFAILURES\tLAST ERROR\n", reply.SessionID)
	disabled := false
	for _, s := range reply.Skills {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.Manifest.Name, s.Manifest.Version, s.Health.State, s.Health.Failures, s.Health.LastError)
		disabled = disabled || s.Health.State == planbus.HealthPermanentFailure
	}
	_ = tw.Flush()
	if len(reply.Skills) == 0 {
		fmt.Fprintln(io.Stdout, "(no worker has advertised a skill)")
	}
	if disabled {
		fmt.Fprintf(io.Stdout, "(skills in permanentFailure are disabled in session %s until: planner reset --nats-url URL %s)\n", reply.SessionID, reply.SessionID)
	}
	return ExitOK
}

const resetUsage = `Usage: planner reset --nats-url URL [flags] SESSION

Restarts a session: every skill in it healthy again, those in
permanentFailure included (the only way to use them again in that session
besides a new session id). --state clears the session's state document
too. Prints the skills healed. Exits 2 when SESSION is not a session id.`

func plannerReset(ctx context.Context, args []string, io IO) int {
	var c common
	var clearState, asJSON bool
	f := newFlags("planner reset", io.Stderr, io.Env, resetUsage)
	c.register(f, asClient)
	c.registerClient(f)
	f.Bool(&clearState, "state", "", false, "clear the session's state too")
	f.Bool(&asJSON, "json", "", false, "print the planner's answer as JSON")
	log, code, ok := clientFlags(f, &c, args, io, "planner reset")
	if !ok {
		return code
	}
	if f.NArg() != 1 {
		fmt.Fprintf(io.Stderr, "planner reset: want one session id%s\n", f.lateFlags())
		return ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner reset: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer closeConn()
	reply, err := cl.ResetSession(ctx, f.Arg(0), clearState)
	if refusedInput(err) {
		fmt.Fprintf(io.Stderr, "planner reset: %v\n", err)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner reset: %v\n", unavailable(err))
		return ctxExit(ctx, ExitFailed)
	}
	if asJSON {
		line, _ := jsonLine(reply)
		fmt.Fprintln(io.Stdout, line)
		return ExitOK
	}
	healed := "no skill needed healing"
	if len(reply.Healed) > 0 {
		healed = fmt.Sprintf("healed %v", reply.Healed)
	}
	state := ""
	if reply.StateCleared {
		state = "; its state cleared"
	}
	fmt.Fprintf(io.Stdout, "session %s: %s%s\n", reply.SessionID, healed, state)
	return ExitOK
}

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
	var session string
	v, code, ok := parseAnswerVerb("planner skills", skillsUsage, args, io, func(f *flags) {
		f.String(&session, "session", "", "", "the session whose health is shown (default: the default session)")
	})
	if !ok {
		return code
	}
	if v.f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner skills: takes no arguments; choose the session with --session")
		return ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner skills: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer closeConn()
	reply, err := cl.Skills(ctx, session)
	if code, failed := v.failed(ctx, io, err); failed {
		return code
	}
	return v.print(io, reply, func(w writer) { printSkills(w, reply) })
}

// printSkills shows the skills and their health as a table.
func printSkills(w writer, reply *planbus.SkillsReply) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SKILL\tVERSION\tHEALTH (session %s)\tFAILURES\tLAST ERROR\n", reply.SessionID)
	disabled := false
	for _, s := range reply.Skills {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.Manifest.Name, s.Manifest.Version, s.Health.State, s.Health.Failures, s.Health.LastError)
		disabled = disabled || s.Health.State == planbus.HealthPermanentFailure
	}
	_ = tw.Flush()
	if len(reply.Skills) == 0 {
		fmt.Fprintln(w, "(no worker has advertised a skill)")
	}
	if disabled {
		fmt.Fprintf(w, "(skills in permanentFailure are disabled in session %s until: planner reset --nats-url URL %s)\n", reply.SessionID, reply.SessionID)
	}
}

const resetUsage = `Usage: planner reset --nats-url URL [flags] SESSION

Restarts a session: every skill in it healthy again, those in
permanentFailure included (the only way to use them again in that session
besides a new session id). --state clears the session's state document
too. Prints the skills healed. Exits 2 when SESSION is not a session id.`

func plannerReset(ctx context.Context, args []string, io IO) int {
	var clearState bool
	v, code, ok := parseAnswerVerb("planner reset", resetUsage, args, io, func(f *flags) {
		f.Bool(&clearState, "state", "", false, "clear the session's state too")
	})
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := v.dialForID(ctx, io, "session id")
	if !ok {
		return code
	}
	defer closeConn()
	reply, err := cl.ResetSession(ctx, id, clearState)
	if code, failed := v.failed(ctx, io, err); failed {
		return code
	}
	return v.print(io, reply, func(w writer) {
		healed := "no skill needed healing"
		if len(reply.Healed) > 0 {
			healed = fmt.Sprintf("healed %v", reply.Healed)
		}
		state := ""
		if reply.StateCleared {
			state = "; its state cleared"
		}
		fmt.Fprintf(w, "session %s: %s%s\n", reply.SessionID, healed, state)
	})
}

package plannercmd

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/cli"
)

const skillsUsage = `Usage: planner skills --nats-url URL [flags]

Lists the skills the workers advertise, by name: version, health in the
session (--session, else the default one), consecutive failures and the
last error. A skill in permanentFailure is disabled for planning in that
session until 'planner reset SESSION'. --json prints the planner's answer,
{"sessionId": ..., "skills": [{"manifest": ..., "health": ...}]}.`

func plannerSkills(ctx context.Context, args []string, io cli.IO) int {
	var session string
	v, code, ok := parseAnswerVerb("planner skills", skillsUsage, args, io, func(f *cli.Flags) {
		f.String(&session, "session", "", "", "the session whose health is shown (default: the default session)")
	})
	if !ok {
		return code
	}
	if v.f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner skills: takes no arguments; choose the session with --session")
		return cli.ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner skills: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	reply, err := cl.Inspector().Skills(ctx, session)
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

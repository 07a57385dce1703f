package plannercmd

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/cli"
)

const resetUsage = `Usage: planner reset --nats-url URL [flags] SESSION

Restarts a session: every skill in it healthy again, those in
permanentFailure included (the only way to use them again in that session
besides a new session id). --state clears the session's state document
too. Prints the skills healed. Exits 2 when SESSION is not a session id.`

func plannerReset(ctx context.Context, args []string, io cli.IO) int {
	var clearState bool
	v, code, ok := parseAnswerVerb("planner reset", resetUsage, args, io, func(f *cli.Flags) {
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
	reply, err := cl.Inspector().ResetSession(ctx, id, clearState)
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

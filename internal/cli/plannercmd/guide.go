package plannercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/guide"
	"github.com/planbus/planbus/internal/plan"
)

const guideUsage = `Usage: planner guide --nats-url URL --session S [--domain D] [flags] [MESSAGE...]

Plays one turn of a guided session (planbus.guide.turn), as an agent that
runs its tools itself does once per turn: the message (the words after the
flags), its domain, and optionally the output of the tool it ran last
(--output TEXT or --output-json JSON, with --tool and --exit-code). The
planner keeps the session's active plan from its --templates library,
checks the output against the current step and answers with the context
for the model, which is printed on stdout (nothing when the session has no
plan); what the turn did (activated, advanced, completed, blocked, expired,
aborted or none) goes to stderr. --json prints the whole reply instead.
Exits 0 when the planner answered, 2 on bad usage or a turn it refused, 1
when it cannot be reached.`

func plannerGuide(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var q planbus.GuideTurn
	var tool, output, outputJSON, exitCode string
	var asJSON bool
	f := cli.NewFlags("planner guide", io.Stderr, io.Env, guideUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.String(&q.SessionID, "session", "", "", "the session (required): its active plan is kept under this id")
	f.String(&q.Domain, "domain", "", "", "the message's domain, such as bugfix: plans that list domains need one of theirs")
	f.String(&q.TurnID, "turn-id", "", "", "an id for this turn: sent again, the turn gets the same reply and changes nothing")
	f.String(&tool, "tool", "", "cli", "with --output or --output-json: the name of the tool that ran")
	f.String(&output, "output", "", "", "the text the tool printed, checked against the current step")
	f.String(&outputJSON, "output-json", "", "", "the tool's output as JSON, such as a skill's {\"stdout\": ..., \"exitCode\": 0}")
	f.String(&exitCode, "exit-code", "", "", "with --output or --output-json: the command's exit code")
	f.Bool(&asJSON, "json", "", false, "print the whole reply as JSON")
	log, code, ok := clientFlags(f, &c, args, io, "planner guide")
	if !ok {
		return code
	}
	q.Message = strings.Join(f.Args(), " ")
	if !plan.ValidID(q.SessionID) {
		fmt.Fprintf(io.Stderr, "planner guide: --session %q: want 1 to 128 letters, digits, '_' or '-'\n", q.SessionID)
		return cli.ExitUsage
	}
	res, err := guideResult(tool, output, outputJSON, exitCode)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner guide: %v\n", err)
		return cli.ExitUsage
	}
	if res != nil {
		q.ToolResults = []planbus.GuideToolResult{*res}
	}
	body, _ := json.Marshal(q)
	if _, err := guide.Decode(body); err != nil {
		fmt.Fprintf(io.Stderr, "planner guide: %v\n", strings.NewReplacer("/sessionId", "--session", "/domain", "--domain", "/turnId", "--turn-id",
			"/message", "MESSAGE", "/toolResults/0/", "--").Replace(err.Error()))
		return cli.ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner guide: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	reply, err := cl.Guide(ctx, q)
	var rej *client.RejectedError
	switch {
	case errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeInvalidRequest:
		fmt.Fprintf(io.Stderr, "planner guide: %v\n", err)
		return cli.ExitUsage
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner guide: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	if asJSON {
		line, _ := jsonLine(reply)
		fmt.Fprintln(io.Stdout, line)
		return cli.ExitOK
	}
	status := reply.Transition
	if reply.Message != "" {
		status += ": " + reply.Message
	}
	fmt.Fprintln(io.Stderr, status)
	if reply.Context != "" {
		fmt.Fprintln(io.Stdout, reply.Context)
	}
	return cli.ExitOK
}

// guideResult is the tool result the flags describe, or nil.
func guideResult(tool, output, outputJSON, exitCode string) (*planbus.GuideToolResult, error) {
	if output != "" && outputJSON != "" {
		return nil, errors.New("--output and --output-json: give one")
	}
	if output == "" && outputJSON == "" {
		if exitCode != "" {
			return nil, errors.New("--exit-code goes with --output or --output-json")
		}
		return nil, nil
	}
	r := &planbus.GuideToolResult{Tool: tool}
	if output != "" {
		r.Output, _ = json.Marshal(output)
	} else {
		if !json.Valid([]byte(outputJSON)) {
			return nil, fmt.Errorf("--output-json: not one JSON value: %.80q", outputJSON)
		}
		r.Output = json.RawMessage(outputJSON)
	}
	if exitCode != "" {
		n, err := strconv.ParseInt(exitCode, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--exit-code %q: want an integer", exitCode)
		}
		code := int(n)
		r.ExitCode = &code
	}
	return r, nil
}

package plannercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/authcmd"
	"github.com/planbus/planbus/internal/cli/benchcmd"
)

const plannerUsage = `Usage: planner <command> [flags]

Commands:
  run FILE     run a plan or a request end to end and print its result
  serve        keep a planbus node up (embedded NATS, planner, dispatcher, workers)
  submit FILE  send a plan or a request to a running system; print its requestId
  watch ID     follow a request (running or ended) to its end, as run shows it
  cancel ID    cancel a request or a plan
  rerun ID     run a request again under a new id (--failed-only: only what did not succeed)
  approve ID TOOL  approve (or --reject) a tool waiting for approval
  ls           list recent requests
  schedule ... add, list, remove, pause or resume schedules of requests (planner schedule -h)
  status ID    show a plan's or a request's state, or a session's agent, in a running system
  skills       list the skills workers advertise and their health in a session
  reset SESSION  make a session's skills healthy again (--state: clear its state too)
  agent ...    start, stop or show a session's GOAP agent (planner agent -h)
  guide MSG    play one turn of a guided session; print the plan's context
  mcp          serve planbus's tools to MCP agents (stdio, or HTTP with --listen)
  ui           serve the web view of a running system
  bench        run the DAG benchmark workloads
  htn          plan with an InductorHtn domain, printing what the reference prints
  auth init D  write a seed per role and a nats-server auth block to directory D
  version      print the version

Without --nats-url, run and serve start an embedded NATS JetStream server
with the planner service, a dispatcher and tool workers in-process; submit,
watch, cancel, rerun, approve, ls, schedule, status, skills, reset, guide, mcp and ui work on a
running system and need --nats-url. serve also serves the web view on ` + DefaultHTTP + ` (--http).
'planner <command> -h' shows the flags of a command.`

// versionName is what planner version prints before the version.
const versionName = "planbus"

// Run is the planner command: args are its arguments without the program
// name, the first of them the command (run, serve, ...). It returns the
// exit code (package cli).
func Run(ctx context.Context, args []string, io cli.IO) int {
	if len(args) == 0 {
		fmt.Fprintln(io.Stderr, plannerUsage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "run":
		return plannerRun(ctx, args[1:], io)
	case "serve":
		return plannerServe(ctx, args[1:], io)
	case "bench":
		return benchcmd.Run(ctx, args[1:], io)
	case "status":
		return plannerStatus(ctx, args[1:], io)
	case "agent":
		return plannerAgent(ctx, args[1:], io)
	case "submit":
		return plannerSubmit(ctx, args[1:], io)
	case "watch":
		return plannerWatch(ctx, args[1:], io)
	case "cancel":
		return plannerCancel(ctx, args[1:], io)
	case "rerun":
		return plannerRerun(ctx, args[1:], io)
	case "schedule":
		return plannerSchedule(ctx, args[1:], io)
	case "approve":
		return plannerApprove(ctx, args[1:], io)
	case "ls":
		return plannerLs(ctx, args[1:], io)
	case "skills":
		return plannerSkills(ctx, args[1:], io)
	case "reset":
		return plannerReset(ctx, args[1:], io)
	case "guide":
		return plannerGuide(ctx, args[1:], io)
	case "mcp":
		return plannerMCP(ctx, args[1:], io)
	case "ui":
		return plannerUI(ctx, args[1:], io)
	case "htn":
		return plannerHTN(ctx, args[1:], io.Stdout, io.Stderr)
	case "auth":
		return authcmd.Run(ctx, args[1:], io)
	case "version", "--version", "-version":
		fmt.Fprintln(io.Stdout, versionName, cli.Version())
		return cli.ExitOK
	case "help", "-h", "--help", "-help":
		fmt.Fprintln(io.Stdout, plannerUsage)
		return cli.ExitOK
	}
	fmt.Fprintf(io.Stderr, "planner: unknown command %q\n\n%s\n", args[0], plannerUsage)
	return cli.ExitUsage
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	const limit = 64 << 20
	var r io.Reader
	if name == "-" {
		r = stdin
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, limit>>20)
	}
	return b, nil
}

func jsonLine(v any) (string, error) {
	var sb strings.Builder
	enc := jsonEncoder(&sb)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(sb.String(), "\n"), nil
}

// jsonEncoder writes JSON as it is, without escaping <, > and &.
func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

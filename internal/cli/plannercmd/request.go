package plannercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/progress"
	"github.com/planbus/planbus/internal/generator"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/request"
	"github.com/rs/zerolog"
)

// isRequest tells a plan request (it has "kind") from a bare Plan JSON.
func isRequest(doc []byte) bool {
	var probe struct {
		Kind *json.RawMessage `json:"kind"`
	}
	return json.Unmarshal(doc, &probe) == nil && probe.Kind != nil
}

func runRequest(ctx context.Context, f *cli.Flags, c *common, nf *nodeFlags, name string, doc []byte, quiet, verbose bool, wait time.Duration, log zerolog.Logger, io cli.IO) int {
	r, err := request.Decode(doc)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return cli.ExitUsage
	}
	if wait == 0 {
		wait = time.Duration(r.MaxAttempts) * (generator.GenerationTimeout + 2*time.Minute)
	}
	conn, nctx, stop, err := c.connectOrEmbed(ctx, f, nf, log, true)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer stop()
	v, err := nf.view.runView(conn, c.Auth, log, io)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.ExitUsage
	}
	defer v.Stop()
	var shown func(ev planbus.Event)
	endProgress := func() {}
	if !quiet {
		pr := progress.New(io.Stderr, verbose)
		pr.ApproveFlags = approveFlags(c, conn)
		defer pr.Close()
		shown, endProgress = pr.Event, pr.Close
	}
	var seen idSeen
	onEvent := seen.follow(shown)
	cl, err := clientOn(conn, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return cli.ExitFailed
	}
	rctx, cancel := context.WithTimeout(nctx, wait)
	defer cancel()
	out, err := cl.Run(rctx, doc, onEvent)
	endProgress()
	if refusedInput(err) {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return cli.ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v%s\n", runErr(nctx, unavailable(err)), seen.goesOn(ctx, c))
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	return printOutcome("planner run", out, io)
}

// printOutcome prints a request's outcome as the last line on stdout and
// returns the exit code it means.
func printOutcome(cmd string, out *planbus.Outcome, io cli.IO) int {
	line, _ := jsonLine(out)
	fmt.Fprintln(io.Stdout, line)
	if !out.Success {
		msg := string(out.Status)
		if out.Error != nil {
			msg += ": " + out.Error.Message
		}
		if out.Narrative != "" {
			msg += " — " + out.Narrative
		}
		fmt.Fprintf(io.Stderr, "%s: request %s %s\n", cmd, out.RequestID, msg)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

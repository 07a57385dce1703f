package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/planner"
)

// isRequest tells a plan request (it has "kind") from a bare Plan JSON.
func isRequest(doc []byte) bool {
	var probe struct {
		Kind *json.RawMessage `json:"kind"`
	}
	return json.Unmarshal(doc, &probe) == nil && probe.Kind != nil
}

func runRequest(ctx context.Context, f *flags, c *common, nf *nodeFlags, name string, doc []byte, quiet, verbose bool, wait time.Duration, log zerolog.Logger, io IO) int {
	r, err := planner.DecodeRequest(doc)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return ExitUsage
	}
	if wait == 0 {
		wait = time.Duration(r.MaxAttempts) * (planner.GenerationTimeout + 2*time.Minute)
	}
	conn, nctx, stop, err := c.connectOrEmbed(ctx, f, nf, log, true)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer stop()
	v, err := nf.view.runView(conn, c.auth, log, io)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ExitUsage
	}
	defer v.Stop()
	var shown func(ev plan.Event)
	endProgress := func() {}
	if !quiet {
		pr := newProgress(io.Stderr, verbose)
		pr.approveFlags = approveFlags(c, conn)
		defer pr.close()
		shown, endProgress = pr.event, pr.close
	}
	var seen idSeen
	progress := seen.follow(shown)
	cl, err := clientOn(conn, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v\n", err)
		return ExitFailed
	}
	rctx, cancel := context.WithTimeout(nctx, wait)
	defer cancel()
	out, err := cl.Run(rctx, doc, progress)
	endProgress()
	if refusedInput(err) {
		fmt.Fprintf(io.Stderr, "planner run: %s: %v\n", name, err)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner run: %v%s\n", runErr(nctx, unavailable(err)), seen.goesOn(ctx, c))
		return ctxExit(ctx, ExitFailed)
	}
	return printOutcome("planner run", out, io)
}

// printOutcome prints a request's outcome as the last line on stdout and
// returns the exit code it means.
func printOutcome(cmd string, out *planbus.Outcome, io IO) int {
	line, _ := jsonLine(out)
	fmt.Fprintln(io.Stdout, line)
	if !out.Success {
		msg := out.Status
		if out.Error != nil {
			msg += ": " + out.Error.Message
		}
		if out.Narrative != "" {
			msg += " — " + out.Narrative
		}
		fmt.Fprintf(io.Stderr, "%s: request %s %s\n", cmd, out.RequestID, msg)
		return ExitFailed
	}
	return ExitOK
}

// servePlanner runs the planner service alone against an external server.
func servePlanner(ctx context.Context, c *common, nf *nodeFlags, log zerolog.Logger, io IO) int {
	pc, err := nf.plan.config()
	if err != nil {
		return usageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	memLimit, _ := nf.plan.applyMemoryLimit(io.Env)
	log.Debug().Int64("memory_limit", memLimit).Msg("soft memory limit")
	pc.Metrics = metrics.New()
	ms, err := nf.metrics.start(pc.Metrics, log)
	if err != nil {
		return usageErr(io.Stderr, fmt.Errorf("planner serve: %w", err))
	}
	defer ms.Stop()
	return serveComponent(ctx, c, log, io.Stderr, "planner", bus.RolePlanner, func(conn *bus.Conn) (runner, error) {
		pc.Metrics.SetConn(conn.NC)
		if conn.NC.AuthRequired() {
			// Only planners.> is open to the planner role's requests.
			pc.ExternalPrefix = strings.TrimSuffix(bus.SubjectExternalPlanners, ">")
		}
		p, err := planner.New(conn, pc, log)
		if err != nil {
			return nil, err
		}
		return p.Run, nil
	})
}

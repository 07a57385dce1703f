package plannercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/request"
)

const lsUsage = `Usage: planner ls --nats-url URL [flags]

Lists recent requests, the most recently accepted first: id, kind, status,
attempts and age (since it was accepted). Status is queued, generating,
executing or cancelling while a request runs, then how it ended:
succeeded, failed, fallback or cancelled. --json prints the planner's
answer as one JSON document, {"requests": [...], "more": bool}.`

func plannerLs(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var q planbus.ListRequest
	var asJSON bool
	var status string
	f := cli.NewFlags("planner ls", io.Stderr, io.Env, lsUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.String(&status, "status", "", "", "only requests in this status")
	f.String(&q.SessionID, "session", "", "", "only requests of this session")
	f.Int(&q.Limit, "limit", "", request.DefaultListLimit, fmt.Sprintf("the most requests listed (at most %d)", request.MaxListLimit))
	f.Bool(&asJSON, "json", "", false, "print JSON")
	log, code, ok := clientFlags(f, &c, args, io, "planner ls")
	if !ok {
		return code
	}
	q.Status = planbus.RequestStatus(status)
	if f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner ls: takes no arguments; filter with --status and --session")
		return cli.ExitUsage
	}
	if q.Limit < 1 || q.Limit > request.MaxListLimit {
		fmt.Fprintf(io.Stderr, "planner ls: --limit %d: want 1 to %d\n", q.Limit, request.MaxListLimit)
		return cli.ExitUsage
	}
	body, _ := json.Marshal(q)
	if _, err := request.DecodeList(body); err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", strings.NewReplacer("/status", "--status", "/sessionId", "--session", "/limit", "--limit").Replace(err.Error()))
		return cli.ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	reply, err := cl.Inspector().List(ctx, q)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	if asJSON {
		line, _ := jsonLine(reply)
		fmt.Fprintln(io.Stdout, line)
		return cli.ExitOK
	}
	printList(io.Stdout, reply, time.Now())
	return cli.ExitOK
}

// printList shows a list of requests as a table.
func printList(w io.Writer, reply *planbus.ListReply, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tATTEMPTS\tAGE")
	for _, r := range reply.Requests {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.RequestID, r.Kind, r.Status, r.Attempts, age(now.Sub(r.AcceptedAt)))
	}
	_ = tw.Flush()
	if reply.More {
		fmt.Fprintln(w, "(more, older requests not shown: raise --limit or filter)")
	}
}

// age shows a duration the way a listing does: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

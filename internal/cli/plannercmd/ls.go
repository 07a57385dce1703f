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
answer as one JSON document, {"requests": [...], "more": bool, "next": n}.

Filters combine: --status, --waiting (a tool waits for approval),
--session, --kind, --text (in a request's id,
description, goal or input text, ignoring case), and the time it was accepted: --since
and --until take a duration back from now (1h, 30m) or a time (RFC 3339,
2026-11-29T08:00:00Z). A listing that stops at --limit (or after looking
at 10,000 requests) says how to go on: --before CURSOR, the cursor it
prints, lists the next page.`

func plannerLs(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var q planbus.ListRequest
	var asJSON bool
	var status, since, until string
	f := cli.NewFlags("planner ls", io.Stderr, io.Env, lsUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.String(&status, "status", "", "", "only requests in this status")
	f.String(&q.SessionID, "session", "", "", "only requests of this session")
	f.Int(&q.Limit, "limit", "", request.DefaultListLimit, fmt.Sprintf("the most requests listed (at most %d)", request.MaxListLimit))
	f.String(&since, "since", "", "", "only requests accepted since then: a duration back from now (1h) or a time (RFC 3339)")
	f.String(&until, "until", "", "", "only requests accepted until then: a duration back from now or a time (RFC 3339)")
	f.String(&q.Kind, "kind", "", "", "only requests of this kind (plan, htn, goap, template, external, llm)")
	f.String(&q.Text, "text", "", "", "only requests whose id, description, goal or input text contains this text (ignoring case)")
	f.Bool(&q.Waiting, "waiting", "", false, "only requests with a tool waiting for approval (planner approve ID TOOL decides)")
	var before int64
	f.Int64Var(&before, "before", 0, "list the page before this cursor (what a listing that stops prints)")
	f.Bool(&asJSON, "json", "", false, "print JSON")
	log, code, ok := clientFlags(f, &c, args, io, "planner ls")
	if !ok {
		return code
	}
	q.Status = planbus.RequestStatus(status)
	if f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner ls: takes no arguments; filter with --status, --session, --kind, --text, --since and --until")
		return cli.ExitUsage
	}
	now := time.Now()
	for _, t := range []struct {
		flag, v string
		p       *time.Time
	}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
		if t.v == "" {
			continue
		}
		at, err := pointInTime(t.v, now)
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner ls: %s %q: %v\n", t.flag, t.v, err)
			return cli.ExitUsage
		}
		*t.p = at
	}
	if before < 0 {
		fmt.Fprintf(io.Stderr, "planner ls: --before %d: want a cursor a listing printed\n", before)
		return cli.ExitUsage
	}
	q.Before = uint64(before)
	if q.Limit < 1 || q.Limit > request.MaxListLimit {
		fmt.Fprintf(io.Stderr, "planner ls: --limit %d: want 1 to %d\n", q.Limit, request.MaxListLimit)
		return cli.ExitUsage
	}
	body, _ := json.Marshal(q)
	if _, err := request.DecodeList(body); err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", strings.NewReplacer("/status", "--status", "/sessionId", "--session", "/limit", "--limit", "/kind", "--kind", "/text", "--text").Replace(err.Error()))
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
	if reply.More {
		fmt.Fprintf(io.Stdout, "(more: the next page is planner ls --before %d with the same filters)\n", reply.Next)
	}
	return cli.ExitOK
}

// pointInTime reads --since or --until: a duration back from now, or an
// RFC 3339 time.
func pointInTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("want a duration back from now, such as 1h, or a time")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a duration back from now (1h, 30m) or a time (RFC 3339, 2026-11-29T08:00:00Z)")
	}
	return t, nil
}

// printList shows a list of requests as a table.
func printList(w io.Writer, reply *planbus.ListReply, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tATTEMPTS\tAGE")
	for _, r := range reply.Requests {
		status := string(r.Status)
		if len(r.Waiting) > 0 {
			status += ", waiting for approval: " + strings.Join(r.Waiting, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.RequestID, r.Kind, status, r.Attempts, age(now.Sub(r.AcceptedAt)))
	}
	_ = tw.Flush()
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

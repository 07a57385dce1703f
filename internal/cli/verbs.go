package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/planner"
)

// The verbs that work on a running system as a client: submit, watch,
// cancel, approve and ls. Each needs --nats-url and takes the credentials flags;
// with --nkey, the seed is the client role's.

// dialForID checks that a command was given one id (of the kind what
// names) and connects; on failure it has said why on stderr and code is
// the exit code.
func (c *common) dialForID(ctx context.Context, f *flags, log zerolog.Logger, io IO, name, what string) (cl *client.Client, id string, closeConn func(), code int, ok bool) {
	if f.NArg() != 1 || !plan.ValidID(f.Arg(0)) {
		fmt.Fprintf(io.Stderr, "%s: want one %s%s\n", name, what, f.lateFlags())
		return nil, "", nil, ExitUsage, false
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "%s: %v\n", name, err)
		return nil, "", nil, ctxExit(ctx, ExitFailed), false
	}
	return cl, f.Arg(0), closeConn, 0, true
}

// dialClient connects to the system named by c and returns a client on
// the connection and a function that closes it.
func (c *common) dialClient(ctx context.Context, log zerolog.Logger) (*client.Client, func(), error) {
	conn, err := c.dialAsClient(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	cl, err := clientOn(conn, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return cl, conn.Close, nil
}

// refusedInput reports whether err is the planner's refusal of what it was
// given (exit 2: fix the input); a refusal because the planner could not
// do its part just then (UNAVAILABLE: its store did not answer) is not.
func refusedInput(err error) bool {
	var rej *client.RejectedError
	return errors.As(err, &rej) && rej.Reply.Error.Code != planbus.CodeUnavailable
}

// unavailable says what an UNAVAILABLE refusal means: nothing was stored,
// and the same request may be sent again; other errors are as they are.
func unavailable(err error) error {
	var rej *client.RejectedError
	if errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeUnavailable {
		return fmt.Errorf("the planner could not take the request just now (%s: %v); nothing was stored: send it again", planbus.CodeUnavailable, err)
	}
	return err
}

// dialAsClient connects to --nats-url for a client command and checks the
// server lets it read what a client reads (bus.Conn.CheckClient).
func (c *common) dialAsClient(ctx context.Context, log zerolog.Logger) (*bus.Conn, error) {
	conn, err := bus.Dial(ctx, c.bus, log)
	if err != nil {
		return nil, err
	}
	if err := conn.CheckClient(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// clientFlags parses the flags of a client verb and checks that a system
// is named. When the command must end, ok is false and code is its exit
// code.
func clientFlags(f *flags, c *common, args []string, io IO, cmd string) (log zerolog.Logger, code int, ok bool) {
	if err := f.parse(args); err != nil {
		return zerolog.Nop(), usageErr(io.Stderr, err), false
	}
	if c.bus.URL == "" {
		fmt.Fprintf(io.Stderr, "%s: --nats-url (or $NATS_URL) is required: it works on a running system (planner serve listens on nats://127.0.0.1:4222; --nats-url goes before the arguments)\n", cmd)
		return zerolog.Nop(), ExitUsage, false
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return log, usageErr(io.Stderr, err), false
	}
	return log, 0, true
}

// writer is io.Writer, named where a verb's IO parameter hides package io.
type writer = io.Writer

// answerVerb is a verb that asks the planner one thing and prints its
// answer: its flags are the connection's, the verb's own and --json.
type answerVerb struct {
	name   string
	c      common
	f      *flags
	asJSON bool
	log    zerolog.Logger
}

// parseAnswerVerb registers and parses an answer verb's flags; own
// registers the verb's own. ok is false, with the exit code, when the
// command line is not usable.
func parseAnswerVerb(name, usage string, args []string, io IO, own func(f *flags)) (v *answerVerb, code int, ok bool) {
	v = &answerVerb{name: name}
	v.f = newFlags(name, io.Stderr, io.Env, usage)
	v.c.register(v.f, asClient)
	v.c.registerClient(v.f)
	if own != nil {
		own(v.f)
	}
	v.f.Bool(&v.asJSON, "json", "", false, "print the planner's answer as JSON")
	v.log, code, ok = clientFlags(v.f, &v.c, args, io, name)
	return v, code, ok
}

// dialForID checks the verb's one id argument (what it names) and
// connects a client.
func (v *answerVerb) dialForID(ctx context.Context, io IO, what string) (cl *client.Client, id string, closeConn func(), code int, ok bool) {
	return v.c.dialForID(ctx, v.f, v.log, io, v.name, what)
}

// failed reports an answer verb's call that failed, and the exit code:
// 2 when the planner refused what it was given, 1 when it could not be
// asked or could not answer just then (UNAVAILABLE).
func (v *answerVerb) failed(ctx context.Context, io IO, err error) (int, bool) {
	switch {
	case err == nil:
		return 0, false
	case refusedInput(err):
		fmt.Fprintf(io.Stderr, "%s: %v\n", v.name, err)
		return ExitUsage, true
	}
	fmt.Fprintf(io.Stderr, "%s: %v\n", v.name, unavailable(err))
	return ctxExit(ctx, ExitFailed), true
}

// print prints the answer: as one JSON line with --json, else as text
// writes it. It returns ExitOK.
func (v *answerVerb) print(std IO, answer any, text func(w writer)) int {
	if v.asJSON {
		line, _ := jsonLine(answer)
		fmt.Fprintln(std.Stdout, line)
	} else {
		text(std.Stdout)
	}
	return ExitOK
}

const submitUsage = `Usage: planner submit --nats-url URL [flags] FILE

Sends FILE ('-' for stdin) to the planner and does not wait for it to run:
a plan request ({"kind": "plan" | "external" | "htn" | "goap" |
"template", ...}) or a bare Plan JSON, which goes as a request of kind plan
and runs as <requestId>-1 (its requestId being the plan's requestId, else
its planId, else a new one). Prints the requestId on stdout. Exits 0 when
the planner accepted it, 2 when FILE is not valid or the planner refused
it (the reason on stderr), 1 when the planner could not be reached or
could not store it just then (UNAVAILABLE: send it again). Follow it with
'planner watch ID', stop it with 'planner cancel ID'.`

func plannerSubmit(ctx context.Context, args []string, io IO) int {
	var c common
	f := newFlags("planner submit", io.Stderr, io.Env, submitUsage)
	c.register(f, asClient)
	c.registerClient(f)
	log, code, ok := clientFlags(f, &c, args, io, "planner submit")
	if !ok {
		return code
	}
	if f.NArg() != 1 {
		fmt.Fprintln(io.Stderr, "planner submit: want exactly one FILE (or - for stdin)"+f.lateFlags())
		return ExitUsage
	}
	name := f.Arg(0)
	doc, err := readInput(name, io.Stdin)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %v\n", err)
		return ExitUsage
	}
	// Checked here first, so that a bad file is refused as run refuses it,
	// without a round trip.
	bare := !isRequest(doc)
	if bare {
		p, err := plan.Decode(doc)
		if err == nil && len(p.Tools) == 0 {
			err = errors.New("at /tools: the plan has no tools: there is nothing to run")
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner submit: %s: %v\n", name, err)
			return ExitUsage
		}
	} else if _, err := planner.DecodeRequest(doc); err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %s: %v\n", name, err)
		return ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer closeConn()
	var acc *planbus.Accepted
	if bare {
		acc, err = cl.SubmitPlanJSON(ctx, doc)
	} else {
		acc, err = cl.SubmitRequest(ctx, doc)
	}
	if refusedInput(err) {
		fmt.Fprintf(io.Stderr, "planner submit: %s: %v\n", name, err)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner submit: %v\n", unavailable(err))
		return ctxExit(ctx, ExitFailed)
	}
	fmt.Fprintln(io.Stdout, acc.RequestID)
	return ExitOK
}

const watchUsage = `Usage: planner watch --nats-url URL [flags] ID

Attaches to a request (or a plan published on its own, or the GOAP agent
of the session ID), running or ended, and shows its progress as 'planner run' does: the events that already
happened (they are kept for an hour), then the ones to come, until it
ends. Then prints what run prints as the last line on stdout: the
request's outcome, or for a bare Plan JSON (planner submit FILE, planner
run) the plan's execution result. Exits as run does: 0 when it succeeded,
1 when it failed, timed out, fell back or was cancelled, or when nothing
has the id; 2 on bad usage.`

func plannerWatch(ctx context.Context, args []string, io IO) int {
	var c common
	var quiet, verbose bool
	var wait time.Duration
	f := newFlags("planner watch", io.Stderr, io.Env, watchUsage)
	c.register(f, asClient)
	c.registerClient(f)
	f.Bool(&quiet, "quiet", "", false, "no progress on stderr")
	f.Bool(&verbose, "v", "", false, "a progress line for every event, even for plans of more than 50 tools (which otherwise get one summary line)")
	f.Duration(&wait, "wait", "", 0, "how long to wait for the end (0: until it ends)")
	log, code, ok := clientFlags(f, &c, args, io, "planner watch")
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := c.dialForID(ctx, f, log, io, "planner watch", "request or plan id")
	if !ok {
		return code
	}
	defer closeConn()
	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	st, err := cl.Status(sctx, id)
	agentID := ""
	if errors.Is(err, client.ErrNotFound) {
		// A GOAP agent is not a request of the loop: follow the agent of
		// the session with this id.
		if ag, aerr := cl.AgentStatus(sctx, id); aerr == nil && ag != nil && ag.AgentID != "" {
			agentID, err = ag.AgentID, nil
		}
	}
	scancel()
	if err != nil {
		hint := ""
		if errors.Is(err, client.ErrNotFound) {
			hint = "; nor a session with an agent (an agent is watched by its session's id)"
		}
		fmt.Fprintf(io.Stderr, "planner watch: %v%s\n", err, hint)
		return ctxExit(ctx, ExitFailed)
	}
	var progress func(planbus.Event)
	endProgress := func() {}
	if !quiet {
		pr := newProgress(io.Stderr, verbose)
		defer pr.close()
		progress, endProgress = pr.event, pr.close
	}
	wctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	if agentID != "" {
		o, err := cl.Watch(wctx, agentID, progress)
		endProgress()
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner watch: %v\n", err)
			return ctxExit(ctx, ExitFailed)
		}
		return printOutcome("planner watch", o, io)
	}
	if st.Request == nil {
		res, err := cl.WatchPlan(wctx, id, progress)
		endProgress()
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner watch: %v%s\n", err, goesOnAfterWatch(ctx, &c, id))
			return ctxExit(ctx, ExitFailed)
		}
		return printExecution("planner watch", res, io)
	}
	o, err := cl.Watch(wctx, st.Request.RequestID, progress)
	endProgress()
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner watch: %v%s\n", err, goesOnAfterWatch(ctx, &c, st.Request.RequestID))
		return ctxExit(ctx, ExitFailed)
	}
	if st.Request.BarePlan {
		return printPlanOutcome("planner watch", o, io)
	}
	return printOutcome("planner watch", o, io)
}

// goesOnAfterWatch is what an interrupted watch (ctx is the command's,
// ended by the interrupt) adds to its error: what it watched goes on.
func goesOnAfterWatch(ctx context.Context, c *common, id string) string {
	if ctx.Err() == nil {
		return ""
	}
	u := bus.RedactURL(c.bus.URL)
	return fmt.Sprintf("\nplanner watch: stopped watching; %s goes on running on %s (stop it with 'planner cancel --nats-url %s %s')", id, u, u, id)
}

const cancelUsage = `Usage: planner cancel --nats-url URL [flags] ID

Cancels a request, by its id or the id of one of its plans, or a plan
published on its own. A running plan ends in state cancelled: its running
calls are stopped, its tools not yet released skipped; the request ends
with outcome status cancelled, without replan or fallback. A request still
queued or generating ends cancelled at once. Prints the planner's answer.
Exits 0 when the request is cancelled or being cancelled, or had already
ended (nothing changes; the answer says so), 1 when nothing has the id or
the planner cannot be reached, 2 on bad usage.`

func plannerCancel(ctx context.Context, args []string, io IO) int {
	var reason string
	v, code, ok := parseAnswerVerb("planner cancel", cancelUsage, args, io, func(f *flags) {
		f.String(&reason, "reason", "", "", "why, said in the outcome and the events (at most 1024 characters)")
	})
	if !ok {
		return code
	}
	cl, id, closeConn, code, ok := v.dialForID(ctx, io, "request or plan id")
	if !ok {
		return code
	}
	defer closeConn()
	reply, err := cl.Cancel(ctx, id, reason)
	var rej *client.RejectedError
	switch {
	case errors.Is(err, client.ErrNotFound):
		hint := ""
		if ag, aerr := cl.AgentStatus(ctx, id); aerr == nil && ag != nil && ag.AgentID != "" {
			// A GOAP agent is not a request: it stops rather than cancels.
			if ag.Status == planbus.AgentRunning {
				hint = fmt.Sprintf("; %s is the session of agent %s: stop it with 'planner agent stop --nats-url %s %s'",
					id, ag.AgentID, bus.RedactURL(v.c.bus.URL), id)
			} else {
				hint = fmt.Sprintf("; %s is the session of agent %s, which has ended (%s)", id, ag.AgentID, ag.Status)
			}
		}
		fmt.Fprintf(io.Stderr, "planner cancel: %v%s\n", err, hint)
		return ExitFailed
	case errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeInvalidRequest:
		fmt.Fprintf(io.Stderr, "planner cancel: %v\n", err)
		return ExitUsage
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner cancel: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	return v.print(io, reply, func(w writer) { fmt.Fprintln(w, reply.Message) })
}

const approveUsage = `Usage: planner approve --nats-url URL [flags] ID TOOL

Approves tool TOOL of request ID's running plan (or of plan ID), which waits
for approval (state waiting_approval; 'planner watch ID' shows the wait and
its prompt): a dispatcher releases it. With --reject the tool fails instead,
with code REJECTED, without running: a required tool fails the plan and the
request (no replan, no fallback), an optional one lets its dependents run.
Prints the planner's answer. Exits 0 when the decision is recorded, 1 when
nothing has the id or the tool, when the tool is not waiting for approval
(no approval step, not ready yet, decided on already, plan ended) or the
planner cannot be reached, 2 on bad usage.`

func plannerApprove(ctx context.Context, args []string, io IO) int {
	var reject bool
	var reason string
	v, code, ok := parseAnswerVerb("planner approve", approveUsage, args, io, func(f *flags) {
		f.Bool(&reject, "reject", "", false, "reject the tool: it fails with code REJECTED without running")
		f.String(&reason, "reason", "", "", "why, said in the events and a rejection's error (at most 1024 characters)")
	})
	if !ok {
		return code
	}
	f := v.f
	if f.NArg() != 2 || !plan.ValidID(f.Arg(0)) {
		fmt.Fprintln(io.Stderr, "planner approve: want a request or plan id and a tool id"+f.lateFlags())
		return ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer closeConn()
	decide := cl.Approve
	if reject {
		decide = cl.Reject
	}
	reply, err := decide(ctx, f.Arg(0), f.Arg(1), reason)
	var rej *client.RejectedError
	switch {
	case errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeInvalidRequest:
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return ExitUsage
	case errors.As(err, &rej):
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return ExitFailed
	case err != nil:
		fmt.Fprintf(io.Stderr, "planner approve: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	return v.print(io, reply, func(w writer) { fmt.Fprintln(w, reply.Message) })
}

const lsUsage = `Usage: planner ls --nats-url URL [flags]

Lists recent requests, the most recently accepted first: id, kind, status,
attempts and age (since it was accepted). Status is queued, generating,
executing or cancelling while a request runs, then how it ended:
succeeded, failed, fallback or cancelled. --json prints the planner's
answer as one JSON document, {"requests": [...], "more": bool}.`

func plannerLs(ctx context.Context, args []string, io IO) int {
	var c common
	var q planbus.ListRequest
	var asJSON bool
	f := newFlags("planner ls", io.Stderr, io.Env, lsUsage)
	c.register(f, asClient)
	c.registerClient(f)
	f.String(&q.Status, "status", "", "", "only requests in this status")
	f.String(&q.SessionID, "session", "", "", "only requests of this session")
	f.Int(&q.Limit, "limit", "", planner.DefaultListLimit, fmt.Sprintf("the most requests listed (at most %d)", planner.MaxListLimit))
	f.Bool(&asJSON, "json", "", false, "print JSON")
	log, code, ok := clientFlags(f, &c, args, io, "planner ls")
	if !ok {
		return code
	}
	if f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner ls: takes no arguments; filter with --status and --session")
		return ExitUsage
	}
	if q.Limit < 1 || q.Limit > planner.MaxListLimit {
		fmt.Fprintf(io.Stderr, "planner ls: --limit %d: want 1 to %d\n", q.Limit, planner.MaxListLimit)
		return ExitUsage
	}
	body, _ := json.Marshal(q)
	if _, err := planner.DecodeList(body); err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", strings.NewReplacer("/status", "--status", "/sessionId", "--session", "/limit", "--limit").Replace(err.Error()))
		return ExitUsage
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	defer closeConn()
	reply, err := cl.List(ctx, q)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner ls: %v\n", err)
		return ctxExit(ctx, ExitFailed)
	}
	if asJSON {
		line, _ := jsonLine(reply)
		fmt.Fprintln(io.Stdout, line)
		return ExitOK
	}
	printList(io.Stdout, reply, time.Now())
	return ExitOK
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

// clientOn is a planbus client on conn, as the named client its seed
// names (client-<name>.nk), if any.
func clientOn(conn *bus.Conn, opts ...client.Option) (*client.Client, error) {
	if conn.Config.Client != "" {
		opts = append(opts, client.As(conn.Config.Client))
	}
	return client.New(conn.NC, opts...)
}

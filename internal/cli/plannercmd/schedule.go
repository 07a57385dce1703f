package plannercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

const scheduleUsage = `Usage: planner schedule <verb> --nats-url URL [flags] ...

Verbs:
  add NAME --cron EXPR FILE   submit the plan or request in FILE at every tick
  ls                          list the schedules, their last tick and request
  rm NAME                     remove a schedule (the requests it made stay)
  pause NAME                  stop a schedule's ticks until resume
  resume NAME                 start a paused schedule's ticks again

A schedule lives in the NATS server (a message schedule of the
PLANBUS_SCHEDULES stream): it fires once a tick whatever the number of
planners, and goes on across restarts of everything. Each tick is submitted
as the request NAME-<the tick's sequence>. EXPR is six cron fields with
seconds ("0 30 2 * * *": 02:30:00 every day, in --tz, default UTC),
@hourly, @daily, @weekly, @monthly, @yearly, or @every DURATION (1s or
more). A tick due while the server was down is skipped: the schedule fires
at its next time, unless the schedule was added with --missed catchup: then
a planner that starts submits the latest tick missed, once, as
NAME-missed-<its due time in Unix seconds>.

Exits 0 on success, 1 when the planner could not be reached or has no
schedule of that name, 2 on bad usage or a schedule the planner refused.`

func plannerSchedule(ctx context.Context, args []string, io cli.IO) int {
	if len(args) == 0 {
		fmt.Fprintln(io.Stderr, scheduleUsage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "add":
		return scheduleAdd(ctx, args[1:], io)
	case "ls", "list":
		return scheduleList(ctx, args[1:], io)
	case "rm", "pause", "resume":
		return scheduleVerb(ctx, args[0], args[1:], io)
	case "help", "-h", "--help", "-help":
		fmt.Fprintln(io.Stdout, scheduleUsage)
		return cli.ExitOK
	}
	fmt.Fprintf(io.Stderr, "planner schedule: unknown verb %q\n\n%s\n", args[0], scheduleUsage)
	return cli.ExitUsage
}

func scheduleAdd(ctx context.Context, args []string, io cli.IO) int {
	var cron, tz, missed string
	v, code, ok := parseAnswerVerbAnyOrder("planner schedule add", scheduleUsage, args, io, func(f *cli.Flags) {
		f.String(&cron, "cron", "", "", `when it ticks: six cron fields with seconds ("0 30 2 * * *"), @hourly, @daily, or @every 10m (required)`)
		f.String(&tz, "tz", "", "", "the IANA time zone of --cron, such as Europe/Lisbon (default UTC)")
		f.String(&missed, "missed", "", planbus.MissedSkip, "ticks due while the system was down: skip them, or catchup (a starting planner submits the latest one)")
	})
	if !ok {
		return code
	}
	pos := v.f.Args()
	if len(pos) != 2 || cron == "" {
		fmt.Fprintln(io.Stderr, "planner schedule add: want NAME --cron EXPR FILE"+v.f.LateFlags())
		return cli.ExitUsage
	}
	name, file := pos[0], pos[1]
	doc, err := readInput(file, io.Stdin)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner schedule add: %v\n", err)
		return cli.ExitUsage
	}
	if !isRequest(doc) {
		p, err := plan.Decode(doc)
		if err == nil && len(p.Tools) == 0 {
			err = errors.New("at /tools: the plan has no tools: there is nothing to run")
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "planner schedule add: %s: %v\n", file, err)
			return cli.ExitUsage
		}
		doc, _ = json.Marshal(map[string]any{"kind": "plan", "plan": json.RawMessage(doc)})
	} else if _, err := request.Decode(doc); err != nil {
		fmt.Fprintf(io.Stderr, "planner schedule add: %s: %v\n", file, err)
		return cli.ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner schedule add: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	sc, err := cl.AddSchedule(ctx, planbus.ScheduleSpec{Name: name, Cron: cron, TimeZone: tz, Request: doc, Missed: missed})
	if code, failed := scheduleFailed(ctx, v, io, err); failed {
		return code
	}
	return v.print(io, sc, func(w writer) {
		fmt.Fprintf(w, "schedule %s added: %s%s; each tick submits %s-<sequence>\n", sc.Name, sc.Cron, zoneNote(sc.TimeZone), sc.Name)
	})
}

func zoneNote(tz string) string {
	if tz == "" {
		return ""
	}
	return " (" + tz + ")"
}

// scheduleFailed reports a failed call: 1 for an unknown schedule or an
// unreachable planner, 2 for a refusal of what was given.
func scheduleFailed(ctx context.Context, v *answerVerb, io cli.IO, err error) (int, bool) {
	var rej *client.RejectedError
	if errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeNotFound {
		fmt.Fprintf(io.Stderr, "%s: %v\n", v.name, err)
		return cli.ExitFailed, true
	}
	return v.failed(ctx, io, err)
}

func scheduleList(ctx context.Context, args []string, io cli.IO) int {
	v, code, ok := parseAnswerVerb("planner schedule ls", scheduleUsage, args, io, nil)
	if !ok {
		return code
	}
	if v.f.NArg() != 0 {
		fmt.Fprintln(io.Stderr, "planner schedule ls: takes no arguments"+v.f.LateFlags())
		return cli.ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner schedule ls: %v\n", err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	list, err := cl.Schedules(ctx)
	if code, failed := scheduleFailed(ctx, v, io, err); failed {
		return code
	}
	return v.print(io, planbus.ScheduleList{Schedules: list}, func(w writer) {
		if len(list) == 0 {
			fmt.Fprintln(w, "no schedules (planner schedule add NAME --cron EXPR FILE adds one)")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tCRON\tSTATE\tTICKS KEPT\tLAST TICK\tLAST REQUEST")
		for _, sc := range list {
			state, last := "active", "-"
			if sc.Paused {
				state = "paused"
			}
			if !sc.LastTick.IsZero() {
				last = sc.LastTick.Local().Format(time.DateTime)
			}
			if sc.Missed == planbus.MissedCatchUp {
				state += ", catches up"
			}
			fmt.Fprintf(tw, "%s\t%s%s\t%s\t%d\t%s\t%s\n", sc.Name, sc.Cron, zoneNote(sc.TimeZone), state, sc.Ticks, last, orDash(sc.LastRequestID))
		}
		_ = tw.Flush()
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func scheduleVerb(ctx context.Context, verb string, args []string, io cli.IO) int {
	v, code, ok := parseAnswerVerbAnyOrder("planner schedule "+verb, scheduleUsage, args, io, nil)
	if !ok {
		return code
	}
	pos := v.f.Args()
	if len(pos) != 1 {
		fmt.Fprintf(io.Stderr, "planner schedule %s: want one schedule NAME%s\n", verb, v.f.LateFlags())
		return cli.ExitUsage
	}
	cl, closeConn, err := v.c.dialClient(ctx, v.log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner schedule %s: %v\n", verb, err)
		return cli.CtxExit(ctx, cli.ExitFailed)
	}
	defer closeConn()
	act := map[string]func(context.Context, string) (*planbus.Schedule, error){
		"rm": cl.RemoveSchedule, "pause": cl.PauseSchedule, "resume": cl.ResumeSchedule}[verb]
	sc, err := act(ctx, pos[0])
	if code, failed := scheduleFailed(ctx, v, io, err); failed {
		return code
	}
	done := map[string]string{"rm": "removed", "pause": "paused", "resume": "resumed"}[verb]
	return v.print(io, sc, func(w writer) { fmt.Fprintf(w, "schedule %s %s\n", sc.Name, done) })
}

package execution

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
)

// TestScripts runs the engine scripts in testdata/scripts, as raft's
// rafttest does: each command drives the engine and prints the effects it
// asked for, and the file holds the expected output under each command.
// After a change of behaviour, rewrite them with
//
//	go test ./internal/execution -run TestScripts -rewrite
//
// and read the diff: it is the change, step by step.
//
// Commands (times are milliseconds after the plan's start, default the
// last command's time):
//
//	plan [concurrency=N]          start the plan given as input (Plan JSON)
//	result TOOL ATTEMPT [at=MS]   a result; input: its JSON fields (default {"state":"succeeded"})
//	tick at=MS                    fire every timer the engine asked for that is due by MS, in order
//	approve TOOL [reason=...]     a person's decision, as the planner sends it
//	reject TOOL [reason=...]
//	cancel [reason=...]
//	restore                       store the state, read it back and go on with a new engine
//	state                         print each tool's state
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		s := &script{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

// script is one file's engine and what it has asked for so far.
type script struct {
	e       *Engine
	now     time.Time
	timers  []Timer // asked for and not fired yet
	seq     uint64
	results map[uint64]*planbus.ToolResult
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	arg := func(key string) (string, bool) {
		for _, a := range d.CmdArgs {
			if a.Key == key && len(a.Vals) > 0 {
				return strings.Join(a.Vals, ","), true
			}
		}
		return "", false
	}
	at := func() {
		if ms, ok := arg("at"); ok {
			n, err := strconv.Atoi(ms)
			if err != nil {
				d.Fatalf(t, "at=%s: %v", ms, err)
			}
			s.now = t0.Add(time.Duration(n) * time.Millisecond)
		}
	}
	pos := func(i int) string {
		if len(d.CmdArgs) <= i || len(d.CmdArgs[i].Vals) > 0 {
			d.Fatalf(t, "%s: argument %d missing", d.Cmd, i+1)
		}
		return d.CmdArgs[i].Key
	}
	tool := func(id string) int {
		i, ok := s.e.Index(id)
		if !ok {
			d.Fatalf(t, "no tool %q", id)
		}
		return i
	}
	if d.Cmd != "plan" && s.e == nil {
		d.Fatalf(t, "%s before plan", d.Cmd)
	}
	var fx Effects
	switch d.Cmd {
	case "plan":
		p, err := plan.Decode([]byte(d.Input))
		if err != nil {
			return "error: " + err.Error()
		}
		if p.PlanID == "" {
			p.PlanID, p.RequestID = "p", "r"
		}
		mc := 8
		if v, ok := arg("concurrency"); ok {
			mc, _ = strconv.Atoi(v)
		}
		s.now, s.timers, s.seq, s.results = t0, nil, 0, map[uint64]*planbus.ToolResult{}
		s.e, fx = Start(p, s.now, mc, nil)
	case "result":
		at()
		r := &planbus.ToolResult{}
		in := d.Input
		if in == "" {
			in = `{"state":"succeeded"}`
		}
		if err := json.Unmarshal([]byte(in), r); err != nil {
			d.Fatalf(t, "result: %v", err)
		}
		r.PlanID, r.RequestID, r.ToolID = s.e.Plan().PlanID, s.e.Plan().RequestID, pos(0)
		r.Attempt, _ = strconv.Atoi(pos(1))
		r.Skill = s.e.skillOf(tool(r.ToolID), r.Attempt)
		s.seq++
		s.results[s.seq] = r
		fx = s.e.OnResultSeq(r, s.seq, s.now)
	case "tick":
		at()
		slices.SortStableFunc(s.timers, func(a, b Timer) int { return a.FireAt.Compare(b.FireAt) })
		for len(s.timers) > 0 && !s.timers[0].FireAt.After(s.now) {
			tm := s.timers[0]
			s.timers = s.timers[1:]
			next := s.e.OnTimer(tm, s.now)
			fx.Merge(next)
		}
	case "approve", "reject":
		at()
		kind := TimerApprove
		if d.Cmd == "reject" {
			kind = TimerReject
		}
		reason, _ := arg("reason")
		fx = s.e.OnTimer(Timer{Kind: kind, Index: tool(pos(0)), FireAt: s.now, Reason: reason}, s.now)
	case "cancel":
		reason, _ := arg("reason")
		fx = s.e.Cancel(reason, s.now)
	case "restore":
		s.e = roundTrip(t, s.e, s.results)
		return "restored\n" + s.state()
	case "state":
		return s.state()
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	s.timers = append(s.timers, fx.Timers...)
	return s.print(fx)
}

// ms is t as milliseconds after the plan's start.
func ms(t time.Time) string { return "+" + strconv.FormatInt(t.Sub(t0).Milliseconds(), 10) + "ms" }

// print writes effects one a line, in the order the caller carries them
// out: the state stored, events, releases, timers, the end, cancels.
func (s *script) print(fx Effects) string {
	var b strings.Builder
	p := s.e.Plan()
	if fx.Changed {
		b.WriteString("state changed\n")
	}
	for _, a := range fx.Applied {
		fmt.Fprintf(&b, "applied %s/%d %s", p.Tools[a.Index].ToolID, a.Result.Attempt, a.Result.State)
		if a.Final {
			b.WriteString(" final")
		}
		b.WriteByte('\n')
	}
	for _, ev := range fx.Events {
		fmt.Fprintf(&b, "event %s", ev.Type)
		if ev.ToolID != "" {
			fmt.Fprintf(&b, " %s/%d", ev.ToolID, ev.Attempt)
		}
		if ev.DelayMs > 0 {
			fmt.Fprintf(&b, " delay=%dms", ev.DelayMs)
		}
		if ev.Error != nil {
			fmt.Fprintf(&b, " error=%s/%s", ev.Error.Code, ev.Error.Category)
		}
		if ev.Message != "" {
			fmt.Fprintf(&b, " %q", ev.Message)
		}
		b.WriteByte('\n')
	}
	for _, r := range fx.Releases {
		fmt.Fprintf(&b, "release %s/%d timeout=%dms\n", p.Tools[r.Index].ToolID, r.Attempt, r.TimeoutMs)
	}
	for _, tm := range fx.Timers {
		fmt.Fprintf(&b, "timer %s", tm.Kind)
		if tm.Kind == TimerRetry {
			fmt.Fprintf(&b, " %s/%d", p.Tools[tm.Index].ToolID, tm.Attempt)
		}
		fmt.Fprintf(&b, " at %s\n", ms(tm.FireAt))
	}
	if r := fx.Done; r != nil {
		fmt.Fprintf(&b, "done %s success=%t canReplan=%t", r.State, r.Success, r.CanReplan)
		if r.Error != nil {
			fmt.Fprintf(&b, " error=%s", r.Error.Code)
		}
		if len(r.FailedTools) > 0 {
			fmt.Fprintf(&b, " failed=%s", strings.Join(r.FailedTools, ","))
		}
		b.WriteByte('\n')
		for _, o := range r.Tools {
			fmt.Fprintf(&b, "  %s %s attempts=%d", o.ToolID, o.State, o.Attempts)
			if o.Reason != "" {
				fmt.Fprintf(&b, " reason=%s", o.Reason)
			}
			b.WriteByte('\n')
		}
	}
	if fx.Cancel {
		b.WriteString("cancel running calls\n")
	}
	if b.Len() == 0 {
		return "nothing\n"
	}
	return b.String()
}

// state is each tool's state, and the plan's.
func (s *script) state() string {
	var b strings.Builder
	st := s.e.State()
	fmt.Fprintf(&b, "plan %s\n", st.Status)
	for _, ts := range st.Tools {
		fmt.Fprintf(&b, "  %s %s attempt=%d", ts.ID, ts.State, ts.Attempt)
		if ts.RetryAt != 0 {
			fmt.Fprintf(&b, " retryAt=%s", ms(time.UnixMilli(ts.RetryAt)))
		}
		if ts.Reason != "" {
			fmt.Fprintf(&b, " reason=%s", ts.Reason)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

package progress

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

func TestProgressPrintsEventsInTimeOrder(t *testing.T) {
	var buf bustest.SyncBuffer
	p := New(&buf, false)
	t0 := time.Now().Add(time.Hour) // later than any flush: only close shows them
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// The worker's "started" arrives after the dispatcher's "succeeded".
	p.Event(planbus.Event{Type: planbus.EventPlanStarted, Time: at(0), PlanID: "p", Tools: 1, Message: "1 tool"})
	p.Event(planbus.Event{Type: planbus.EventToolReleased, Time: at(1), PlanID: "p", ToolID: "A", Skill: "echo", Attempt: 1})
	p.Event(planbus.Event{Type: planbus.EventToolSucceeded, Time: at(3), PlanID: "p", ToolID: "A"})
	p.Event(planbus.Event{Type: planbus.EventToolStarted, Time: at(2), PlanID: "p", ToolID: "A", WorkerID: "w1"})
	p.Event(planbus.Event{Type: planbus.EventPlanSucceeded, Time: at(4), PlanID: "p"})
	p.Close()
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		f := strings.Fields(line)
		order = append(order, strings.Join(f[1:3], " "))
	}
	want := []string{"plan p", "A released", "A started", "A succeeded", "plan succeeded"}
	if strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("lines in order %q, want %q:\n%s", order, want, buf.String())
	}
}

func TestProgressSummarisesLargePlans(t *testing.T) {
	const n = 200
	for _, verbose := range []bool{false, true} {
		t.Run(fmt.Sprintf("verbose=%v", verbose), func(t *testing.T) {
			var buf bustest.SyncBuffer
			p := New(&buf, verbose)
			t0 := time.Now().Add(time.Hour) // later than any flush: only close shows them
			p.Event(planbus.Event{Type: planbus.EventPlanStarted, Time: t0, PlanID: "big", Tools: n, Message: "200 tools"})
			for i := range n {
				id := fmt.Sprintf("t%d", i)
				at := t0.Add(time.Duration(i+1) * time.Millisecond)
				p.Event(planbus.Event{Type: planbus.EventToolReleased, Time: at, PlanID: "big", ToolID: id, Attempt: 1})
				end := planbus.Event{Type: planbus.EventToolSucceeded, Time: at.Add(time.Microsecond), PlanID: "big", ToolID: id}
				if i == 7 {
					end = planbus.Event{Type: planbus.EventToolFailed, Time: end.Time, PlanID: "big", ToolID: id,
						Error: &planbus.ErrorInfo{Code: "BOOM", Message: "t7 broke"}}
				}
				p.Event(end)
			}
			p.Event(planbus.Event{Type: planbus.EventPlanFailed, Time: t0.Add(time.Second), PlanID: "big"})
			p.Close()
			out := buf.String()
			lines := strings.Count(out, "\n")
			if verbose {
				if lines < 2*n {
					t.Errorf("verbose: %d lines, want one per event (%d)", lines, 2*n+2)
				}
				return
			}
			if lines > 10 {
				t.Errorf("%d lines for a %d-tool plan, want a handful:\n%s", lines, n, out)
			}
			for _, want := range []string{"plan big started", "t7", "BOOM t7 broke", "plan failed",
				"200/200 done · 199 succeeded · 1 failed"} {
				if !strings.Contains(out, want) {
					t.Errorf("output does not say %q:\n%s", want, out)
				}
			}
		})
	}
}

// A tool that waits for approval says so with its prompt and the command
// that approves it, in a plan of any size; approvals, rejections and
// reused results have lines of their own.
func TestProgressShowsApprovalsAndReuse(t *testing.T) {
	var buf bustest.SyncBuffer
	p := New(&buf, false)
	t0 := time.Now().Add(time.Hour)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p.Event(planbus.Event{Type: planbus.EventPlanStarted, Time: at(0), RequestID: "r7", PlanID: "r7-2", Tools: 3, Message: "3 tools"})
	p.Event(planbus.Event{Type: planbus.EventToolReused, Time: at(1), RequestID: "r7", PlanID: "r7-2", ToolID: "build",
		Message: `took the output of tool "build" of plan r7-1 instead of running`})
	p.Event(planbus.Event{Type: planbus.EventToolWaiting, Time: at(2), RequestID: "r7", PlanID: "r7-2", ToolID: "deploy", Message: "Deploy to production?"})
	p.Event(planbus.Event{Type: planbus.EventToolApproved, Time: at(3), RequestID: "r7", PlanID: "r7-2", ToolID: "deploy", Message: "ok by ops"})
	p.Event(planbus.Event{Type: planbus.EventToolRejected, Time: at(4), RequestID: "r7", PlanID: "r7-2", ToolID: "notify"})
	p.Close()
	out := buf.String()
	for _, want := range []string{
		`build            reused: took the output of tool "build" of plan r7-1 instead of running`,
		"deploy           waiting for approval: Deploy to production? — planner approve r7 deploy",
		"deploy           approved: ok by ops",
		"notify           rejected\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}

	// In a large plan's summary, the wait still gets its line.
	var big bustest.SyncBuffer
	p = New(&big, false)
	p.Event(planbus.Event{Type: planbus.EventPlanStarted, Time: at(0), RequestID: "r8", PlanID: "r8-1", Tools: 100, Message: "100 tools"})
	for i := range 99 {
		p.Event(planbus.Event{Type: planbus.EventToolReused, Time: at(1), RequestID: "r8", PlanID: "r8-1", ToolID: fmt.Sprintf("t%d", i)})
	}
	p.Event(planbus.Event{Type: planbus.EventToolWaiting, Time: at(2), RequestID: "r8", PlanID: "r8-1", ToolID: "gate", Message: "go on?"})
	p.Close()
	for _, want := range []string{"waiting for approval: go on? — planner approve r8 gate", "99/100 done · 99 reused · 1 waiting for approval"} {
		if !strings.Contains(big.String(), want) {
			t.Errorf("summary does not say %q:\n%s", want, big.String())
		}
	}
}

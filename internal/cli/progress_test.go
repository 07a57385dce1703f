package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/plan"
)

func TestProgressPrintsEventsInTimeOrder(t *testing.T) {
	var buf syncBuffer
	p := newProgress(&buf, false)
	t0 := time.Now().Add(time.Hour) // later than any flush: only close shows them
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// The worker's "started" arrives after the dispatcher's "succeeded".
	p.event(plan.Event{Type: plan.EventPlanStarted, Time: at(0), PlanID: "p", Tools: 1, Message: "1 tool"})
	p.event(plan.Event{Type: plan.EventToolReleased, Time: at(1), PlanID: "p", ToolID: "A", Skill: "echo", Attempt: 1})
	p.event(plan.Event{Type: plan.EventToolSucceeded, Time: at(3), PlanID: "p", ToolID: "A"})
	p.event(plan.Event{Type: plan.EventToolStarted, Time: at(2), PlanID: "p", ToolID: "A", WorkerID: "w1"})
	p.event(plan.Event{Type: plan.EventPlanSucceeded, Time: at(4), PlanID: "p"})
	p.close()
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
			var buf syncBuffer
			p := newProgress(&buf, verbose)
			t0 := time.Now().Add(time.Hour) // later than any flush: only close shows them
			p.event(plan.Event{Type: plan.EventPlanStarted, Time: t0, PlanID: "big", Tools: n, Message: "200 tools"})
			for i := range n {
				id := fmt.Sprintf("t%d", i)
				at := t0.Add(time.Duration(i+1) * time.Millisecond)
				p.event(plan.Event{Type: plan.EventToolReleased, Time: at, PlanID: "big", ToolID: id, Attempt: 1})
				end := plan.Event{Type: plan.EventToolSucceeded, Time: at.Add(time.Microsecond), PlanID: "big", ToolID: id}
				if i == 7 {
					end = plan.Event{Type: plan.EventToolFailed, Time: end.Time, PlanID: "big", ToolID: id,
						Error: &plan.ErrorInfo{Code: "BOOM", Message: "t7 broke"}}
				}
				p.event(end)
			}
			p.event(plan.Event{Type: plan.EventPlanFailed, Time: t0.Add(time.Second), PlanID: "big"})
			p.close()
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

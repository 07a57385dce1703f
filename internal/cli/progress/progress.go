// Package progress shows a run's events on stderr as planner run and
// planner watch print them: a line per event, timed from the first, or
// for a large plan one live summary line. Events from several processes
// are held a moment so that the lines come out in time order.
package progress

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/cli"
)

// Progress display settings.
const (
	// summaryAbove: a plan with more tools than this is shown as one
	// summary line, not a line per event (unless verbose).
	summaryAbove = 50
	// reorderHold is how long an event waits for earlier ones from other
	// processes (a worker's "started" can arrive after the dispatcher's
	// "succeeded"), so lines come out in time order.
	reorderHold = 30 * time.Millisecond
	// redrawEvery is how often a terminal's summary line is redrawn.
	redrawEvery = 100 * time.Millisecond
	// plainEvery is how often a summary line is printed when stderr is not
	// a terminal.
	plainEvery = 2 * time.Second
)

// Progress shows a run's events on stderr: a line per event, timed from
// the first, for small plans (and for any plan when verbose); for plans of
// more than summaryAbove tools, one live summary line (counts by state,
// rate, elapsed, ETA) on a terminal, or a plain summary line every few
// seconds otherwise. Events of the request (generation, replans, skill
// health) and of the plan's start and end are always lines of their own.
// Call Close when the run ends. Event and Close may be called from any
// goroutine.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	verbose bool
	tty     bool
	start   time.Time
	held    []planbus.Event // waiting reorderHold for earlier events

	sum       *summary // the plan being summarised, if any
	drawn     bool     // a summary line is on the terminal now
	lastPlain time.Time
	closed    bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// ApproveFlags go between "planner approve" and the ids in the line
	// of a tool waiting for approval: how to reach a private node.
	ApproveFlags string
}

// summary counts a large plan's tools by state.
type summary struct {
	planID  string
	total   int
	started time.Time
	state   map[string]planbus.EventType // tool id -> its last event type
	counts  map[planbus.EventType]int    // event type -> tools whose last event it is
}

// New shows events on w, a line for each of them when verbose.
func New(w io.Writer, verbose bool) *Progress {
	p := &Progress{w: w, verbose: verbose, tty: cli.IsTerminal(w), stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func (p *Progress) loop() {
	defer close(p.done)
	t := time.NewTicker(min(reorderHold, redrawEvery) / 2)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			p.flush(now.Add(-reorderHold))
			p.tick(now)
			p.mu.Unlock()
		}
	}
}

// Event takes an event as it arrives.
func (p *Progress) Event(ev planbus.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.held = append(p.held, ev)
	}
}

// Close prints what is still held and the last summary. It may be called
// more than once; only the first call does anything.
func (p *Progress) Close() {
	p.closeOnce.Do(p.finish)
}

func (p *Progress) finish() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flush(time.Time{})
	if p.sum != nil {
		p.endSummary()
	}
	p.closed = true
}

// flush shows, in time order, the held events that arrived before cutoff
// (all of them when cutoff is zero).
func (p *Progress) flush(cutoff time.Time) {
	if len(p.held) == 0 {
		return
	}
	slices.SortStableFunc(p.held, func(a, b planbus.Event) int { return a.Time.Compare(b.Time) })
	n := len(p.held)
	if !cutoff.IsZero() {
		n = 0
		for n < len(p.held) && p.held[n].Time.Before(cutoff) {
			n++
		}
	}
	for _, ev := range p.held[:n] {
		p.show(ev)
	}
	p.held = append(p.held[:0], p.held[n:]...)
}

func (p *Progress) show(ev planbus.Event) {
	if p.start.IsZero() {
		p.start = ev.Time
	}
	if ev.Type == planbus.EventPlanStarted && !p.verbose && ev.Tools > summaryAbove {
		p.sum = &summary{planID: ev.PlanID, total: ev.Tools, started: ev.Time,
			state: make(map[string]planbus.EventType, ev.Tools), counts: map[planbus.EventType]int{}}
	}
	if s := p.sum; s != nil && ev.PlanID == s.planID && strings.HasPrefix(string(ev.Type), "tool.") {
		if old, ok := s.state[ev.ToolID]; ok {
			s.counts[old]--
		}
		s.state[ev.ToolID] = ev.Type
		s.counts[ev.Type]++
		switch ev.Type {
		case planbus.EventToolFailed, planbus.EventToolTimeout, planbus.EventToolRejected, planbus.EventToolWaiting:
			p.line(ev) // failures, and a wait for a person, are worth a line of their own
		}
		return
	}
	p.line(ev)
	if s := p.sum; s != nil && ev.PlanID == s.planID && isPlanEnd(ev.Type) {
		p.endSummary()
	}
}

func isPlanEnd(t planbus.EventType) bool {
	return t == planbus.EventPlanSucceeded || t == planbus.EventPlanFailed || t == planbus.EventPlanTimeout || t == planbus.EventPlanRejected ||
		t == planbus.EventPlanCancelled
}

// endSummary prints the summary one last time and stops summarising.
func (p *Progress) endSummary() {
	p.clearLine()
	fmt.Fprintln(p.w, p.summaryText(time.Now()))
	p.sum = nil
}

// tick redraws or prints the summary when it is due.
func (p *Progress) tick(now time.Time) {
	if p.sum == nil {
		return
	}
	switch {
	case p.tty:
		fmt.Fprint(p.w, "\r\x1b[K"+p.summaryText(now))
		p.drawn = true
	case now.Sub(p.lastPlain) >= plainEvery:
		p.lastPlain = now
		fmt.Fprintln(p.w, p.summaryText(now))
	}
}

func (p *Progress) clearLine() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

func (p *Progress) summaryText(now time.Time) string {
	s := p.sum
	c := s.counts
	done := c[planbus.EventToolSucceeded] + c[planbus.EventToolReused] + c[planbus.EventToolFailed] + c[planbus.EventToolTimeout] +
		c[planbus.EventToolRejected] + c[planbus.EventToolSkipped] + c[planbus.EventToolCancelled]
	running := c[planbus.EventToolReleased] + c[planbus.EventToolStarted]
	elapsed := now.Sub(s.started)
	var b strings.Builder
	fmt.Fprintf(&b, "%8s  plan %s: %d/%d done", ms(now.Sub(p.start)), s.planID, done, s.total)
	for _, part := range []struct {
		n    int
		what string
	}{
		{c[planbus.EventToolSucceeded], "succeeded"}, {c[planbus.EventToolReused], "reused"},
		{c[planbus.EventToolFailed] + c[planbus.EventToolTimeout] + c[planbus.EventToolRejected], "failed"},
		{c[planbus.EventToolSkipped], "skipped"}, {c[planbus.EventToolCancelled], "cancelled"},
		{running, "running"}, {c[planbus.EventToolRetrying], "retrying"}, {c[planbus.EventToolWaiting], "waiting for approval"},
	} {
		if part.n > 0 {
			fmt.Fprintf(&b, " · %d %s", part.n, part.what)
		}
	}
	if elapsed > 0 && done > 0 {
		rate := float64(done) / elapsed.Seconds()
		fmt.Fprintf(&b, " · %.0f tools/s", rate)
		if left := s.total - done; left > 0 {
			fmt.Fprintf(&b, " · ETA %s", ms(time.Duration(float64(left)/rate*float64(time.Second))))
		}
	}
	fmt.Fprintf(&b, " · %s elapsed", ms(elapsed))
	return b.String()
}

// line prints one event as a line.
func (p *Progress) line(ev planbus.Event) {
	p.clearLine()
	at := ev.Time.Sub(p.start)
	var what string
	switch ev.Type {
	case "request.accepted", "request.duplicate", "request.generating", "request.generated", "request.replanning",
		"request.succeeded", "request.failed", "request.fallback", "request.cancelled":
		fmt.Fprintf(p.w, "%8s  %s: %s\n", ms(at), strings.TrimPrefix(string(ev.Type), "request."), ev.Message)
		return
	case planbus.EventSkillHealth:
		fmt.Fprintf(p.w, "%8s  skill %s: %s -> %s\n", ms(at), ev.Skill, ev.From, ev.To)
		return
	case "agent.started", "agent.goal.selected", "agent.goal.succeeded", "agent.goal.failed",
		"agent.preempted", "agent.replanned", "agent.idle", "agent.stopped", "agent.gave_up":
		fmt.Fprintf(p.w, "%8s  agent %s: %s\n", ms(at), strings.TrimPrefix(string(ev.Type), "agent."), ev.Message)
		return
	case planbus.EventPlanStarted:
		fmt.Fprintf(p.w, "%8s  plan %s started: %s\n", ms(at), ev.PlanID, ev.Message)
		return
	case planbus.EventPlanSucceeded:
		fmt.Fprintf(p.w, "%8s  plan succeeded in %s\n", ms(at), ms(time.Duration(ev.DurationMs*float64(time.Millisecond))))
		return
	case planbus.EventPlanFailed, planbus.EventPlanTimeout, planbus.EventPlanRejected, planbus.EventPlanCancelled:
		msg := strings.TrimPrefix(string(ev.Type), "plan.")
		if ev.Error != nil {
			msg += ": " + ev.Error.Message
		}
		fmt.Fprintf(p.w, "%8s  plan %s\n", ms(at), msg)
		return
	case planbus.EventToolReleased:
		what = fmt.Sprintf("released (%s, attempt %d)", ev.Skill, ev.Attempt)
	case planbus.EventToolStarted:
		what = "started on " + ev.WorkerID
	case planbus.EventToolSucceeded:
		what = fmt.Sprintf("succeeded in %s", ms(time.Duration(ev.DurationMs*float64(time.Millisecond))))
	case planbus.EventToolRetrying:
		what = fmt.Sprintf("failed (%s), retry in %dms", errText(ev.Error), ev.DelayMs)
	case planbus.EventToolFailed:
		what = "failed: " + errText(ev.Error)
	case planbus.EventToolTimeout:
		what = "timed out: " + errText(ev.Error)
	case planbus.EventToolSkipped, planbus.EventToolCancelled:
		what = strings.TrimPrefix(string(ev.Type), "tool.") + ": " + ev.Message
	case planbus.EventToolWaiting:
		what = fmt.Sprintf("waiting for approval: %s — planner approve%s %s %s", ev.Message, p.ApproveFlags, ev.RequestID, ev.ToolID)
	case planbus.EventToolApproved, planbus.EventToolRejected:
		what = strings.TrimPrefix(string(ev.Type), "tool.")
		if ev.Message != "" {
			what += ": " + ev.Message
		}
	case planbus.EventToolReused:
		what = "reused: " + ev.Message
	default:
		what = string(ev.Type)
	}
	fmt.Fprintf(p.w, "%8s  %-16s %s\n", ms(at), ev.ToolID, what)
}

func errText(e *planbus.ErrorInfo) string {
	if e == nil {
		return "no error given"
	}
	return string(e.Code) + " " + e.Message
}

func ms(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	case d < 10*time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(100 * time.Millisecond).String()
}

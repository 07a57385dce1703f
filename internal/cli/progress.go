package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/planbus/planbus/internal/plan"
)

type flagDef = flag.Flag

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// progress prints one line per event, timed from the plan's start.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

func (p *progress) event(ev plan.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		p.start = ev.Time
	}
	at := ev.Time.Sub(p.start)
	var what string
	switch ev.Type {
	case "request.accepted", "request.generating", "request.generated", "request.replanning",
		"request.succeeded", "request.failed", "request.fallback":
		fmt.Fprintf(p.w, "%8s  %s: %s\n", ms(at), strings.TrimPrefix(ev.Type, "request."), ev.Message)
		return
	case plan.EventSkillHealth:
		fmt.Fprintf(p.w, "%8s  skill %s: %s -> %s\n", ms(at), ev.Skill, ev.From, ev.To)
		return
	case plan.EventPlanStarted:
		fmt.Fprintf(p.w, "%8s  plan %s started: %s\n", ms(at), ev.PlanID, ev.Message)
		return
	case plan.EventPlanSucceeded:
		fmt.Fprintf(p.w, "%8s  plan succeeded in %s\n", ms(at), ms(time.Duration(ev.DurationMs*float64(time.Millisecond))))
		return
	case plan.EventPlanFailed, plan.EventPlanTimeout, plan.EventPlanRejected:
		msg := strings.TrimPrefix(ev.Type, "plan.")
		if ev.Error != nil {
			msg += ": " + ev.Error.Message
		}
		fmt.Fprintf(p.w, "%8s  plan %s\n", ms(at), msg)
		return
	case plan.EventToolReleased:
		what = fmt.Sprintf("released (%s, attempt %d)", ev.Skill, ev.Attempt)
	case plan.EventToolStarted:
		what = "started on " + ev.WorkerID
	case plan.EventToolSucceeded:
		what = fmt.Sprintf("succeeded in %s", ms(time.Duration(ev.DurationMs*float64(time.Millisecond))))
	case plan.EventToolRetrying:
		what = fmt.Sprintf("failed (%s), retry in %dms", errText(ev.Error), ev.DelayMs)
	case plan.EventToolFailed:
		what = "failed: " + errText(ev.Error)
	case plan.EventToolTimeout:
		what = "timed out: " + errText(ev.Error)
	case plan.EventToolSkipped, plan.EventToolCancelled:
		what = strings.TrimPrefix(ev.Type, "tool.") + ": " + ev.Message
	default:
		what = ev.Type
	}
	fmt.Fprintf(p.w, "%8s  %-16s %s\n", ms(at), ev.ToolID, what)
}

func errText(e *plan.ErrorInfo) string {
	if e == nil {
		return "no error given"
	}
	return e.Code + " " + e.Message
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

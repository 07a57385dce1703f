package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
)

// Worker is the tool workers' metrics, recorded by the skill middleware
// Middleware returns. A nil *Worker records nothing.
type Worker struct {
	calls     *prometheus.CounterVec
	inFlight  *prometheus.GaugeVec
	queueWait *prometheus.HistogramVec
	duration  *prometheus.HistogramVec
}

// Worker returns the tool workers' metrics of the process, registering
// them on first use.
func (r *Registry) Worker() *Worker {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.worker != nil {
		return r.worker
	}
	w := &Worker{
		calls: r.counterVec("worker_calls_total",
			"Tool calls a worker's handlers finished, by skill and state (succeeded, failed, timeout, cancelled).", "skill", "state"),
		inFlight: r.gaugeVec("worker_calls_in_flight", "Tool calls running in this process's workers, by skill.", "skill"),
		queueWait: r.histogramVec("tool_queue_wait_seconds",
			"How long tool calls waited from their release by a dispatcher to their start on a worker, by skill (across two machines' clocks).", "skill"),
		duration: r.histogramVec("worker_call_duration_seconds", "How long tool calls ran in a worker's handler, by skill.", "skill"),
	}
	r.worker = w
	return w
}

// Middleware records each call a worker runs: its wait in the queue (from
// the call's releasedAt), the calls in flight, and its duration and state
// when the handler returns. It goes in worker.WithMiddleware; it sees the
// errors of the input check and of the timeout, which sit inside it.
// With a nil *Worker it passes calls through.
func (w *Worker) Middleware() skill.Middleware {
	return func(next skill.Handler) skill.Handler {
		if w == nil {
			return next
		}
		return skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			start := time.Now()
			if !call.ReleasedAt.IsZero() {
				w.queueWait.WithLabelValues(call.Skill).Observe(seconds(start.Sub(call.ReleasedAt)))
			}
			g := w.inFlight.WithLabelValues(call.Skill)
			g.Inc()
			state := planbus.ToolFailed // a panic passes through as a failure
			defer func() {
				g.Dec()
				w.calls.WithLabelValues(call.Skill, string(state)).Inc()
				w.duration.WithLabelValues(call.Skill).Observe(seconds(time.Since(start)))
			}()
			res, err := next.Handle(ctx, call)
			state = callState(err)
			return res, err
		})
	}
}

// callState is the state of a call whose handler returned err.
func callState(err error) planbus.ToolState {
	if err == nil {
		return planbus.ToolSucceeded
	}
	info, _ := skill.ErrorInfo(err)
	switch info.Category {
	case planbus.CategoryTimeout:
		return planbus.ToolTimeout
	case planbus.CategoryCancelled:
		return planbus.ToolCancelled
	}
	return planbus.ToolFailed
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/health"
)

// Reasons a dispatcher rejects a tool result (planbus_results_rejected_total).
const (
	RejectInvalid      = "invalid"       // not a valid tool result
	RejectWrongSubject = "wrong_subject" // published on another plan's subject
	RejectBadToken     = "bad_token"     // without its call's token
)

var (
	planStates   = []planbus.PlanState{planbus.PlanSucceeded, planbus.PlanFailed, planbus.PlanTimeout, planbus.PlanCancelled, planbus.PlanRejected}
	toolStates   = []planbus.ToolState{planbus.ToolSucceeded, planbus.ToolFailed, planbus.ToolTimeout, planbus.ToolCancelled}
	healthStates = []string{health.Healthy, health.Degraded, health.TemporaryFailure, health.PermanentFailure}
)

// Dispatcher is the dispatchers' metrics. A nil *Dispatcher records
// nothing.
type Dispatcher struct {
	plansStarted      prometheus.Counter
	plansEnded        *prometheus.CounterVec
	released          *prometheus.CounterVec
	attempts          *prometheus.CounterVec
	attemptDuration   *prometheus.HistogramVec
	healthTransitions *prometheus.CounterVec
	resultsRejected   *prometheus.CounterVec
	conflicts         prometheus.Counter
	dropped           prometheus.Counter
}

// Dispatcher returns the dispatchers' metrics of the process, registering
// them on first use.
func (r *Registry) Dispatcher() *Dispatcher {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dispatcher != nil {
		return r.dispatcher
	}
	d := &Dispatcher{
		plansStarted: r.counter("plans_started_total", "Plans a dispatcher started (valid and stored; their tools released)."),
		plansEnded: r.counterVec("plans_ended_total",
			"Plans that ended, by state: succeeded, failed, timeout, cancelled, or rejected (invalid; never started).", "state"),
		released: r.counterVec("tool_calls_released_total", "Tool calls released to workers, retries included, by skill.", "skill"),
		attempts: r.counterVec("tool_attempts_total",
			"Tool attempts whose result a dispatcher applied to their plan, by skill and state (succeeded, failed, timeout).", "skill", "state"),
		attemptDuration: r.histogramVec("tool_attempt_duration_seconds",
			"How long tool attempts ran on their worker (the result's durationMs), by skill.", "skill"),
		healthTransitions: r.counterVec("skill_health_transitions_total",
			"Skill health changes, summed over sessions, by skill and the states it went from and to.", "skill", "from", "to"),
		resultsRejected: r.counterVec("results_rejected_total",
			"Tool results dropped unapplied, by reason: invalid, wrong_subject (another plan's subject), bad_token (not its call's token: forged, or a worker that does not echo it).", "reason"),
		conflicts: r.conflicts.WithLabelValues(ComponentDispatcher),
		dropped:   r.dropped.WithLabelValues(ComponentDispatcher),
	}
	for _, s := range planStates {
		d.plansEnded.WithLabelValues(string(s))
	}
	for _, reason := range []string{RejectInvalid, RejectWrongSubject, RejectBadToken} {
		d.resultsRejected.WithLabelValues(reason)
	}
	r.dispatcher = d
	return d
}

// PlanStarted counts a plan started.
func (d *Dispatcher) PlanStarted() {
	if d != nil {
		d.plansStarted.Inc()
	}
}

// PlanEnded counts a plan that ended in state (a rejected plan included).
func (d *Dispatcher) PlanEnded(state planbus.PlanState) {
	if d != nil {
		d.plansEnded.WithLabelValues(label(state, planStates...)).Inc()
	}
}

// Released counts a tool call released on skill's queue.
func (d *Dispatcher) Released(skill string) {
	if d != nil {
		d.released.WithLabelValues(skill).Inc()
	}
}

// Attempt records an attempt's result applied to its plan: its state and
// how long it ran on its worker (zero when the result does not say, as
// for a call that never reached one).
func (d *Dispatcher) Attempt(skill string, state planbus.ToolState, ran time.Duration) {
	if d == nil {
		return
	}
	d.attempts.WithLabelValues(skill, label(state, toolStates...)).Inc()
	if ran > 0 {
		d.attemptDuration.WithLabelValues(skill).Observe(seconds(ran))
	}
}

// HealthChanged counts a skill's health going from one state to another.
func (d *Dispatcher) HealthChanged(skill, from, to string) {
	if d != nil {
		d.healthTransitions.WithLabelValues(skill, label(from, healthStates...), label(to, healthStates...)).Inc()
	}
}

// ResultRejected counts a result dropped for reason (Reject*).
func (d *Dispatcher) ResultRejected(reason string) {
	if d != nil {
		d.resultsRejected.WithLabelValues(reason).Inc()
	}
}

// Conflict counts a lost compare-and-set on a plan's state.
func (d *Dispatcher) Conflict() {
	if d != nil {
		d.conflicts.Inc()
	}
}

// Dropped counts a message given up or an invalid one terminated.
func (d *Dispatcher) Dropped() {
	if d != nil {
		d.dropped.Inc()
	}
}

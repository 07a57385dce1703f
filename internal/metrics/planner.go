package metrics

import (
	"time"

	"github.com/planbus/planbus"
	"github.com/prometheus/client_golang/prometheus"
)

// Generation outcomes (planbus_generations_total).
const (
	GenSucceeded = "succeeded" // a plan
	GenFailed    = "failed"    // no plan; the loop may try again
	GenPermanent = "permanent" // no plan, and the request falls back
)

// Kinds are the request kinds a kind label may take; any other is
// counted as "other".
var Kinds = []string{"plan", "external", "htn", "goap", "template"}

// Planner is the planners' metrics. A nil *Planner records nothing.
type Planner struct {
	requests    *prometheus.CounterVec
	ended       *prometheus.CounterVec
	generations *prometheus.CounterVec
	genDuration *prometheus.HistogramVec
	replans     *prometheus.CounterVec
	conflicts   prometheus.Counter
	dropped     prometheus.Counter
}

// Planner returns the planners' metrics of the process, registering them
// on first use.
func (r *Registry) Planner() *Planner {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.planner != nil {
		return r.planner
	}
	p := &Planner{
		requests: r.counterVec("requests_started_total", "Requests a planner took up (accepted and queued, then started), by kind.", "kind"),
		ended: r.counterVec("requests_ended_total",
			"Requests that ended, by status: succeeded, failed, fallback, cancelled.", "status"),
		generations: r.counterVec("generations_total",
			"Plan generations, by kind (htn, goap, template, external, plan) and outcome (succeeded, failed, permanent).", "kind", "outcome"),
		genDuration: r.histogramVec("generation_duration_seconds", "How long plan generations took, by kind.", "kind"),
		replans:     r.counterVec("replans_total", "Failed plans generated again without their failed skills, by kind.", "kind"),
		conflicts:   r.conflicts.WithLabelValues(ComponentPlanner),
		dropped:     r.dropped.WithLabelValues(ComponentPlanner),
	}
	r.planner = p
	return p
}

// kind bounds a request's kind to the known ones.
func (p *Planner) kind(k string) string { return label(k, Kinds...) }

// RequestStarted counts a request taken up for the first time.
func (p *Planner) RequestStarted(kind string) {
	if p != nil {
		p.requests.WithLabelValues(p.kind(kind)).Inc()
	}
}

// RequestEnded counts a request that ended with status.
func (p *Planner) RequestEnded(status planbus.RequestStatus) {
	if p != nil {
		p.ended.WithLabelValues(label(status, planbus.StatusSucceeded, planbus.StatusFailed, planbus.StatusFallback, planbus.StatusCancelled)).Inc()
	}
}

// Generated records a generation of kind: its outcome (Gen*) and how long
// it took.
func (p *Planner) Generated(kind, outcome string, took time.Duration) {
	if p == nil {
		return
	}
	k := p.kind(kind)
	p.generations.WithLabelValues(k, outcome).Inc()
	p.genDuration.WithLabelValues(k).Observe(seconds(took))
}

// Replanned counts a failed plan of a request of kind going back to
// generation.
func (p *Planner) Replanned(kind string) {
	if p != nil {
		p.replans.WithLabelValues(p.kind(kind)).Inc()
	}
}

// Conflict counts a lost compare-and-set on a request's loop state.
func (p *Planner) Conflict() {
	if p != nil {
		p.conflicts.Inc()
	}
}

// Dropped counts a message the planner gave up or terminated as invalid.
func (p *Planner) Dropped() {
	if p != nil {
		p.dropped.Inc()
	}
}

package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every planbus metric.
const namespace = "planbus"

// Component label values.
const (
	ComponentDispatcher = "dispatcher"
	ComponentPlanner    = "planner"
	ComponentWorker     = "worker"
)

// DurationBuckets are the buckets, in seconds, of planbus's duration
// histograms: from a millisecond (an echo) to five minutes (a slow tool or
// a long queue).
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Registry is a process's metrics. Make it with New; a nil *Registry is
// valid and records nothing. Its methods are safe for concurrent use.
type Registry struct {
	reg *prometheus.Registry
	// names are the metric families registered, for Names.
	names []string
	mu    sync.Mutex

	conflicts *prometheus.CounterVec
	dropped   *prometheus.CounterVec

	dispatcher *Dispatcher
	planner    *Planner
	worker     *Worker
	skills     *skillCollector

	// conn is the process's NATS connection once it has one (SetConn):
	// planbus_nats_connected and Healthy read it.
	conn atomic.Pointer[nats.Conn]
}

// New makes a process's registry, with the Go runtime and process
// collectors (go_*, process_*) and planbus's families shared by every
// component.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.conflicts = r.counterVec("cas_conflicts_total",
		"Compare-and-set writes lost to another writer (the batch or step is applied again to the fresher state), by component.", "component")
	r.dropped = r.counterVec("messages_dropped_total",
		"Messages given up at their delivery limit, and invalid ones terminated, by component.", "component")
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: r.fqName("nats_connected"),
		Help: "1 while the process is connected to a NATS server, else 0 (not yet, or between a lost server and the next)."},
		func() float64 {
			if r.Healthy() == nil {
				return 1
			}
			return 0
		}))
	return r
}

// SetConn gives the registry the process's NATS connection, once it has
// one: planbus_nats_connected and Healthy follow its state.
func (r *Registry) SetConn(nc *nats.Conn) {
	if r != nil {
		r.conn.Store(nc)
	}
}

// Healthy is nil while the process is connected to NATS, else says why
// not: what /healthz answers.
func (r *Registry) Healthy() error {
	if r == nil {
		return errors.New("no metrics registry")
	}
	nc := r.conn.Load()
	if nc == nil {
		return errors.New("starting: not connected to NATS yet")
	}
	if st := nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("not connected to NATS (%s)", st)
	}
	return nil
}

// Handler serves the registry in the Prometheus exposition format (with
// OpenMetrics when the scraper asks for it). A collector that fails is
// reported in the response's error log and the rest is served.
func (r *Registry) Handler() http.Handler {
	if r == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		Timeout:           10 * time.Second,
	})
}

// Gatherer is the registry, for tests and other exporters.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Names returns the name of every planbus metric family the code
// registers, sorted: what dashboards and alert rules may query.
func Names() []string {
	r := New()
	r.Dispatcher()
	r.Planner()
	r.Worker()
	r.skillsCollector()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.names)
	slices.Sort(out)
	return out
}

func (r *Registry) fqName(name string) string {
	full := prometheus.BuildFQName(namespace, "", name)
	r.names = append(r.names, full)
	return full
}

func (r *Registry) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: r.fqName(name), Help: help})
	r.reg.MustRegister(c)
	return c
}

func (r *Registry) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.fqName(name), Help: help}, labels)
	r.reg.MustRegister(c)
	return c
}

func (r *Registry) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: r.fqName(name), Help: help}, labels)
	r.reg.MustRegister(g)
	return g
}

func (r *Registry) histogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: r.fqName(name), Help: help, Buckets: DurationBuckets}, labels)
	r.reg.MustRegister(h)
	return h
}

// seconds is d in seconds, never below zero: a duration measured across
// two machines' clocks can come out negative.
func seconds(d time.Duration) float64 { return max(d.Seconds(), 0) }

// label bounds a label value taken from input: known values pass, anything
// else is "other", so a caller cannot grow the series without bound.
func label[S ~string](v S, known ...S) string {
	if slices.Contains(known, v) {
		return string(v)
	}
	return "other"
}

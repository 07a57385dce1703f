package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/planbus/planbus/internal/bus"
)

// SkillSource is what the skill collector reads when Prometheus scrapes:
// the skills to report, their consumers' info through JS, and the tool
// workers' micro service answers through NC. A dispatcher adds itself as
// a source while it runs; its role may read the skill consumers' info and
// ask $SRV.INFO.planbus-toolworker.
type SkillSource struct {
	// Skills lists the skills to report: those advertised in the skills
	// bucket.
	Skills func() []string
	JS     jetstream.JetStream
	NC     *nats.Conn
}

// CollectTimeout bounds what one scrape of the skill collector waits for.
const CollectTimeout = 3 * time.Second

// DiscoveryWait is how long a scrape collects the tool workers' answers
// to $SRV.INFO: answers come from every worker at once, and there is no
// telling how many to wait for.
const DiscoveryWait = 300 * time.Millisecond

// skillCollector reports each skill's backlog and workers, read at scrape
// time from the newest source still running.
type skillCollector struct {
	backlog, ackPending, workers, up *prometheus.Desc

	mu      sync.Mutex
	sources []*SkillSource
}

func (r *Registry) skillsCollector() *skillCollector {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.skills != nil {
		return r.skills
	}
	c := &skillCollector{
		backlog: prometheus.NewDesc(r.fqName("skill_backlog_calls"),
			"Tool calls waiting in a skill's queue for a worker (its consumer's pending count), by skill. Every dispatcher reports it: aggregate with max.",
			[]string{"skill"}, nil),
		ackPending: prometheus.NewDesc(r.fqName("skill_ack_pending_calls"),
			"Tool calls handed to a skill's workers and not yet acknowledged (running, or held by a worker that died until their ack wait passes), by skill.",
			[]string{"skill"}, nil),
		workers: prometheus.NewDesc(r.fqName("skill_workers"),
			"Tool workers serving a skill (instances of the planbus-toolworker micro service with an endpoint for it), by skill.",
			[]string{"skill"}, nil),
		up: prometheus.NewDesc(r.fqName("skill_collect_success"),
			"1 if the last scrape read every skill's consumer and the workers, else 0.", nil, nil),
	}
	r.reg.MustRegister(c)
	r.skills = c
	return c
}

// AddSkillSource makes the process report each skill's backlog and
// workers from src; remove stops that. With several sources (dispatchers
// in one process), the newest one still added is read.
func (r *Registry) AddSkillSource(src SkillSource) (remove func()) {
	if r == nil {
		return func() {}
	}
	c := r.skillsCollector()
	p := &src
	c.mu.Lock()
	c.sources = append(c.sources, p)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.sources = slices.DeleteFunc(c.sources, func(s *SkillSource) bool { return s == p })
	}
}

func (c *skillCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.ackPending
	ch <- c.workers
	ch <- c.up
}

func (c *skillCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var src *SkillSource
	if n := len(c.sources); n > 0 {
		src = c.sources[n-1]
	}
	c.mu.Unlock()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), CollectTimeout)
	defer cancel()
	ok := true
	workers := make(chan map[string]int, 1)
	go func() {
		w, err := countWorkers(ctx, src.NC)
		if err != nil {
			w = nil
		}
		workers <- w
	}()
	skills := slices.Sorted(slices.Values(src.Skills()))
	for _, sk := range skills {
		cons, err := src.JS.Consumer(ctx, bus.StreamTools, bus.SkillConsumer(sk))
		if err != nil {
			// No consumer: no worker ever served the skill (nothing to
			// report), or the server did not answer.
			ok = ok && errorIsNotFound(err)
			continue
		}
		info := cons.CachedInfo()
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(info.NumPending), sk)
		ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(info.NumAckPending), sk)
	}
	w := <-workers
	if w == nil {
		ok = false
	} else {
		for _, sk := range skills {
			ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(w[sk]), sk)
		}
	}
	up := 0.0
	if ok {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

func errorIsNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDoesNotExist)
}

// countWorkers asks every tool worker for its info and counts, per skill,
// the workers with an endpoint of that name, collecting answers for
// DiscoveryWait.
func countWorkers(ctx context.Context, nc *nats.Conn) (map[string]int, error) {
	inbox := nc.NewRespInbox()
	msgs := make(chan *nats.Msg, 1024)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.INFO."+bus.ServiceToolworker, inbox, nil); err != nil {
		return nil, err
	}
	t := time.NewTimer(DiscoveryWait)
	defer t.Stop()
	out := map[string]int{}
	for {
		select {
		case m := <-msgs:
			var info micro.Info
			if json.Unmarshal(m.Data, &info) != nil {
				continue
			}
			for _, e := range info.Endpoints {
				out[e.Name]++
			}
		case <-t.C:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
}

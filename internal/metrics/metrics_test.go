package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/skill"
)

// gather returns the registry's families by name.
func gather(t *testing.T, r *metrics.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value is the value of the series of name with exactly labels (name,
// value pairs, in any order): a counter's or gauge's value, a histogram's count.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		want := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
		match := true
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// Names follow Prometheus's conventions: the planbus_ prefix, counters
// ending in _total, durations in seconds, each name once.
func TestNames(t *testing.T) {
	names := metrics.Names()
	if len(names) < 20 {
		t.Fatalf("Names: %d names, want the 20 or more planbus registers: %v", len(names), names)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, "planbus_") {
			t.Errorf("%s: want the planbus_ prefix", n)
		}
		if strings.Contains(n, "duration") || strings.Contains(n, "wait") {
			if !strings.HasSuffix(n, "_seconds") {
				t.Errorf("%s: a duration's unit is seconds, in the name", n)
			}
		}
		if seen[n] {
			t.Errorf("%s registered twice", n)
		}
		seen[n] = true
	}
	r := metrics.New()
	r.Dispatcher()
	r.Planner()
	r.Worker()
	for n, f := range gather(t, r) {
		if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(n, "_total") {
			t.Errorf("counter %s: want the _total suffix", n)
		}
	}
}

// A nil registry, and the nil component metrics it hands out, record
// nothing and do not panic: a component given no registry keeps none.
func TestNilRegistry(t *testing.T) {
	var r *metrics.Registry
	d := r.Dispatcher()
	d.PlanStarted()
	d.PlanEnded(planbus.PlanSucceeded)
	d.Released("echo")
	d.Attempt("echo", planbus.ToolSucceeded, time.Millisecond)
	d.HealthChanged("echo", "healthy", "degraded")
	d.ResultRejected(metrics.RejectBadToken)
	d.Conflict()
	d.Dropped()
	p := r.Planner()
	p.RequestStarted("htn")
	p.RequestEnded("succeeded")
	p.Generated("htn", metrics.GenSucceeded, time.Millisecond)
	p.Replanned("htn")
	p.Conflict()
	p.Dropped()
	r.AddSkillSource(metrics.SkillSource{})()
	h := r.Worker().Middleware()(skill.HandlerFunc(func(context.Context, *skill.Call) (skill.Result, error) { return skill.Result{}, nil }))
	if _, err := h.Handle(context.Background(), &skill.Call{Skill: "echo"}); err != nil {
		t.Fatal(err)
	}
}

// The dispatcher's and planner's metrics count what they are told, with
// label values from outside bounded to the known ones.
func TestComponentMetrics(t *testing.T) {
	r := metrics.New()
	d := r.Dispatcher()
	if r.Dispatcher() != d {
		t.Fatal("a second Dispatcher() made new metrics; a process has one set")
	}
	d.PlanStarted()
	d.PlanEnded(planbus.PlanFailed)
	d.PlanEnded("made-up")
	d.Attempt("echo", planbus.ToolTimeout, 2*time.Second)
	d.Attempt("echo", planbus.ToolFailed, 0) // never ran: no duration
	d.HealthChanged("echo", "healthy", "temporaryFailure")
	d.Conflict()
	p := r.Planner()
	p.Generated("goap", metrics.GenPermanent, time.Second)
	p.Generated("no-such-kind", metrics.GenFailed, time.Second)
	p.Replanned("htn")
	p.Conflict()
	fams := gather(t, r)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"planbus_plans_started_total", nil, 1},
		{"planbus_plans_ended_total", []string{"state", "failed"}, 1},
		{"planbus_plans_ended_total", []string{"state", "other"}, 1},
		{"planbus_plans_ended_total", []string{"state", "succeeded"}, 0},
		{"planbus_tool_attempts_total", []string{"skill", "echo", "state", "timeout"}, 1},
		{"planbus_tool_attempts_total", []string{"skill", "echo", "state", "failed"}, 1},
		{"planbus_tool_attempt_duration_seconds", []string{"skill", "echo"}, 1},
		{"planbus_skill_health_transitions_total", []string{"skill", "echo", "from", "healthy", "to", "temporaryFailure"}, 1},
		{"planbus_results_rejected_total", []string{"reason", "bad_token"}, 0},
		{"planbus_cas_conflicts_total", []string{"component", "dispatcher"}, 1},
		{"planbus_cas_conflicts_total", []string{"component", "planner"}, 1},
		{"planbus_messages_dropped_total", []string{"component", "dispatcher"}, 0},
		{"planbus_generations_total", []string{"kind", "goap", "outcome", "permanent"}, 1},
		{"planbus_generations_total", []string{"kind", "other", "outcome", "failed"}, 1},
		{"planbus_generation_duration_seconds", []string{"kind", "goap"}, 1},
		{"planbus_replans_total", []string{"kind", "htn"}, 1},
	} {
		got, ok := value(fams, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %g (present %v), want %g", tc.name, tc.labels, got, ok, tc.want)
		}
	}
}

// The worker middleware records queue wait, calls in flight while they
// run, and each call's state from its error.
func TestWorkerMiddleware(t *testing.T) {
	r := metrics.New()
	running := make(chan struct{})
	proceed := make(chan struct{})
	errs := map[string]error{
		"ok":      nil,
		"slow":    errors.New("boom"),
		"timeout": skill.Failf(planbus.CodeToolTimeout, planbus.CategoryTimeout, "too slow"),
		"cancel":  context.Canceled,
		"invalid": skill.InvalidInput("no"),
	}
	h := r.Worker().Middleware()(skill.HandlerFunc(func(_ context.Context, c *skill.Call) (skill.Result, error) {
		if c.ToolID == "slow" {
			close(running)
			<-proceed
		}
		return skill.Result{}, errs[c.ToolID]
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.Handle(context.Background(), &skill.Call{Skill: "s", ToolID: "slow", ReleasedAt: time.Now().Add(-time.Second)})
	}()
	<-running
	if v, _ := value(gather(t, r), "planbus_worker_calls_in_flight", "skill", "s"); v != 1 {
		t.Errorf("in flight while a call runs: %g, want 1", v)
	}
	close(proceed)
	<-done
	for _, id := range []string{"ok", "timeout", "cancel", "invalid"} {
		_, _ = h.Handle(context.Background(), &skill.Call{Skill: "s", ToolID: id})
	}
	fams := gather(t, r)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"planbus_worker_calls_in_flight", []string{"skill", "s"}, 0},
		{"planbus_worker_calls_total", []string{"skill", "s", "state", "succeeded"}, 1},
		{"planbus_worker_calls_total", []string{"skill", "s", "state", "failed"}, 2},
		{"planbus_worker_calls_total", []string{"skill", "s", "state", "timeout"}, 1},
		{"planbus_worker_calls_total", []string{"skill", "s", "state", "cancelled"}, 1},
		{"planbus_worker_call_duration_seconds", []string{"skill", "s"}, 5},
		// Only the call that carried a release time has a queue wait.
		{"planbus_tool_queue_wait_seconds", []string{"skill", "s"}, 1},
	} {
		got, ok := value(fams, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %g (present %v), want %g", tc.name, tc.labels, got, ok, tc.want)
		}
	}
}

// The skill collector reads a skill's consumer and the tool workers at
// scrape time: calls waiting for a skill nobody serves show as a backlog
// with no workers (what the no-workers alert looks for).
func TestSkillCollector(t *testing.T) {
	cfg := bustest.Start(t)
	conn := bustest.Dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.JS.CreateOrUpdateConsumer(ctx, bus.StreamTools, jetstream.ConsumerConfig{Durable: bus.SkillConsumer("waiting"),
		FilterSubject: bus.ToolSubject("waiting"), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := conn.JS.Publish(ctx, bus.ToolSubject("waiting"), []byte(`{}`), jetstream.WithMsgID(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	r := metrics.New()
	remove := r.AddSkillSource(metrics.SkillSource{Skills: func() []string { return []string{"waiting", "never-served"} }, JS: conn.JS, NC: conn.NC})
	fams := gather(t, r)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"planbus_skill_backlog_calls", []string{"skill", "waiting"}, 3},
		{"planbus_skill_ack_pending_calls", []string{"skill", "waiting"}, 0},
		{"planbus_skill_workers", []string{"skill", "waiting"}, 0},
		{"planbus_skill_workers", []string{"skill", "never-served"}, 0},
		{"planbus_skill_collect_success", nil, 1},
	} {
		got, ok := value(fams, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %g (present %v), want %g", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := value(fams, "planbus_skill_backlog_calls", "skill", "never-served"); ok {
		t.Errorf("a backlog for a skill with no consumer")
	}
	remove()
	if _, ok := gather(t, r)["planbus_skill_workers"]; ok {
		t.Errorf("skill metrics after the source was removed")
	}
}

// Healthy and planbus_nats_connected follow the process's connection: not
// yet before SetConn, then its state.
func TestHealthFollowsTheConnection(t *testing.T) {
	r := metrics.New()
	if err := r.Healthy(); err == nil || !strings.Contains(err.Error(), "starting") {
		t.Errorf("before a connection: %v, want starting", err)
	}
	nc, err := nats.Connect(bustest.StartBare(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	r.SetConn(nc)
	if err := r.Healthy(); err != nil {
		t.Errorf("connected: %v, want nil", err)
	}
	nc.Close()
	if err := r.Healthy(); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("closed: %v, want not connected", err)
	}
}

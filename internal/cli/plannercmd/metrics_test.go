package plannercmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/cli/dispatchercmd"
	"github.com/planbus/planbus/internal/cli/toolworkercmd"
	"github.com/planbus/planbus/internal/node"
)

// scrape GETs a /metrics address as Prometheus (or curl) would and parses
// the text format.
func scrape(t *testing.T, url string, hdr ...string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := fetch(t, &http.Client{Timeout: wait}, url, hdr...)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v\n%s", url, err, body)
	}
	return fams
}

// sample is the value of the series of family name whose labels include
// labels (name, value pairs), summed over the series that match: a
// counter's or gauge's value, a histogram's sample count. ok is false when
// no series matches.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v, ok
}

// want is a metric a test expects: a series and the least value it must
// have (exact: the value it must have).
type want struct {
	name   string
	labels []string
	min    float64
	exact  bool
}

func (w want) String() string { return fmt.Sprintf("%s%v", w.name, w.labels) }

// check returns what fams lacks of wants, in words.
func check(fams map[string]*dto.MetricFamily, wants []want) []string {
	var missing []string
	for _, w := range wants {
		v, ok := sample(fams, w.name, w.labels...)
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s: no such series", w))
		case w.exact && v != w.min:
			missing = append(missing, fmt.Sprintf("%s = %g, want %g", w, v, w.min))
		case !w.exact && v < w.min:
			missing = append(missing, fmt.Sprintf("%s = %g, want at least %g", w, v, w.min))
		}
	}
	return missing
}

// awaitMetrics scrapes url until it shows every want or the deadline
// passes: a plan's end reaches its client a moment before its dispatcher
// has counted it (the count follows the publish's acknowledgement).
func awaitMetrics(t *testing.T, url string, wants []want) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	bustest.Eventually(t, wait, url+" shows every metric wanted", func() (bool, string) {
		fams = scrape(t, url)
		missing := check(fams, wants)
		return len(missing) == 0, "it lacks:\n  " + strings.Join(missing, "\n  ")
	})
	return fams
}

// diamondWants are the metrics a node shows once it has run
// examples/plans/diamond.json (A and D on echo, B and C on sleep) on one
// worker.
var diamondWants = []want{
	{name: "planbus_plans_started_total", min: 1},
	{name: "planbus_plans_ended_total", labels: []string{"state", "succeeded"}, min: 1},
	{name: "planbus_tool_calls_released_total", labels: []string{"skill", "echo"}, min: 2},
	{name: "planbus_tool_calls_released_total", labels: []string{"skill", "sleep"}, min: 2},
	{name: "planbus_tool_attempts_total", labels: []string{"skill", "echo", "state", "succeeded"}, min: 2},
	{name: "planbus_tool_attempts_total", labels: []string{"skill", "sleep", "state", "succeeded"}, min: 2},
	{name: "planbus_tool_attempt_duration_seconds", labels: []string{"skill", "echo"}, min: 2},
	{name: "planbus_tool_attempt_duration_seconds", labels: []string{"skill", "sleep"}, min: 2},
	{name: "planbus_tool_queue_wait_seconds", labels: []string{"skill", "echo"}, min: 2},
	{name: "planbus_tool_queue_wait_seconds", labels: []string{"skill", "sleep"}, min: 2},
	{name: "planbus_worker_calls_total", labels: []string{"skill", "sleep", "state", "succeeded"}, min: 2},
	{name: "planbus_worker_call_duration_seconds", labels: []string{"skill", "echo"}, min: 2},
	{name: "planbus_worker_calls_in_flight", labels: []string{"skill", "sleep"}, exact: true},
	{name: "planbus_skill_workers", labels: []string{"skill", "sleep"}, min: 1, exact: true},
	{name: "planbus_skill_backlog_calls", labels: []string{"skill", "sleep"}, exact: true},
	{name: "planbus_skill_ack_pending_calls", labels: []string{"skill", "echo"}, exact: true},
	{name: "planbus_skill_collect_success", min: 1, exact: true},
	{name: "planbus_results_rejected_total", labels: []string{"reason", "bad_token"}, exact: true},
	{name: "go_goroutines", min: 1},
	{name: "process_resident_memory_bytes", min: 1},
}

var nodeUp = regexp.MustCompile(`url=(nats://127\.0\.0\.1:\d+)`)

// The must-show of metrics: after a plan, planner serve's /metrics
// (beside its web view, on a real loopback port, as curl -s would get it)
// shows planbus metrics with non-zero counts for the plan's skills.
func TestServeMetricsAfterAPlan(t *testing.T) {
	stderr, code := background(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workers", "1", "--http", "127.0.0.1:0")
	base := viewURL(t, stderr, code)
	if !strings.Contains(stderr.String(), "metrics on "+base+"metrics") {
		t.Errorf("serve does not say where its metrics are:\n%s", stderr.String())
	}
	natsURL := stderr.waitFor(t, nodeUp, code)[1]
	o := runPlanner(t, "run", "--nats-url", natsURL, example(t, "diamond.json"))
	if res := o.result(t); o.code != cli.ExitOK || !res.Success {
		t.Fatalf("diamond: exit %d, %s\n%s", o.code, res.State, o.stderr)
	}
	fams := awaitMetrics(t, base+"metrics", diamondWants)
	// Nothing outside the planbus namespace, the Go runtime and the
	// process, and no series per plan or request.
	for name, f := range fams {
		if !strings.HasPrefix(name, "planbus_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") &&
			!strings.HasPrefix(name, "promhttp_") {
			t.Errorf("unexpected metric family %s", name)
		}
		if !strings.HasPrefix(name, "planbus_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "skill", "state", "status", "kind", "outcome", "reason", "component", "from", "to":
				default:
					t.Errorf("%s has label %s=%q: labels must stay bounded", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}

	// A page of another origin cannot read them through a rebound name.
	req, _ := http.NewRequest(http.MethodGet, base+"metrics", nil)
	req.Host = "attacker.example"
	resp, err := (&http.Client{Timeout: wait}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("/metrics for Host attacker.example: %d, want %d", resp.StatusCode, http.StatusMisdirectedRequest)
	}
}

// With --auth on loopback, the view asks for its login but /metrics does
// not: Prometheus on the machine scrapes it as it is.
func TestServeMetricsWithAuth(t *testing.T) {
	stderr, code := background(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workers", "0", "--auth", "--http", "127.0.0.1:0")
	base := viewURL(t, stderr, code)
	hc := browser()
	if c, _ := fetch(t, hc, base+"requests"); c != http.StatusSeeOther {
		t.Errorf("the view without its token: %d, want a redirect to the login", c)
	}
	fams := scrape(t, base+"metrics")
	if _, ok := sample(fams, "planbus_plans_ended_total", "state", "succeeded"); !ok {
		t.Errorf("/metrics with --auth lacks planbus_plans_ended_total")
	}
}

var metricsLine = regexp.MustCompile(`metrics on (http://\S+/metrics)`)

// component runs a long-lived command (dispatcher, toolworker) in-process
// until the test ends, with env as its whole environment; it returns its
// stderr and a channel with its exit code.
func component(t *testing.T, cmd func(context.Context, []string, cli.IO) int, env map[string]string, args ...string) (*watchedBuffer, <-chan int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &watchedBuffer{wrote: make(chan struct{}, 1)}
	code := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		code <- cmd(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr, Env: func(k string) string { return env[k] }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("%v still running %s after the interrupt", args, wait)
		}
	})
	return stderr, code
}

// dispatcher --metrics and toolworker with $PLANBUS_METRICS serve their
// own metrics: after a plan, each shows its part of it, and nothing of
// the other's.
func TestComponentMetricsFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: bustest.Start(t), NoDispatcher: true, NoPlanner: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)

	dErr, dCode := component(t, dispatchercmd.Run, nil, "--nats-url", n.Bus.URL, "--metrics", "127.0.0.1:0")
	dURL := dErr.waitFor(t, metricsLine, dCode)[1]
	dErr.waitFor(t, regexp.MustCompile("dispatcher running"), dCode)
	wErr, wCode := component(t, toolworkercmd.Run, map[string]string{"PLANBUS_METRICS": "127.0.0.1:0"}, "--nats-url", n.Bus.URL, "--skills", "echo,sleep")
	wURL := wErr.waitFor(t, metricsLine, wCode)[1]
	wErr.waitFor(t, regexp.MustCompile("tool worker serving"), wCode)

	o := runPlanner(t, "run", "--nats-url", n.Bus.URL, example(t, "diamond.json"))
	if res := o.result(t); o.code != cli.ExitOK || !res.Success {
		t.Fatalf("diamond: exit %d, %s\n%s", o.code, res.State, o.stderr)
	}
	var dWants, wWants []want
	for _, w := range diamondWants {
		switch {
		case strings.HasPrefix(w.name, "planbus_worker_") || w.name == "planbus_tool_queue_wait_seconds":
			wWants = append(wWants, w)
		case strings.HasPrefix(w.name, "planbus_"):
			dWants = append(dWants, w)
		default:
			dWants, wWants = append(dWants, w), append(wWants, w)
		}
	}
	dFams := awaitMetrics(t, dURL, dWants)
	wFams := awaitMetrics(t, wURL, wWants)
	if _, ok := sample(dFams, "planbus_worker_calls_total"); ok {
		t.Errorf("the dispatcher's metrics show worker calls")
	}
	if _, ok := sample(wFams, "planbus_plans_started_total"); ok {
		t.Errorf("the toolworker's metrics show plans")
	}
	// Both are connected, and their /healthz says so.
	for name, fams := range map[string]map[string]*dto.MetricFamily{"dispatcher": dFams, "toolworker": wFams} {
		if v, ok := sample(fams, "planbus_nats_connected"); !ok || v != 1 {
			t.Errorf("%s: planbus_nats_connected %v (present %v), want 1", name, v, ok)
		}
	}
	for name, u := range map[string]string{"dispatcher": dURL, "toolworker": wURL} {
		res, err := http.Get(strings.TrimSuffix(u, "/metrics") + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != "ok\n" {
			t.Errorf("%s /healthz: %d %q, want 200 ok", name, res.StatusCode, body)
		}
	}

	if o := (invocation{}).run(t, dispatchercmd.Run, "--nats-url", n.Bus.URL, "--metrics", "nowhere"); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "want host:port") {
		t.Errorf("--metrics nowhere: exit %d, stderr %q; want %d and host:port", o.code, o.stderr, cli.ExitUsage)
	}
	taken := strings.TrimSuffix(strings.TrimPrefix(dURL, "http://"), "/metrics")
	if o := (invocation{}).run(t, toolworkercmd.Run, "--nats-url", n.Bus.URL, "--metrics", taken); o.code != cli.ExitUsage || !strings.Contains(o.stderr, "address already in use") {
		t.Errorf("--metrics on a taken address: exit %d, stderr %q; want %d naming it", o.code, o.stderr, cli.ExitUsage)
	}
}

// The replan demo (README) through planner serve: the planner's and the
// health metrics count the generations, the replan, walk's way to
// permanentFailure and the request's end.
func TestServeMetricsOfAReplan(t *testing.T) {
	root := bustest.RepoRoot(t)
	stderr, code := background(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workers", "1", "--http", "127.0.0.1:0",
		"--domains", filepath.Join(root, "examples", "htn"),
		"--simulate", "walk(from,to)=network hail(vehicle,at) ride(vehicle,from,to) set-cash(old,new) wait-for(bus,at)")
	base := viewURL(t, stderr, code)
	natsURL := stderr.waitFor(t, nodeUp, code)[1]
	o := runPlanner(t, "run", "--nats-url", natsURL, filepath.Join(root, "examples", "requests", "taxi.json"))
	if o.code != cli.ExitOK {
		t.Fatalf("taxi: exit %d\n%s", o.code, o.stderr)
	}
	awaitMetrics(t, base+"metrics", []want{
		{name: "planbus_requests_started_total", labels: []string{"kind", "htn"}, min: 1},
		{name: "planbus_requests_ended_total", labels: []string{"status", "succeeded"}, min: 1},
		{name: "planbus_generations_total", labels: []string{"kind", "htn", "outcome", "succeeded"}, min: 2},
		{name: "planbus_generation_duration_seconds", labels: []string{"kind", "htn"}, min: 2},
		{name: "planbus_replans_total", labels: []string{"kind", "htn"}, min: 1, exact: true},
		{name: "planbus_plans_ended_total", labels: []string{"state", "failed"}, min: 1},
		{name: "planbus_plans_ended_total", labels: []string{"state", "succeeded"}, min: 1},
		{name: "planbus_tool_attempts_total", labels: []string{"skill", "walk", "state", "failed"}, min: 3},
		{name: "planbus_tool_attempts_total", labels: []string{"skill", "ride", "state", "succeeded"}, min: 1},
		{name: "planbus_skill_health_transitions_total", labels: []string{"skill", "walk", "from", "healthy", "to", "temporaryFailure"}, min: 1},
		{name: "planbus_skill_health_transitions_total", labels: []string{"skill", "walk", "from", "temporaryFailure", "to", "permanentFailure"}, min: 1},
		{name: "planbus_worker_calls_total", labels: []string{"skill", "walk", "state", "failed"}, min: 3},
	})
}

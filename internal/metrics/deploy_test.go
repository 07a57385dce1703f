package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/metrics"
)

// metricName finds planbus metric names in queries and text.
var metricName = regexp.MustCompile(`\bplanbus_[a-z0-9_]+\b`)

// family is the family a queried name belongs to: a histogram's series
// carry suffixes of their own.
func family(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok && strings.HasSuffix(base, "_seconds") {
			return base
		}
	}
	return name
}

func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dashboard is the part of a Grafana dashboard the check reads.
type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// The dashboard, the alert rules and docs/observability.md query and list
// only metrics the code registers, and the doc lists every one: they
// cannot drift apart.
func TestDeployQueriesKnownMetrics(t *testing.T) {
	known := metrics.Names()
	check := func(where, text string) map[string]bool {
		t.Helper()
		used := map[string]bool{}
		for _, n := range metricName.FindAllString(text, -1) {
			f := family(n)
			if !slices.Contains(known, f) {
				t.Errorf("%s uses %s, which the code does not register (it registers %v)", where, n, known)
			}
			used[f] = true
		}
		return used
	}

	var d dashboard
	if err := json.Unmarshal(repoFile(t, "deploy/grafana/planbus.json"), &d); err != nil {
		t.Fatalf("deploy/grafana/planbus.json is not JSON: %v", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("deploy/grafana/planbus.json: title %q, %d panels: not a dashboard", d.Title, len(d.Panels))
	}
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !metricName.MatchString(tg.Expr) {
				t.Errorf("dashboard panel %q: query %q names no planbus metric", p.Title, tg.Expr)
			}
			for n := range check("dashboard panel "+p.Title, tg.Expr) {
				queried[n] = true
			}
		}
	}
	// Every metric that is not only for reading by hand is on the dashboard.
	for _, n := range known {
		if !queried[n] && n != "planbus_requests_started_total" && n != "planbus_worker_calls_total" && n != "planbus_worker_call_duration_seconds" {
			t.Errorf("the dashboard shows nothing of %s", n)
		}
	}

	rules := string(repoFile(t, "deploy/prometheus/alerts.yaml"))
	check("deploy/prometheus/alerts.yaml", rules)
	for _, alert := range []string{"PlanbusPlansFailing", "PlanbusBacklogGrowing", "PlanbusNoWorkersForSkill"} {
		if !strings.Contains(rules, "alert: "+alert+"\n") {
			t.Errorf("deploy/prometheus/alerts.yaml has no alert %s", alert)
		}
	}

	doc := string(repoFile(t, "docs/observability.md"))
	listed := check("docs/observability.md", doc)
	for _, n := range known {
		if !listed[n] || !strings.Contains(doc, "| `"+n+"` |") {
			t.Errorf("docs/observability.md's table does not list %s", n)
		}
	}
}

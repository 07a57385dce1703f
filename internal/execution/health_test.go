package execution

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
)

// book is a TimeoutFactor of fixed factors, keyed session/skill (1 for
// the others); it records the sessions it was asked about.
type book struct {
	factors  map[string]int64
	sessions map[string]bool
}

func (b *book) lookup(sessionID, skill string) int64 {
	b.sessions[sessionID] = true
	if f, ok := b.factors[sessionID+"/"+skill]; ok {
		return f
	}
	return 1
}

// TestDegradedSkillsGetLongerTimeouts: every release carries the timeout
// its call gets, its skill's factor times the attempt's in the plan's
// session (the dispatcher's is 2 for a degraded skill), at most a day; a
// factor below 1 changes nothing.
func TestDegradedSkillsGetLongerTimeouts(t *testing.T) {
	p := mustPlan(t, `{"sessionId":"s1","tools":[
		{"toolId":"fast","skill":"ok","timeoutMs":1000},
		{"toolId":"slow","skill":"slow","timeoutMs":1000,"retryPolicy":{"maxAttempts":1},"fallback":{"skill":"ok","timeoutMs":500}},
		{"toolId":"day","skill":"slow","timeoutMs":86400000},
		{"toolId":"other","skill":"other","timeoutMs":700},
		{"toolId":"late","skill":"late","timeoutMs":300,"retryPolicy":{"maxAttempts":2,"backoffMs":10}}]}`)
	b := &book{factors: map[string]int64{
		"s1/slow": 2, "s1/other": 0, "s2/ok": 2,
	}, sessions: map[string]bool{}}
	e, fx := Start(p, t0, 8, b.lookup)
	type rel struct {
		Tool             string
		Attempt, Timeout int
	}
	releases := func(rs []Release) []rel {
		var out []rel
		for _, r := range rs {
			out = append(out, rel{p.Tools[r.Index].ToolID, r.Attempt, int(r.TimeoutMs)})
		}
		return out
	}
	want := []rel{{"fast", 1, 1000}, {"slow", 1, 2000}, {"day", 1, plan.MaxTimeoutMs}, {"other", 1, 700}, {"late", 1, 300}}
	if diff := cmp.Diff(want, releases(fx.Releases)); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"s1": true}, b.sessions); diff != "" {
		t.Errorf("sessions asked about (-want +got):\n%s", diff)
	}
	// The fallback runs skill ok, which is healthy in this session.
	fx = e.OnResult(fail("slow", 1, planbus.CategoryTimeout), t0)
	if diff := cmp.Diff([]rel{{"slow", 2, 500}}, releases(fx.Releases)); diff != "" {
		t.Errorf("fallback (-want +got):\n%s", diff)
	}
	// Health is read at each release: a skill degraded since its first
	// attempt has a longer second one.
	b.factors["s1/late"] = 2
	fx = e.OnResult(fail("late", 1, planbus.CategoryNetwork), t0)
	fx = e.OnTimer(fx.Timers[0], fx.Timers[0].FireAt)
	if diff := cmp.Diff([]rel{{"late", 2, 600}}, releases(fx.Releases)); diff != "" {
		t.Errorf("retry (-want +got):\n%s", diff)
	}
	// What a redelivery republishes carries the same timeouts.
	want = []rel{{"fast", 1, 1000}, {"slow", 2, 500}, {"day", 1, plan.MaxTimeoutMs}, {"other", 1, 700}, {"late", 2, 600}}
	if diff := cmp.Diff(want, releases(e.Outstanding().Releases)); diff != "" {
		t.Errorf("outstanding (-want +got):\n%s", diff)
	}
	// So does an engine restored with the same health; one without any
	// has every skill healthy.
	restored, err := Restore(p, e.State(), b.lookup)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, releases(restored.Outstanding().Releases)); diff != "" {
		t.Errorf("restored outstanding (-want +got):\n%s", diff)
	}
	blind, _ := Restore(p, e.State(), nil)
	want = []rel{{"fast", 1, 1000}, {"slow", 2, 500}, {"day", 1, plan.MaxTimeoutMs}, {"other", 1, 700}, {"late", 2, 300}}
	if diff := cmp.Diff(want, releases(blind.Outstanding().Releases)); diff != "" {
		t.Errorf("outstanding without health (-want +got):\n%s", diff)
	}
}

package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPerPlanIsTheSlopeAfterTheWarmUp(t *testing.T) {
	const kb = 1024
	// 10 minutes, so the warm-up is its first minute: the samples before
	// it (a steep climb) are left out; after it RSS grows by 35 KB a plan
	// finished, with noise of ±100 KB that the fit averages out.
	r := &SoakResult{Config: SoakConfig{Duration: 10 * time.Minute, Rate: 100, Retention: 24 * time.Hour}}
	noise := []int64{100, -100, 50, -50, 0, 100, -100, 0, 0, 0}
	for i := 0; i <= 10; i++ {
		at := time.Duration(i) * time.Minute
		finished := i * 6000
		rss := int64(50<<20) + int64(finished)*35*kb
		if i == 0 {
			rss = 10 << 20
		}
		if i > 0 && i <= len(noise) {
			rss += noise[i-1] * kb
		}
		r.Samples = append(r.Samples, SoakSample{At: at, RSS: []int64{rss / 2, rss - rss/2}, Finished: finished})
	}
	b, n, ok := r.PerPlan()
	if !ok || n != 10 {
		t.Fatalf("PerPlan: ok %v, %d samples; want 10 (those at or after 1m)", ok, n)
	}
	if math.Abs(b-35*kb) > 0.5*kb {
		t.Errorf("PerPlan = %.0f bytes, want about %d", b, 35*kb)
	}
	if v := r.PerPlanVerdict(); !strings.HasPrefix(v, "35.") || !strings.Contains(v, "per retained plan") {
		t.Errorf("verdict %q", v)
	}
	// Plans expired during the soak: the slope is no retained plan's cost.
	r.Config.Retention = 2 * time.Minute
	if v := r.PerPlanVerdict(); !strings.Contains(v, "not a retained plan's cost") {
		t.Errorf("verdict with a short retention: %q", v)
	}
}

func TestPerPlanWantsTwoSamplesAndFinishedPlans(t *testing.T) {
	r := &SoakResult{Config: SoakConfig{Duration: time.Minute}}
	r.Samples = []SoakSample{{At: 0, RSS: []int64{1}}, {At: time.Minute, RSS: []int64{2}, Finished: 10}}
	if _, n, ok := r.PerPlan(); ok || n != 1 {
		t.Errorf("one sample after the warm-up: ok %v, %d samples", ok, n)
	}
	r.Samples = append(r.Samples, SoakSample{At: 2 * time.Minute, RSS: []int64{3}, Finished: 10})
	if _, _, ok := r.PerPlan(); ok {
		t.Error("no plan finished between the samples, yet a slope")
	}
	if v := r.PerPlanVerdict(); v != "" {
		t.Errorf("verdict %q, want none", v)
	}
}

func TestRetainedVerdictSaysWhatTheEndHeld(t *testing.T) {
	r := &SoakResult{Config: SoakConfig{Duration: 10 * time.Minute, Rate: 100}}
	if v := r.RetainedVerdict(); v != "" {
		t.Errorf("no samples, verdict %q", v)
	}
	r.Samples = []SoakSample{
		{At: 0, RSS: []int64{50 << 20}},
		{At: 5 * time.Minute, RSS: []int64{900 << 20, 100 << 20}, Finished: 30000},
		{At: 11 * time.Minute, RSS: []int64{700 << 20, 100 << 20}, Finished: 60000, End: true},
	}
	v := r.RetainedVerdict()
	for _, want := range []string{"60000 plans had finished, all of them retained", "RSS 800.0 MB", "13.65 KB a plan finished", "at most 1000.0 MB"} {
		if !strings.Contains(v, want) {
			t.Errorf("verdict %q lacks %q", v, want)
		}
	}
	r.Config.Retention = 2 * time.Minute
	if v := r.RetainedVerdict(); !strings.Contains(v, "those of the last 2m0s retained") {
		t.Errorf("verdict with a short retention: %q", v)
	}
}

// With the live heap read, the verdict gives its slope beside RSS's.
func TestPerPlanLiveBesideRSS(t *testing.T) {
	const kb = 1024
	r := &SoakResult{Config: SoakConfig{Duration: 10 * time.Minute, Retention: 24 * time.Hour}}
	for i := 0; i <= 10; i++ {
		finished := i * 6000
		r.Samples = append(r.Samples, SoakSample{At: time.Duration(i) * time.Minute, Finished: finished,
			RSS: []int64{int64(50<<20) + int64(finished)*5*kb}, LiveHeap: int64(20<<20) + int64(finished)*kb})
	}
	if _, _, ok := r.PerPlanLive(); ok {
		t.Error("a live-heap slope without a LiveHeap reader")
	}
	if v := r.PerPlanVerdict(); strings.Contains(v, "live heap") {
		t.Errorf("verdict names a live heap it did not read: %q", v)
	}
	r.Config.LiveHeap = func() int64 { return 0 }
	b, _, ok := r.PerPlanLive()
	if !ok || math.Abs(b-kb) > 1 {
		t.Errorf("PerPlanLive = %.0f bytes (ok %v), want %d", b, ok, kb)
	}
	if v := r.PerPlanVerdict(); !strings.HasPrefix(v, "5.00 KB of RSS") || !strings.Contains(v, "1.00 KB of it live heap") {
		t.Errorf("verdict %q", v)
	}
	var out strings.Builder
	ReportSoak(&out, r)
	if !strings.Contains(out.String(), "| live heap MB |") || !strings.Contains(out.String(), "| 20.0 |") {
		t.Errorf("report has no live heap column:\n%s", out.String())
	}
}

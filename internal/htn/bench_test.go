package htn_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/htn"
)

// benchDomain is one row of the benchmark table in
// ../shared/bench/htn/README.md.
type benchDomain struct {
	file  string
	goal  string
	query bool
	first bool
}

var benchDomains = []benchDomain{
	{file: "Taxi.htn", goal: "travel-to(park)"},
	{file: "Game.htn", goal: "doAI(Player1)"},
	{file: "wide7x4.htn", goal: "choose(7)"},
	{file: "deep1000.htn", goal: "count(1000)", first: true},
	{file: "deep3000.htn", goal: "count(3000)", first: true},
	{file: "chain2000.htn", goal: "walkto(n600)", first: true},
	{file: "fib.htn", goal: "fib(12, ?f)", query: true},
}

func benchDir(tb testing.TB) string {
	dir := sharedDir(tb, "PLANBUS_BENCH_DIR", filepath.Join("bench", "htn"))
	if _, err := os.Stat(filepath.Join(dir, "Taxi.htn")); err != nil {
		tb.Skipf("benchmark domains not available (%v); set PLANBUS_BENCH_DIR", err)
	}
	return dir
}

func loadDomain(tb testing.TB, d benchDomain) *htn.Program {
	tb.Helper()
	src, err := os.ReadFile(filepath.Join(benchDir(tb), d.file))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := htn.Parse(string(src))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// runDomain solves the domain once and returns the number of plans (or
// answers) and the planner's own peak memory estimate.
func runDomain(tb testing.TB, p *htn.Program, d benchDomain) (int, int64) {
	ctx := context.Background()
	opts := htn.Options{FirstOnly: d.first}
	if d.query {
		a, err := p.Query(ctx, d.goal, opts)
		if err != nil {
			tb.Fatal(err)
		}
		return len(a.Solutions), a.Stats.PeakMemory
	}
	r, err := p.Plan(ctx, d.goal, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return len(r.Plans), r.Stats.PeakMemory
}

// BenchmarkDomains times each benchmark domain, parsing included (the
// reference figures are whole-process times).
func BenchmarkDomains(b *testing.B) {
	for _, d := range benchDomains {
		b.Run(d.file, func(b *testing.B) {
			dir := benchDir(b)
			src, err := os.ReadFile(filepath.Join(dir, d.file))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var est int64
			for b.Loop() {
				p, err := htn.Parse(string(src))
				if err != nil {
					b.Fatal(err)
				}
				_, est = runDomain(b, p, d)
			}
			b.ReportMetric(float64(est), "est-peak-B")
		})
	}
}

// peakHeap runs f while sampling the Go heap and returns the highest
// HeapInuse seen above the level before f started.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			if s.HeapInuse > peak {
				peak = s.HeapInuse
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	if s.HeapInuse > peak {
		peak = s.HeapInuse
	}
	return peak - base
}

// TestPeakMemory reports the peak heap of each domain (go test -run
// TestPeakMemory -v; HTN_BENCH_DOMAIN=deep3000.htn runs one domain). It asserts nothing about time; it checks that memory
// grows linearly with plan depth: deep3000 must not need more than about
// four times what deep1000 needs (the reference needs eight times).
func TestPeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory; skipped with -short")
	}
	peaks := map[string]uint64{}
	only := os.Getenv("HTN_BENCH_DOMAIN") // run one domain, e.g. to measure the process's peak RSS
	for _, d := range benchDomains {
		if only != "" && d.file != only {
			continue
		}
		p := loadDomain(t, d)
		var n int
		var est int64
		peak := peakHeap(func() { n, est = runDomain(t, p, d) })
		peaks[d.file] = peak
		t.Logf("%-14s results=%-6d peak-heap=%8.2f MB  estimate=%8.2f MB", d.file, n, float64(peak)/1e6, float64(est)/1e6)
	}
	if a, b := peaks["deep1000.htn"], peaks["deep3000.htn"]; a > 0 && b > 5*a+(4<<20) {
		t.Errorf("deep3000 peak heap %d is more than linear in deep1000's %d", b, a)
	}
}

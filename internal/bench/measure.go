package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-io/nuid"

	"github.com/planbus/planbus/internal/plan"
)

// Runner runs a set of plans at once and reports the makespan and each
// plan's latency.
type Runner func(ctx context.Context, plans []*plan.Plan) (time.Duration, []time.Duration, error)

// FloorRunner runs plans with RunFloor, concurrently.
func FloorRunner(ctx context.Context, plans []*plan.Plan) (time.Duration, []time.Duration, error) {
	lat := make([]time.Duration, len(plans))
	errs := make(chan error, len(plans))
	start := time.Now()
	for i, p := range plans {
		go func() {
			s := time.Now()
			res, err := RunFloor(ctx, p)
			if err == nil && !res.Success {
				err = fmt.Errorf("floor: plan %s: %s", p.PlanID, res.State)
			}
			lat[i] = time.Since(s)
			errs <- err
		}()
	}
	for range plans {
		if err := <-errs; err != nil {
			return 0, nil, err
		}
	}
	return time.Since(start), lat, nil
}

// Result holds the measurements of one workload on one runner.
type Result struct {
	Workload  string
	Runner    string
	Tools     int // per instance
	Instances int
	Steps     int // tools on the critical path
	SleepMs   int // sleep along the critical path
	Makespans []time.Duration
	Latencies []time.Duration
}

// Measure runs the workload once to warm up and then runs times.
func Measure(ctx context.Context, w *Workload, name string, run Runner, runs int, progress io.Writer) (*Result, error) {
	steps, sleep := w.CriticalPath()
	r := &Result{Workload: w.Name, Runner: name, Tools: len(w.Tools), Instances: w.Instances, Steps: steps, SleepMs: sleep}
	for k := -1; k < runs; k++ {
		plans := make([]*plan.Plan, w.Instances)
		for i := range plans {
			p, err := w.Plan(nuid.Next())
			if err != nil {
				return nil, err
			}
			plans[i] = p
		}
		span, lat, err := run(ctx, plans)
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", w.Name, name, err)
		}
		if k < 0 {
			continue // warm-up
		}
		r.Makespans = append(r.Makespans, span)
		r.Latencies = append(r.Latencies, lat...)
		if progress != nil {
			fmt.Fprintf(progress, "  %-14s %-7s run %d/%d: %s\n", w.Name, name, k+1, runs, span.Round(10*time.Microsecond))
		}
	}
	return r, nil
}

func sorted(ds []time.Duration) []time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s
}

// Median makespan.
func (r *Result) Median() time.Duration { s := sorted(r.Makespans); return s[len(s)/2] }

// Min makespan.
func (r *Result) Min() time.Duration { return sorted(r.Makespans)[0] }

// Max makespan.
func (r *Result) Max() time.Duration { s := sorted(r.Makespans); return s[len(s)-1] }

// MsPerStep is (median makespan − critical-path sleep) / critical-path length.
func (r *Result) MsPerStep() float64 {
	ms := float64(r.Median().Microseconds())/1000 - float64(r.SleepMs)
	return ms / float64(r.Steps)
}

// ToolsPerSec over the median makespan, all instances together.
func (r *Result) ToolsPerSec() float64 {
	return float64(r.Tools*r.Instances) / r.Median().Seconds()
}

// PlansPerSec over the median makespan.
func (r *Result) PlansPerSec() float64 { return float64(r.Instances) / r.Median().Seconds() }

// Percentile of the per-plan latencies, p in [0, 100].
func (r *Result) Percentile(p float64) time.Duration {
	s := sorted(r.Latencies)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

// Report prints one table row per result pair (system and floor) with the
// ratio of their median makespans.
func Report(w io.Writer, system, floor []*Result) {
	fmt.Fprintf(w, "| workload | runner | makespan median (min–max) | ms/critical step | tools/s | plans/s | latency p50 / p99 | × floor |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|\n")
	for i := range system {
		for _, r := range []*Result{system[i], floor[i]} {
			plans, lat := "", ""
			if r.Instances > 1 {
				plans = fmt.Sprintf("%.0f", r.PlansPerSec())
				lat = fmtDur(r.Percentile(50)) + " / " + fmtDur(r.Percentile(99))
			}
			ratio := float64(r.Median()) / float64(floor[i].Median())
			fmt.Fprintf(w, "| %s | %s | %s (%s–%s) | %.3f | %.0f | %s | %s | %.1f |\n", r.Workload, r.Runner,
				fmtDur(r.Median()), fmtDur(r.Min()), fmtDur(r.Max()), r.MsPerStep(), r.ToolsPerSec(), plans, lat, ratio)
		}
	}
}

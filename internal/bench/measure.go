package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-io/nuid"

	"github.com/planbus/planbus/internal/plan"
)

// Runner runs a set of plans at once and reports the makespan and each
// plan's latency.
type Runner func(ctx context.Context, plans []Input) (time.Duration, []time.Duration, error)

// Input is one plan of a run: its id and document, and the plan decoded
// when the runner asks for it (Options.Decoded).
type Input struct {
	ID   string
	Doc  []byte
	Plan *plan.Plan
}

// FloorRunner runs plans with RunFloor, concurrently; it wants them
// decoded.
func FloorRunner(ctx context.Context, plans []Input) (time.Duration, []time.Duration, error) {
	lat := make([]time.Duration, len(plans))
	errs := make(chan error, len(plans))
	start := time.Now()
	for i, in := range plans {
		p := in.Plan
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

// CPUClock reads the CPU time, user and system, that the system under
// measurement has used so far: this process (SelfCPU) and, when
// components run as processes of their own, theirs (Procs.CPU).
type CPUClock func() (time.Duration, error)

// Counter reads a running total, such as the dispatchers' compare-and-set
// conflicts (Conflicts).
type Counter func(ctx context.Context) (int64, error)

// Options of Measure.
type Options struct {
	// Runs measured after the warm-up. Default 1.
	Runs int
	// Progress, if set, gets a line per run.
	Progress io.Writer
	// CPU, if set, is read before the measured runs and after them.
	CPU CPUClock
	// Conflicts, if set, is read before the measured runs and after them.
	Conflicts Counter
	// Decoded: the runner takes decoded plans (Input.Plan). Otherwise it
	// is given documents only, which hold no pointers for the collector
	// to scan while the system runs.
	Decoded bool
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
	// CPU is the CPU time the system used over the measured runs, when
	// Options.CPU was set (HasCPU).
	CPU    time.Duration
	HasCPU bool
	// Conflicts is how many state compare-and-sets the dispatchers lost
	// over the measured runs, when Options.Conflicts was set
	// (HasConflicts).
	Conflicts    int64
	HasConflicts bool
}

// Measure runs the workload once to warm up and then o.Runs times. It
// returns the first error of the making of the plans, of a run (naming
// the run) or of a clock; the caller names the workload and the runner.
func Measure(ctx context.Context, w *Workload, name string, run Runner, o Options) (*Result, error) {
	runs := max(o.Runs, 1)
	steps, sleep := w.CriticalPath()
	r := &Result{Workload: w.Name, Runner: name, Tools: len(w.Tools), Instances: w.Instances, Steps: steps, SleepMs: sleep}
	// Every run's plans are made and encoded before the clocks are read,
	// so the CPU time counts the system at work and not the making of its
	// input.
	batches := make([][]Input, runs+1)
	for k := range batches {
		batches[k] = make([]Input, w.Instances)
		for i := range batches[k] {
			p, err := w.Plan(nuid.Next())
			if err != nil {
				return nil, err
			}
			doc, err := json.Marshal(p)
			if err != nil {
				return nil, err
			}
			batches[k][i] = Input{ID: p.PlanID, Doc: doc}
			if o.Decoded {
				batches[k][i].Plan = p
			}
		}
	}
	var cpu0 time.Duration
	var conflicts0 int64
	for k := -1; k < runs; k++ {
		if k == 0 {
			var err error
			if o.CPU != nil {
				if cpu0, err = o.CPU(); err != nil {
					return nil, err
				}
			}
			if o.Conflicts != nil {
				if conflicts0, err = o.Conflicts(ctx); err != nil {
					return nil, err
				}
			}
		}
		plans := batches[k+1]
		batches[k+1] = nil
		span, lat, err := run(ctx, plans)
		if err != nil {
			if k < 0 {
				return nil, fmt.Errorf("warm-up run: %w", err)
			}
			return nil, fmt.Errorf("run %d of %d: %w", k+1, runs, err)
		}
		if k < 0 {
			continue // warm-up
		}
		r.Makespans = append(r.Makespans, span)
		r.Latencies = append(r.Latencies, lat...)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  %-14s %-7s run %d/%d: %s\n", w.Name, name, k+1, runs, span.Round(10*time.Microsecond))
		}
	}
	if o.CPU != nil {
		cpu, err := o.CPU()
		if err != nil {
			return nil, err
		}
		r.CPU, r.HasCPU = cpu-cpu0, true
	}
	if o.Conflicts != nil {
		n, err := o.Conflicts(ctx)
		if err != nil {
			return nil, err
		}
		r.Conflicts, r.HasConflicts = n-conflicts0, true
	}
	return r, nil
}

// CPUPerTool is the CPU time per tool run over the measured runs.
func (r *Result) CPUPerTool() time.Duration {
	return r.CPU / time.Duration(max(r.Tools*r.Instances*len(r.Makespans), 1))
}

// CPUPerStep is the CPU time per critical-path step over the measured
// runs (for a chain, CPUPerTool).
func (r *Result) CPUPerStep() time.Duration {
	return r.CPU / time.Duration(max(r.Steps*r.Instances*len(r.Makespans), 1))
}

// ConflictsPerPlan is the dispatchers' lost compare-and-sets per plan
// over the measured runs.
func (r *Result) ConflictsPerPlan() float64 {
	return float64(r.Conflicts) / float64(max(r.Instances*len(r.Makespans), 1))
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

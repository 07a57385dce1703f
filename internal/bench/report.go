package bench

import (
	"fmt"
	"io"
	"time"
)

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

// ms is d in milliseconds with three decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1e6)
}

// cpuCell is r's CPU time per tool in ms, or empty if not measured.
func cpuCell(r *Result) string {
	if !r.HasCPU {
		return ""
	}
	return ms(r.CPUPerTool())
}

// Report prints one table row per result pair (system and engine floor)
// with the ratio of their median makespans, the CPU time per tool and the
// conflicts per plan where measured. An engine result may be nil (its
// measurement failed): the system's row is printed alone, without the
// ratio.
func Report(w io.Writer, system, engine []*Result) {
	fmt.Fprintf(w, "| workload | runner | makespan median (min–max) | ms/critical step | tools/s | plans/s | latency p50 / p99 | CPU ms/tool | conflicts/plan | × engine floor |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range system {
		for _, r := range []*Result{system[i], engine[i]} {
			if r == nil {
				continue
			}
			plans, lat, conflicts := "", "", ""
			if r.Instances > 1 {
				plans = fmt.Sprintf("%.0f", r.PlansPerSec())
				lat = fmtDur(r.Percentile(50)) + " / " + fmtDur(r.Percentile(99))
			}
			if r.HasConflicts {
				conflicts = fmt.Sprintf("%.2f", r.ConflictsPerPlan())
			}
			ratio := ""
			if engine[i] != nil {
				ratio = fmt.Sprintf("%.1f", float64(r.Median())/float64(engine[i].Median()))
			}
			fmt.Fprintf(w, "| %s | %s | %s (%s–%s) | %.3f | %.0f | %s | %s | %s | %s | %s |\n", r.Workload, r.Runner,
				fmtDur(r.Median()), fmtDur(r.Min()), fmtDur(r.Max()), r.MsPerStep(), r.ToolsPerSec(), plans, lat,
				cpuCell(r), conflicts, ratio)
		}
	}
}

// ReportBus prints the bus floor as a Markdown table.
func ReportBus(w io.Writer, f *BusFloor) {
	cpu := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return ms(d)
	}
	fmt.Fprintf(w, "| bus floor | p50 ms | p99 ms | CPU ms each |\n|---|---|---|---|\n")
	fmt.Fprintf(w, "| JetStream publish+ack | %s | %s | |\n", ms(f.Publish[0]), ms(f.Publish[1]))
	fmt.Fprintf(w, "| KV compare-and-set | %s | %s | |\n", ms(f.CAS[0]), ms(f.CAS[1]))
	fmt.Fprintf(w, "| work-queue publish→pull delivery | %s | %s | |\n", ms(f.Delivery[0]), ms(f.Delivery[1]))
	fmt.Fprintf(w, "| three-trip sum (the p50s) | %s | | |\n", ms(f.ThreeTrips()))
	fmt.Fprintf(w, "| bus-only chain, per step (median of rounds of %d) | %s | | %s |\n", f.Steps, ms(f.Step), cpu(f.StepCPU))
	fmt.Fprintf(w, "| bus-only fan-out, per call (median of rounds of %d): %.0f tools/s | %s | | %s |\n",
		f.Calls, f.ToolsPerSec, ms(time.Duration(float64(time.Second)/f.ToolsPerSec)), cpu(f.ToolCPU))
	if f.EventsToolsPerSec > 0 {
		fmt.Fprintf(w, "| the same with planbus's 3 events a call: %.0f tools/s | %s | | %s |\n",
			f.EventsToolsPerSec, ms(time.Duration(float64(time.Second)/f.EventsToolsPerSec)), cpu(f.EventsToolCPU))
	}
	if f.PlansPerSec > 0 {
		fmt.Fprintf(w, "| bus-only plans, per plan (median of rounds of %d 5-tool diamonds, every message of planbus's): %.0f plans/s | %s | | %s |\n",
			f.Plans, f.PlansPerSec, ms(time.Duration(float64(time.Second)/f.PlansPerSec)), cpu(f.PlanCPU))
	}
}

// IsChain tells whether a result is a chain's: one plan whose tools are
// all on its critical path, none sleeping. Chains are compared with the
// bus floor per step, the others per tool.
func (r *Result) IsChain() bool {
	return r.Instances == 1 && r.Steps == r.Tools && r.SleepMs == 0
}

// ReportRatios prints each result against the bus floor, as a cost ratio:
// what planbus takes ÷ what the bus alone takes, so 1.0 is the bus's
// limit and more is planbus's overhead. A chain compares its ms per step
// with the bus-only chain's and with the three-trip sum, and its CPU per
// step with the bus-only chain's; any other workload compares its time
// per tool (1 ÷ tools/s) with the bus-only fan-out's, and its CPU per
// tool with the bus-only fan-out's. plans/s for many-plan workloads is
// set against the bus-only fan-out's tools/s ÷ tools per plan, and for
// those of 5-tool no-op plans three steps deep (the diamond) against the bus-only plans' plans/s, with the CPU
// per plan (the CPU columns then count a plan, not a tool).
func ReportRatios(w io.Writer, f *BusFloor, system []*Result) {
	fmt.Fprintf(w, "| workload | compared as | planbus | bus floor | × floor | CPU ms planbus | CPU ms bus-only | × floor CPU |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|\n")
	cpuRatio := func(r *Result, mine, floor time.Duration) (string, string, string) {
		if !r.HasCPU || floor == 0 {
			return "", "", ""
		}
		return ms(mine), ms(floor), fmt.Sprintf("%.1f", float64(mine)/float64(floor))
	}
	for _, r := range system {
		if r.IsChain() {
			step := r.MsPerStep()
			a, b, c := cpuRatio(r, r.CPUPerStep(), f.StepCPU)
			fmt.Fprintf(w, "| %s | ms/step vs bus-only chain | %.3f | %s | %.2f | %s | %s | %s |\n", r.Workload, step,
				ms(f.Step), step/(float64(f.Step.Nanoseconds())/1e6), a, b, c)
			fmt.Fprintf(w, "| %s | ms/step vs three-trip sum | %.3f | %s | %.2f | | | |\n", r.Workload, step,
				ms(f.ThreeTrips()), step/(float64(f.ThreeTrips().Nanoseconds())/1e6))
			continue
		}
		a, b, c := cpuRatio(r, r.CPUPerTool(), f.ToolCPU)
		fmt.Fprintf(w, "| %s | tools/s vs bus-only fan-out | %.0f | %.0f | %.2f | %s | %s | %s |\n", r.Workload,
			r.ToolsPerSec(), f.ToolsPerSec, f.ToolsPerSec/r.ToolsPerSec(), a, b, c)
		if f.EventsToolsPerSec > 0 {
			a, b, c := cpuRatio(r, r.CPUPerTool(), f.EventsToolCPU)
			fmt.Fprintf(w, "| %s | tools/s vs bus-only fan-out with events | %.0f | %.0f | %.2f | %s | %s | %s |\n", r.Workload,
				r.ToolsPerSec(), f.EventsToolsPerSec, f.EventsToolsPerSec/r.ToolsPerSec(), a, b, c)
		}
		if r.Instances > 1 {
			eq := f.ToolsPerSec / float64(r.Tools)
			fmt.Fprintf(w, "| %s | plans/s vs bus-only tools/s ÷ %d | %.0f | %.0f | %.2f | | | |\n", r.Workload, r.Tools,
				r.PlansPerSec(), eq, eq/r.PlansPerSec())
		}
		if r.Instances > 1 && r.Tools == floorPlanTools && r.Steps == 3 && r.SleepMs == 0 && f.PlansPerSec > 0 {
			a, b, c := cpuRatio(r, r.CPUPerTool()*floorPlanTools, f.PlanCPU)
			fmt.Fprintf(w, "| %s | plans/s vs bus-only plans | %.0f | %.0f | %.2f | %s | %s | %s |\n", r.Workload,
				r.PlansPerSec(), f.PlansPerSec, f.PlansPerSec/r.PlansPerSec(), a, b, c)
		}
	}
}

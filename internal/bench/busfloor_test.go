package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus/bustest"
)

// The bus floor runs on a real server, yields ordered figures for every
// trip and pattern, and leaves none of its streams behind.
func TestMeasureBus(t *testing.T) {
	cfg := bustest.Start(t)
	d, w := bustest.Dial(t, cfg), bustest.Dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := MeasureBus(ctx, BusConfig{Dispatcher: d, Worker: w, Samples: 50, Steps: 10, Calls: 50, Plans: 50, Rounds: 2, CPU: SelfCPU})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string][2]time.Duration{"publish": f.Publish, "compare-and-set": f.CAS, "delivery": f.Delivery} {
		if p[0] <= 0 || p[0] > p[1] {
			t.Errorf("%s: p50 %v, p99 %v; want 0 < p50 <= p99", name, p[0], p[1])
		}
	}
	if f.ThreeTrips() != f.Publish[0]+f.CAS[0]+f.Delivery[0] {
		t.Errorf("three trips %v, want the sum of the p50s", f.ThreeTrips())
	}
	if f.Step <= 0 || f.ToolsPerSec <= 0 || f.StepCPU <= 0 || f.ToolCPU <= 0 || f.EventsToolsPerSec <= 0 || f.EventsToolCPU <= 0 {
		t.Errorf("patterns: step %v (CPU %v), %v tools/s (CPU %v), with events %v tools/s (CPU %v); want all positive",
			f.Step, f.StepCPU, f.ToolsPerSec, f.ToolCPU, f.EventsToolsPerSec, f.EventsToolCPU)
	}
	if f.Plans != 50 || f.PlansPerSec <= 0 || f.PlanCPU <= 0 || f.PlanCPU < f.ToolCPU {
		t.Errorf("bus-only plans: %d a round, %v plans/s, CPU %v a plan (a tool's %v); want 50, positive, and a plan dearer than a call",
			f.Plans, f.PlansPerSec, f.PlanCPU, f.ToolCPU)
	}
	for _, name := range []string{floorResults, floorCalls, floorEvents, "KV_" + floorBucket} {
		if _, err := d.JS.Stream(ctx, name); err != jetstream.ErrStreamNotFound {
			t.Errorf("stream %s after the floor: err = %v, want it deleted", name, err)
		}
	}
	var out strings.Builder
	ReportBus(&out, f)
	for _, want := range []string{"| JetStream publish+ack |", "| KV compare-and-set |", "| work-queue publish→pull delivery |",
		"| three-trip sum (the p50s) |", "| bus-only chain, per step", "tools/s", "with planbus's 3 events a call",
		"| bus-only plans, per plan (median of rounds of 50 5-tool diamonds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// Ratios compare a chain per step and everything else per tool, as cost
// ratios (planbus ÷ floor).
func TestReportRatios(t *testing.T) {
	f := &BusFloor{Publish: [2]time.Duration{100 * time.Microsecond}, CAS: [2]time.Duration{100 * time.Microsecond},
		Delivery: [2]time.Duration{200 * time.Microsecond}, Step: 500 * time.Microsecond, StepCPU: 250 * time.Microsecond,
		ToolsPerSec: 10000, ToolCPU: 50 * time.Microsecond, EventsToolsPerSec: 8000, EventsToolCPU: 80 * time.Microsecond,
		PlansPerSec: 2500, PlanCPU: 250 * time.Microsecond}
	chain := &Result{Workload: "chain-10", Tools: 10, Instances: 1, Steps: 10, Makespans: []time.Duration{10 * time.Millisecond},
		CPU: 5 * time.Millisecond, HasCPU: true}
	fan := &Result{Workload: "many", Tools: 5, Instances: 100, Steps: 3, Makespans: []time.Duration{100 * time.Millisecond},
		CPU: 50 * time.Millisecond, HasCPU: true}
	var out strings.Builder
	ReportRatios(&out, f, []*Result{chain, fan})
	for _, want := range []string{
		"| chain-10 | ms/step vs bus-only chain | 1.000 | 0.500 | 2.00 | 0.500 | 0.250 | 2.0 |",
		"| chain-10 | ms/step vs three-trip sum | 1.000 | 0.400 | 2.50 |",
		"| many | tools/s vs bus-only fan-out | 5000 | 10000 | 2.00 | 0.100 | 0.050 | 2.0 |",
		"| many | plans/s vs bus-only tools/s ÷ 5 | 1000 | 2000 | 2.00 |",
		"| many | tools/s vs bus-only fan-out with events | 5000 | 8000 | 1.60 | 0.100 | 0.080 | 1.2 |",
		"| many | plans/s vs bus-only plans | 1000 | 2500 | 2.50 | 0.500 | 0.250 | 2.0 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ratios lack %q:\n%s", want, out.String())
		}
	}
}

// The bus-only plans leave nothing in their work queue: every call, and
// every timeout timer (postponed by a nak, as planbus does), is
// acknowledged, by the time the round returns.
func TestBusOnlyPlansLeaveTheirWorkQueueEmpty(t *testing.T) {
	cfg := bustest.Start(t)
	d, w := bustest.Dial(t, cfg), bustest.Dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fb := &floorBus{cfg: BusConfig{Dispatcher: d, Worker: w}.withDefaults(), d: d.JS, w: w.JS}
	if err := fb.declare(ctx); err != nil {
		t.Fatal(err)
	}
	defer fb.remove()
	if _, _, err := fb.plans(ctx, "t", 50); err != nil {
		t.Fatal(err)
	}
	info, err := fb.calls.Info(ctx, jetstream.WithSubjectFilter(floorPrefix+"calls.>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 0 {
		t.Fatalf("calls and timers left in the work queue after the round: %v", info.State.Subjects)
	}
}

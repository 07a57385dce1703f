package goap

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// workshopDomain is the benchmark's medium domain: tools, raw materials,
// two production stages and an assembly, with `distractors` switches that
// cost little and change nothing useful, as noise in a real world state.
func workshopDomain(distractors int) string {
	var b strings.Builder
	b.WriteString(`{"name": "workshop", "facts": {
		"ore": 0, "coal": 0, "wood": 0, "stone": 0, "ingot": 0, "plank": 0, "gear": 0, "frame": 0, "machine": 0,
		"pick": false, "axe": false, "furnace": false`)
	for i := range distractors {
		fmt.Fprintf(&b, `, "switch%d": false`, i)
	}
	b.WriteString(`}, "actions": [
		{"name": "mine", "preconditions": {"pick": true, "ore": {"lt": 6}}, "effects": {"ore": {"inc": 2}}, "cost": 2},
		{"name": "mine-by-hand", "preconditions": {"ore": {"lt": 6}}, "effects": {"ore": {"inc": 1}}, "cost": 4},
		{"name": "dig-coal", "preconditions": {"pick": true, "coal": {"lt": 6}}, "effects": {"coal": {"inc": 2}}, "cost": 2},
		{"name": "chop", "preconditions": {"axe": true, "wood": {"lt": 6}}, "effects": {"wood": {"inc": 2}}, "cost": 2},
		{"name": "gather", "preconditions": {"wood": {"lt": 6}}, "effects": {"wood": {"inc": 1}}, "cost": 3},
		{"name": "quarry", "preconditions": {"stone": {"lt": 6}}, "effects": {"stone": {"inc": 1}}, "cost": 3},
		{"name": "craft-pick", "preconditions": {"pick": false, "wood": {"gte": 1}, "stone": {"gte": 1}}, "effects": {"pick": true, "wood": {"dec": 1}, "stone": {"dec": 1}}, "cost": 2},
		{"name": "craft-axe", "preconditions": {"axe": false, "wood": {"gte": 1}, "stone": {"gte": 1}}, "effects": {"axe": true, "wood": {"dec": 1}, "stone": {"dec": 1}}, "cost": 2},
		{"name": "build-furnace", "preconditions": {"furnace": false, "stone": {"gte": 2}}, "effects": {"furnace": true, "stone": {"dec": 2}}, "cost": 4},
		{"name": "smelt", "preconditions": {"furnace": true, "ore": {"gte": 1}, "coal": {"gte": 1}, "ingot": {"lt": 4}}, "effects": {"ingot": {"inc": 1}, "ore": {"dec": 1}, "coal": {"dec": 1}}, "cost": "ingot < 2 ? 2 : 3", "minCost": 2},
		{"name": "saw", "preconditions": {"wood": {"gte": 1}, "plank": {"lt": 4}}, "effects": {"plank": {"inc": 2}, "wood": {"dec": 1}}, "cost": 1},
		{"name": "make-gear", "preconditions": {"ingot": {"gte": 1}, "gear": {"lt": 2}}, "effects": {"gear": {"inc": 1}, "ingot": {"dec": 1}}, "cost": 2},
		{"name": "make-frame", "preconditions": {"plank": {"gte": 2}, "ingot": {"gte": 1}, "frame": {"lt": 1}}, "effects": {"frame": {"inc": 1}, "plank": {"dec": 2}, "ingot": {"dec": 1}}, "cost": 3},
		{"name": "assemble", "input": {"gears": "{gear}", "frames": "{frame}"}, "preconditions": {"gear": {"gte": 2}, "frame": {"gte": 1}}, "effects": {"machine": {"inc": 1}, "gear": {"dec": 2}, "frame": {"dec": 1}}, "cost": 5}`)
	for i := range distractors {
		fmt.Fprintf(&b, `,
		{"name": "flip%d", "preconditions": {"switch%d": false}, "effects": {"switch%d": true}, "cost": 1}`, i, i, i)
	}
	b.WriteString(`], "goals": [{"name": "machine", "conditions": {"machine": {"gte": 1}}}]}`)
	return b.String()
}

// cpuPerOp starts measuring the process's CPU time; the function it
// returns reports it per operation as cpu-ns/op, which on a shared
// machine varies less than ns/op. It reports nothing where the CPU time
// is not measured.
func cpuPerOp(b *testing.B) func() {
	c0, ok := processCPU()
	return func() {
		if c1, _ := processCPU(); ok && b.N > 0 {
			b.ReportMetric(float64((c1-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func BenchmarkPlanWorkshop(b *testing.B) {
	d := mustDecode(b, workshopDomain(4))
	ctx := context.Background()
	var r *Result
	defer cpuPerOp(b)()
	for b.Loop() {
		var err error
		if r, err = Plan(ctx, d, nil, "machine", Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.Stats.Expanded), "expanded/op")
	b.ReportMetric(float64(len(r.Steps)), "steps")
}

// BenchmarkSearchWorkshop is BenchmarkPlanWorkshop's search in a warm
// Planner, which keeps its structures between searches.
func BenchmarkSearchWorkshop(b *testing.B) {
	p := NewPlanner(mustDecode(b, workshopDomain(4)))
	ctx := context.Background()
	if _, err := p.Search(ctx, nil, "machine", Options{}); err != nil { // warm up
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := p.Search(ctx, nil, "machine", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlanWoodcutter(b *testing.B) {
	d := loadExample(b, "woodcutter")
	ctx := context.Background()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := Plan(ctx, d, nil, "build-cabin", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeWoodcutter(b *testing.B) {
	doc := []byte(exampleDoc(b, "woodcutter"))
	for b.Loop() {
		if _, err := Decode(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkArbiterSelect(b *testing.B) {
	a, _ := NewArbiter(loadExample(b, "woodcutter"), ArbiterConfig{})
	s := State{"wood": 3, "gold": 12}
	now := time.Unix(0, 0)
	for b.Loop() {
		if _, err := a.Select(s, now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWorkshopPlan pins the benchmark domain's plan, so the benchmark
// measures a search that finds it, and checks the distractors are pruned.
func TestWorkshopPlan(t *testing.T) {
	var first *Result
	for _, n := range []int{0, 4} {
		r, err := Plan(context.Background(), mustDecode(t, workshopDomain(n)), nil, "machine", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Cost != 48 || len(r.Steps) != 19 {
			t.Errorf("%d distractors: cost %v in %d steps %v, want 48 in 19", n, r.Cost, len(r.Steps), actionNames(r))
		}
		if first == nil {
			first = r
		} else if r.Stats != first.Stats {
			t.Errorf("%d distractors: %+v, without: %+v; want the same search", n, r.Stats, first.Stats)
		}
	}
}

package goap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The reference domains are other GOAP planners' own examples and
// benchmarks, translated to the domain format (testdata/reference; each
// document's description names its source and how it was translated).
// Their plans must cost what the reference planners' plans cost, so the
// benchmarks below compare equal work.
var referenceCases = []struct {
	name string
	goal string
	cost float64 // the reference planner's plan cost
	len  int
}{
	{"soldier", "kill", 4, 4},   // GPGOAP: scout, load, aim, shoot
	{"forage", "food", 12, 12},  // kelindar/goap: 9 forage, 3 sleep
	{"maze", "reach-Z", 25, 25}, // kelindar/goap: A->B ... Y->Z
}

func loadReference(t testing.TB, name string) *Domain {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", "reference", name+".goap.json"))
	if err != nil {
		t.Fatal(err)
	}
	return mustDecode(t, string(doc))
}

func TestReferenceDomains(t *testing.T) {
	for _, rc := range referenceCases {
		t.Run(rc.name, func(t *testing.T) {
			r, err := Plan(context.Background(), loadReference(t, rc.name), nil, rc.goal, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Cost != rc.cost || len(r.Steps) != rc.len {
				t.Errorf("cost %v in %d steps %v, want the reference's %v in %d", r.Cost, len(r.Steps), actionNames(r), rc.cost, rc.len)
			}
		})
	}
}

// BenchmarkReference plans on the reference domains four ways: search is
// Planner.Search in a warm Planner, the work the reference planners
// measure (a plan of actions and costs); plan is the package's Plan, which
// also builds the Result with each step's input and predicted state;
// plan-toplan is Plan and ToPlan, the Plan JSON of a Result; service is
// what the planner service does per request (internal/planner's
// goapPlanner.Generate): a state of its own, a Disabled func over the
// served skills, and PlanJSON, the Plan JSON with its metadata straight
// from the search.
func BenchmarkReference(b *testing.B) {
	for _, rc := range referenceCases {
		d := loadReference(b, rc.name)
		ctx := context.Background()
		b.Run(rc.name+"/search", func(b *testing.B) {
			p := NewPlanner(d)
			if _, err := p.Search(ctx, nil, rc.goal, Options{}); err != nil { // warm up
				b.Fatal(err)
			}
			b.ReportAllocs()
			defer cpuPerOp(b)()
			var sol *Solution
			for b.Loop() {
				var err error
				if sol, err = p.Search(ctx, nil, rc.goal, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			if sol.Cost() != rc.cost {
				b.Fatalf("cost %v, want %v", sol.Cost(), rc.cost)
			}
		})
		b.Run(rc.name+"/plan", func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := Plan(ctx, d, nil, rc.goal, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(rc.name+"/plan-toplan", func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				r, err := Plan(ctx, d, nil, rc.goal, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ToPlan(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(rc.name+"/service", func(b *testing.B) {
			skills := map[string]bool{}
			for _, a := range d.Actions {
				skills[a.Skill] = true
			}
			var disabledSkills []string
			disabled := func(skill string) bool { return slices.Contains(disabledSkills, skill) || !skills[skill] }
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				state := State{}
				if _, err := PlanJSON(ctx, d, state, rc.goal, Options{Disabled: disabled}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package goap_test

import (
	"context"
	"fmt"
	"time"

	"github.com/planbus/planbus/internal/goap"
)

const woodcutter = `{
  "name": "woodcutter",
  "facts": {"has_axe": false, "wood": 0, "cabin": false, "tree": "oak"},
  "actions": [
    {"name": "take-axe", "skill": "fetch", "input": {"item": "axe"},
     "preconditions": {"has_axe": false}, "effects": {"has_axe": true}, "cost": 1},
    {"name": "chop", "input": {"tree": "{tree}"},
     "preconditions": {"has_axe": true}, "effects": {"wood": {"inc": 2}}, "cost": 2},
    {"name": "gather", "effects": {"wood": {"inc": 1}}, "cost": 3},
    {"name": "build", "input": {"logs": "{wood}"},
     "preconditions": {"wood": {"gte": 4}}, "effects": {"cabin": true, "wood": {"dec": 4}}, "cost": 5}
  ],
  "goals": [
    {"name": "cabin", "conditions": {"cabin": true}, "utility": 60},
    {"name": "firewood", "conditions": {"wood": {"gte": 2}}, "utility": "cabin ? 40 : 10"}
  ]
}`

func Example() {
	d, err := goap.Decode([]byte(woodcutter))
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := goap.Plan(context.Background(), d, goap.State{"tree": "birch"}, "cabin", goap.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range r.Steps {
		fmt.Println(s.Action, s.Skill, string(s.Input), s.Cost)
	}
	fmt.Println("cost", r.Cost)

	// Plan JSON for the dispatcher: a chain of tools.
	p, _ := goap.ToPlan(r)
	for _, t := range p.Tools {
		fmt.Println(t.ToolID, t.Dependencies)
	}
	// Output:
	// take-axe fetch {"item":"axe"} 1
	// chop chop {"tree":"birch"} 2
	// chop chop {"tree":"birch"} 2
	// build build {"logs":4} 5
	// cost 10
	// 1-take-axe []
	// 2-chop [1-take-axe]
	// 3-chop [2-chop]
	// 4-build [3-chop]
}

func ExampleOptions_disabled() {
	d, _ := goap.Decode([]byte(woodcutter))
	// Without the fetch skill there is no axe: wood is gathered by hand.
	r, _ := goap.Plan(context.Background(), d, nil, "cabin", goap.Options{
		Disabled: func(skill string) bool { return skill == "fetch" },
	})
	fmt.Println(len(r.Steps), "steps, cost", r.Cost)

	_, err := goap.Plan(context.Background(), d, nil, "cabin", goap.Options{
		Disabled: func(skill string) bool { return skill == "build" },
	})
	fmt.Println(err)
	// Output:
	// 5 steps, cost 17
	// goap: goal cabin unreachable: unsatisfied cabin equals true (is false); no usable action changes cabin; disabled: build (skill build)
}

func ExampleArbiter() {
	d, _ := goap.Decode([]byte(woodcutter))
	a, _ := goap.NewArbiter(d, goap.ArbiterConfig{})
	now := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)

	sel, _ := a.Select(goap.State{}, now)
	fmt.Println(sel.Goal, sel.Reason)

	// The cabin goal failed: it cools down for 5s and firewood takes over.
	_ = a.Failed("cabin", now)
	sel, _ = a.Select(goap.State{}, now)
	fmt.Println(sel.Goal, sel.Reason)

	sel, _ = a.Select(goap.State{}, now.Add(5*time.Second))
	fmt.Println(sel.Goal, sel.Reason, "-", sel.Detail)
	// Output:
	// cabin best
	// firewood best
	// cabin switch - cabin (60) beats firewood (10) by 20% or more
}

func ExampleTracker() {
	d, _ := goap.Decode([]byte(woodcutter))
	r, _ := goap.Plan(context.Background(), d, nil, "cabin", goap.Options{})
	tr, _ := goap.NewTracker(d, r, goap.TrackerConfig{})

	dec, _ := tr.Succeeded(r.Steps[0].State) // take-axe
	fmt.Println(dec.Verdict, dec.Step)

	// The chop yielded one log instead of two: the rest of the plan no
	// longer reaches the goal.
	observed := goap.State{"has_axe": true, "wood": 1}
	dec, _ = tr.Succeeded(observed)
	fmt.Println(dec.Verdict, "-", dec.Reason)
	// Output:
	// continue 1
	// replan - step 2 (chop) succeeded; step 4 (build) would not apply: wood gte 4 (is 3); replan 1 of 3
}

package htn_test

import (
	"context"
	"fmt"

	"github.com/planbus/planbus/internal/htn"
)

const taxiDomain = `
walking-distance(?u,?v) :- weather-is(good), distance(?u,?v,?w), =<(?w, 3).
have-taxi-fare(?distance) :- have-cash(?m), >=(?m, +(1.5, ?distance)).

travel-to(?q) :- if(at(?p), walking-distance(?p, ?q)), do(walk(?p, ?q)).
travel-to(?y) :- if(first(at(?x), at-taxi-stand(?t, ?x), distance(?x, ?y, ?d), have-taxi-fare(?d))),
                 do(hail(?t, ?x), ride(?t, ?x, ?y), pay-driver(+(1.50, ?d))).
pay-driver(?fare) :- if(have-cash(?m), >=(?m, ?fare)), do(set-cash(?m, -(?m, ?fare))).

walk(?here, ?there) :- del(at(?here)), add(at(?there)).
hail(?vehicle, ?location) :- del(), add(at(?vehicle, ?location)).
ride(?vehicle, ?a, ?b) :- del(at(?a), at(?vehicle, ?a)), add(at(?b), at(?vehicle, ?b)).
set-cash(?old, ?new) :- del(have-cash(?old)), add(have-cash(?new)).

distance(downtown, park, 2).
at-taxi-stand(taxi1, downtown).
at(downtown).
weather-is(good).
have-cash(12).
`

func Example() {
	prog, err := htn.Parse(taxiDomain)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := prog.Plan(context.Background(), "travel-to(park)", htn.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(htn.FormatPlans(res.Plans))

	// Every operator knows which methods and bindings produced it.
	last := res.Plans[1].Operators()[2]
	for _, step := range last.Trace() {
		fmt.Println(step.Task, "by", step.Method, step.Bindings)
	}

	ans, _ := prog.Query(context.Background(), "at(?where), distance(?where, ?to, ?d)", htn.Options{})
	fmt.Println(htn.FormatQuery(ans))
	// Output:
	// [ { (walk(downtown,park)) } { (hail(taxi1,downtown), ride(taxi1,downtown,park), set-cash(12,8.500000000)) } ]
	// travel-to(park) by travel-to(?y) [{y park} {x downtown} {t taxi1} {d 2}]
	// pay-driver(3.500000000) by pay-driver(?fare) [{fare 3.500000000} {m 12}]
	// ((?where = downtown, ?d = 2, ?to = park))
}

func ExampleProgram_Plan_firstOnly() {
	prog, _ := htn.Parse(taxiDomain)
	res, _ := prog.Plan(context.Background(), "travel-to(park)", htn.Options{FirstOnly: true})
	fmt.Println(htn.FormatPlan(&res.Plans[0]))
	fmt.Println(htn.FormatPlanFacts(&res.Plans[0]))
	// Output:
	// (walk(downtown,park))
	// distance(downtown,park,2) => ,at-taxi-stand(taxi1,downtown) => ,weather-is(good) => ,have-cash(12) => ,at(park) =>
}

func ExampleOptions_disabled() {
	prog, _ := htn.Parse(taxiDomain)
	// With walking forbidden, the planner backtracks to the taxi method.
	res, _ := prog.Plan(context.Background(), "travel-to(park)", htn.Options{
		Disabled: func(op string) bool { return op == "walk" },
	})
	fmt.Println(htn.FormatPlans(res.Plans))
	// Output:
	// [ { (hail(taxi1,downtown), ride(taxi1,downtown,park), set-cash(12,8.500000000)) } ]
}

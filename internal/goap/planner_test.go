package goap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func exampleDoc(t testing.TB, name string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "examples", "goap", name+".goap.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

func loadExample(t testing.TB, name string) *Domain {
	t.Helper()
	return mustDecode(t, exampleDoc(t, name))
}

func actionNames(r *Result) []string {
	out := []string{}
	for _, s := range r.Steps {
		out = append(out, s.Action)
	}
	return out
}

// signs is the seed's "Incremental Effects Need State Keys" case: a goal
// of pending == 0 from pending == 2 needs the same action twice.
const signs = `{"name": "signs", "facts": {"pending": 2, "planks": 0},
	"actions": [
		{"name": "write-sign", "preconditions": {"pending": {"gt": 0}, "planks": {"gte": 6}}, "effects": {"pending": {"dec": 1}, "planks": {"dec": 6}}},
		{"name": "process-wood", "effects": {"planks": {"inc": 4}}, "cost": 2}
	],
	"goals": [{"name": "signs-written", "conditions": {"pending": 0}}]}`

const travel = `{"name": "travel", "facts": {"at": "home", "cash": 10, "car": true},
	"actions": [
		{"name": "walk-town", "preconditions": {"at": "home"}, "effects": {"at": "town"}, "cost": 10},
		{"name": "drive-town", "skill": "car", "preconditions": {"at": "home", "car": true}, "effects": {"at": "town"}, "cost": 3},
		{"name": "taxi-town", "skill": "taxi", "preconditions": {"at": "home", "cash": {"gte": 5}}, "effects": {"at": "town", "cash": {"dec": 5}}, "cost": "cash > 8 ? 4 : 6", "minCost": 4},
		{"name": "town-park", "preconditions": {"at": "town"}, "effects": {"at": "park"}, "cost": 1},
		{"name": "home-park", "skill": "car", "preconditions": {"at": "home", "car": true}, "effects": {"at": "park"}, "cost": 4}
	],
	"goals": [
		{"name": "park", "conditions": {"at": "park"}},
		{"name": "rich", "conditions": {"cash": {"gte": 100}}},
		{"name": "carless", "conditions": {"car": false}}
	]}`

func TestPlan(t *testing.T) {
	noCar := func(skill string) bool { return skill == "car" }
	tests := []struct {
		name   string
		domain string
		state  State
		goal   string
		opts   Options
		want   []string
		cost   float64
	}{
		{"direct is cheapest", travel, nil, "park", Options{}, []string{"home-park"}, 4},
		{"disabled skill", travel, nil, "park", Options{Disabled: noCar}, []string{"taxi-town", "town-park"}, 5},
		{"dynamic cost", travel, State{"cash": 6}, "park", Options{Disabled: noCar}, []string{"taxi-town", "town-park"}, 7},
		{"too poor for a taxi", travel, State{"cash": 4}, "park", Options{Disabled: noCar}, []string{"walk-town", "town-park"}, 11},
		{"already there", travel, State{"at": "park"}, "park", Options{}, []string{}, 0},
		{"repeated action needs state keys", signs, nil, "signs-written", Options{},
			[]string{"process-wood", "process-wood", "write-sign", "process-wood", "write-sign"}, 8},
		{"woodcutter", exampleDoc(t, "woodcutter"), nil, "build-cabin", Options{},
			[]string{"take-axe", "chop", "chop", "chop", "build-cabin"}, 12},
		{"woodcutter with an axe and wood", exampleDoc(t, "woodcutter"), State{"has_axe": true, "wood": 5}, "build-cabin", Options{},
			[]string{"chop", "build-cabin"}, 7},
		{"woodcutter without the shed", exampleDoc(t, "woodcutter"), State{"axe_in_shed": false}, "build-cabin", Options{},
			[]string{"buy-axe", "chop", "chop", "chop", "build-cabin"}, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustDecode(t, tt.domain)
			r, err := Plan(context.Background(), d, tt.state, tt.goal, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, actionNames(r)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if r.Cost != tt.cost {
				t.Errorf("cost: got %v, want %v", r.Cost, tt.cost)
			}
			sum := 0.0
			for _, s := range r.Steps {
				sum += s.Cost
			}
			if sum != r.Cost {
				t.Errorf("steps cost %v, result says %v", sum, r.Cost)
			}
			if ok, _ := d.Satisfied(tt.goal, lastState(r)); !ok {
				t.Errorf("final state %v does not satisfy %s", lastState(r), tt.goal)
			}
		})
	}
}

func lastState(r *Result) State {
	if len(r.Steps) == 0 {
		return r.Start
	}
	return r.Steps[len(r.Steps)-1].State
}

func TestPlanSteps(t *testing.T) {
	d := loadExample(t, "woodcutter")
	r, err := Plan(context.Background(), d, State{"has_axe": true, "wood": 4, "tree": "birch", "ignored": []any{1}}, "build-cabin", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Action: "chop", Skill: "chop", Description: "fell a tree with the axe: two logs", Input: []byte(`{"note":"felling birch #4","tree":"birch"}`), Cost: 2,
			State: State{"axe_in_shed": true, "cabin": false, "gold": 10.0, "has_axe": true, "tree": "birch", "wood": 6.0}},
		{Action: "build-cabin", Skill: "build", Description: "build-cabin", Input: []byte(`{"logs":6,"structure":"cabin"}`), Cost: 5,
			State: State{"axe_in_shed": true, "cabin": true, "gold": 10.0, "has_axe": true, "tree": "birch", "wood": 0.0}},
	}
	if diff := cmp.Diff(want, r.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	wantStart := State{"axe_in_shed": true, "cabin": false, "gold": 10.0, "has_axe": true, "tree": "birch", "wood": 4.0}
	if diff := cmp.Diff(wantStart, r.Start); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
}

func TestPlanErrors(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		domain string
		ctx    context.Context
		state  State
		goal   string
		opts   Options
		is     error
		want   string
	}{
		{"unknown goal", travel, nil, nil, "moon", Options{}, ErrUnknownGoal, `"moon" (the domain has goals park, rich, carless)`},
		{"mistyped fact", travel, nil, State{"cash": "lots"}, "park", Options{}, ErrInvalidState, `fact cash is a number, got "lots"`},
		{"NaN fact", travel, nil, State{"cash": math.NaN()}, "park", Options{}, ErrInvalidState, "fact cash: number NaN is not finite"},
		{"no action changes the fact", travel, nil, nil, "carless", Options{}, ErrUnreachable,
			"goal carless unreachable: unsatisfied car equals false (is true); no usable action changes car"},
		{"no action goes the right way", travel, nil, nil, "rich", Options{}, ErrUnreachable,
			"goal rich unreachable: unsatisfied cash gte 100 (is 10); no usable action can make cash gte 100"},
		{"every way disabled", travel, nil, State{"cash": 0}, "park", Options{Disabled: func(s string) bool { return s != "taxi" }}, ErrUnreachable,
			`goal park unreachable: unsatisfied at equals "park" (is "home"); no usable action can make at equals "park"; disabled: town-park (skill town-park), home-park (skill car)`},
		{"searched everything", travel, nil, State{"cash": 0, "car": false, "at": "nowhere"}, "park", Options{}, ErrUnreachable,
			`goal park unreachable: unsatisfied at equals "park" (is "nowhere"); no sequence of usable actions reaches it; searched 1 states`},
		{"wrong direction only", `{"name": "d", "facts": {"n": 0}, "actions": [{"name": "down", "effects": {"n": {"dec": 1}}, "cost": 0}],
			"goals": [{"name": "g", "conditions": {"n": 2}}]}`, nil, nil, "g", Options{}, ErrUnreachable,
			"goal g unreachable: unsatisfied n equals 2 (is 0); no usable action increases n, as n equals 2 needs"},
		{"max cost", travel, nil, nil, "park", Options{MaxCost: 3.5}, ErrUnreachable, "no plan costs at most 3.5 (Options.MaxCost)"},
		{"budget", signs, nil, State{"pending": 50}, "signs-written", Options{MaxNodes: 10}, ErrBudgetExceeded,
			"expanded 10 states for goal signs-written without reaching it (Options.MaxNodes 10)"},
		{"memory budget", signs, nil, State{"pending": 50}, "signs-written", Options{MaxMemory: 32 << 10}, ErrBudgetExceeded,
			"bytes after expanding"},
		{"canceled", signs, canceled, nil, "signs-written", Options{}, context.Canceled, "goap: canceled: context canceled"},
		{"cost fails", `{"name": "d", "facts": {"n": 0, "s": {"type": "string"}}, "actions": [{"name": "a", "effects": {"n": 1}, "cost": "len(s) + 1"}],
			"goals": [{"name": "g", "conditions": {"n": 1}}]}`, nil, nil, "g", Options{}, ErrEval, "goap: action a: cost: invalid argument for len"},
		{"cost below minCost", `{"name": "d", "facts": {"n": 0}, "actions": [{"name": "a", "effects": {"n": 1}, "cost": "n + 1", "minCost": 2}],
			"goals": [{"name": "g", "conditions": {"n": 1}}]}`, nil, nil, "g", Options{}, ErrEval, `"n + 1" gave 1 in state {n: 0}, below the action's minCost 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			r, err := Plan(ctx, mustDecode(t, tt.domain), tt.state, tt.goal, tt.opts)
			if err == nil {
				t.Fatalf("got plan %v, want an error", actionNames(r))
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v does not match %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
}

func TestUnreachableError(t *testing.T) {
	_, err := Plan(context.Background(), mustDecode(t, travel), nil, "rich", Options{})
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got %T %v, want *UnreachableError", err, err)
	}
	if diff := cmp.Diff([]string{"cash gte 100 (is 10)"}, ue.Unsatisfied); diff != "" {
		t.Errorf("unsatisfied (-want +got):\n%s", diff)
	}
}

func TestPlanDeterministic(t *testing.T) {
	d := loadExample(t, "woodcutter")
	first, err := Plan(context.Background(), d, nil, "earn-gold", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := Plan(context.Background(), d, nil, "earn-gold", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("plans differ (-first +again):\n%s", diff)
		}
	}
}

func TestRelevant(t *testing.T) {
	d := mustDecode(t, `{"name": "d",
		"facts": {"goal": false, "a": false, "b": 0, "c": 0, "noise": false, "music": 0, "price": 1},
		"actions": [
			{"name": "finish", "preconditions": {"a": true}, "effects": {"goal": true}, "cost": "price * 2"},
			{"name": "make-a", "preconditions": {"b": {"gte": 2}}, "effects": {"a": true}},
			{"name": "make-b", "effects": {"b": {"inc": 1}}},
			{"name": "discount", "effects": {"price": 0.25}},
			{"name": "shout", "effects": {"noise": true}},
			{"name": "sing", "preconditions": {"noise": true}, "effects": {"music": {"inc": 1}}},
			{"name": "sing-for-c", "preconditions": {"music": {"gt": 0}}, "effects": {"c": {"inc": 1}}}
		],
		"goals": [{"name": "g", "conditions": {"goal": true}}, {"name": "music", "conditions": {"c": 2}}]}`)
	tests := []struct {
		goal     string
		actions  []string
		keyFacts []string
	}{
		{"g", []string{"finish", "make-a", "make-b", "discount"}, []string{"a", "b", "goal", "price"}},
		{"music", []string{"shout", "sing", "sing-for-c"}, []string{"c", "music", "noise"}},
	}
	for _, tt := range tests {
		used, key := relevant(d, d.Goal(tt.goal), d.Actions)
		var names, facts []string
		for _, a := range used {
			names = append(names, a.Name)
		}
		for _, i := range key {
			facts = append(facts, d.Facts[i].Name)
		}
		if diff := cmp.Diff(tt.actions, names); diff != "" {
			t.Errorf("%s: actions (-want +got):\n%s", tt.goal, diff)
		}
		if diff := cmp.Diff(tt.keyFacts, facts); diff != "" {
			t.Errorf("%s: key facts (-want +got):\n%s", tt.goal, diff)
		}
	}
	r, err := Plan(context.Background(), d, nil, "g", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"make-b", "make-b", "make-a", "discount", "finish"}, actionNames(r)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

func TestAbsentFactsInExpressions(t *testing.T) {
	d := mustDecode(t, `{"name": "d", "facts": {"done": false, "price": {"type": "number"}, "who": {"type": "string"}},
		"actions": [
			{"name": "pay", "input": {"to": "{who}", "note": "for {who}", "amount": "{price}"}, "effects": {"done": true}, "cost": "(price ?? 2) * (who == nil ? 3 : 1)"}
		],
		"goals": [{"name": "g", "conditions": {"done": true}}]}`)
	tests := []struct {
		state State
		cost  float64
		input string
	}{
		{State{}, 6, `{"amount":null,"note":"for ","to":null}`},
		{State{"price": 5, "who": "ann"}, 5, `{"amount":5,"note":"for ann","to":"ann"}`},
	}
	for _, tt := range tests {
		r, err := Plan(context.Background(), d, tt.state, "g", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Cost != tt.cost || string(r.Steps[0].Input) != tt.input {
			t.Errorf("state %v: cost %v input %s, want %v %s", tt.state, r.Cost, r.Steps[0].Input, tt.cost, tt.input)
		}
	}
}

// TestPlanConcurrent backs the claim that a *Domain is safe for concurrent
// use; run with -race.
func TestPlanConcurrent(t *testing.T) {
	d := loadExample(t, "woodcutter")
	want, err := Plan(context.Background(), d, nil, "earn-gold", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			got, err := Plan(context.Background(), d, nil, "earn-gold", Options{})
			if err == nil && !cmp.Equal(want, got) {
				err = errors.New("plans differ")
			}
			if err == nil {
				var a *Arbiter
				if a, err = NewArbiter(d, ArbiterConfig{}); err == nil {
					_, err = a.Select(State{"gold": 3}, time.Time{})
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestPlannerReuse runs one Planner through a mix of domains' searches
// (goals, start states, disabled skills, budgets) and checks each result
// against a fresh Planner's: what a Planner keeps between searches (its
// compiled problems, records, table, remembered costs and enabled
// actions) never leaks into the next one.
func TestPlannerReuse(t *testing.T) {
	type search struct {
		goal     string
		state    State
		disabled string
		opts     Options
	}
	cases := []struct {
		d        *Domain
		searches []search
	}{
		{loadExample(t, "woodcutter"), []search{
			{goal: "build-cabin"},
			{goal: "build-cabin", state: State{"axe_in_shed": false}},
			{goal: "build-cabin", state: State{"axe_in_shed": false, "gold": 3}},
			{goal: "build-cabin", disabled: "fetch"},
			{goal: "earn-gold", state: State{"has_axe": true, "tree": "pine"}},
			{goal: "build-cabin", state: State{"has_axe": true, "wood": 5}},
			{goal: "build-cabin", opts: Options{MaxNodes: 2}},
			{goal: "build-cabin"},
		}},
		{loadFarmer(t), []search{
			{goal: "get-hoe"},
			{goal: "get-hoe", state: State{"planks": 2, "sticks": 2}},
			{goal: "get-hoe", state: State{"has_table": false, "logs": 2}},
			{goal: "write-signs", state: State{"has_table": false}},
			{goal: "write-signs"},
			{goal: "explore", state: State{"logs": 1}},
			{goal: "explore", disabled: "explore"},
			{goal: "get-hoe"},
		}},
		{mustDecode(t, workshopDomain(2)), []search{
			{goal: "machine", state: State{"pick": true, "axe": true, "furnace": true}},
			{goal: "machine", state: State{"ingot": 3, "plank": 2}},
			{goal: "machine", opts: Options{MaxMemory: 1 << 20}},
			{goal: "machine", state: State{"ingot": 3, "plank": 2}},
		}},
	}
	for _, tc := range cases {
		p := NewPlanner(tc.d)
		for i, s := range tc.searches {
			opts := s.opts
			if s.disabled != "" {
				opts.Disabled = func(skill string) bool { return skill == s.disabled }
			}
			got, gotErr := p.Plan(context.Background(), s.state, s.goal, opts)
			want, wantErr := NewPlanner(tc.d).Plan(context.Background(), s.state, s.goal, opts)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Errorf("%s search %d: error %v, fresh planner %v", tc.d.Name, i, gotErr, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s search %d (-fresh +reused):\n%s", tc.d.Name, i, diff)
			}
		}
	}
}

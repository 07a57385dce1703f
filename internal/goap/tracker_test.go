package goap

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cabinPlan is take-axe, chop, chop, chop, build-cabin.
func cabinPlan(t *testing.T) (*Domain, *Result) {
	t.Helper()
	d := loadExample(t, "woodcutter")
	r, err := Plan(context.Background(), d, nil, "build-cabin", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d, r
}

// with returns s changed by kv pairs.
func with(s State, kv ...any) State {
	out := maps.Clone(s)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func TestTracker(t *testing.T) {
	d, r := cabinPlan(t)
	predicted := func(i int) State { return r.Steps[i].State }
	type event struct {
		do      string // ok, fail, observe, replan (install a new plan from state)
		state   State
		verdict Verdict
		step    int
		reason  string // substring
	}
	tests := []struct {
		name   string
		cfg    TrackerConfig
		events []event
	}{
		{"as predicted", TrackerConfig{}, []event{
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "ok", state: predicted(1), verdict: Continue, step: 2},
			{do: "observe", state: predicted(1), verdict: Continue, step: 2, reason: "world changed"},
			{do: "ok", state: predicted(2), verdict: Continue, step: 3},
			{do: "ok", state: predicted(3), verdict: Continue, step: 4},
			{do: "ok", state: predicted(4), verdict: Done, step: -1, reason: "step 5 (build-cabin) succeeded; the goal holds"},
		}},
		{"a step did less than predicted", TrackerConfig{}, []event{
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "ok", state: with(predicted(1), "wood", 1), verdict: Replan, step: -1,
				reason: "step 2 (chop) succeeded; step 5 (build-cabin) would not apply: wood gte 6 (is 5); replan 1 of 3"},
		}},
		{"a windfall keeps the plan", TrackerConfig{}, []event{
			{do: "ok", state: with(predicted(0), "wood", 10), verdict: Continue, step: 1},
		}},
		{"goal reached early", TrackerConfig{}, []event{
			{do: "observe", state: with(r.Start, "cabin", true), verdict: Done, step: -1},
		}},
		{"world change breaks the plan", TrackerConfig{}, []event{
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "observe", state: with(predicted(0), "has_axe", false), verdict: Replan, step: -1,
				reason: "world changed; step 2 (chop) would not apply: has_axe equals true (is false)"},
		}},
		{"retries below the threshold, then replan", TrackerConfig{}, []event{
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "fail", state: predicted(0), verdict: Retry, step: 1, reason: "step 2 (chop) failed (1 of 3 failures in a row)"},
			{do: "fail", state: predicted(0), verdict: Retry, step: 1},
			{do: "fail", state: predicted(0), verdict: Replan, step: -1, reason: "step 2 (chop) failed 3 times in a row; replan 1 of 3"},
			{do: "replan", state: predicted(0)},
			{do: "fail", state: predicted(0), verdict: Retry, step: 0, reason: "1 of 3"},
			{do: "ok", state: predicted(1), verdict: Continue, step: 1},
			{do: "fail", state: predicted(1), verdict: Retry, step: 1, reason: "1 of 3"},
		}},
		{"a success ends the failure streak", TrackerConfig{}, []event{
			{do: "fail", state: r.Start, verdict: Retry, step: 0},
			{do: "fail", state: r.Start, verdict: Retry, step: 0},
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "fail", state: predicted(0), verdict: Retry, step: 1, reason: "1 of 3"},
		}},
		{"failed step whose preconditions are gone", TrackerConfig{}, []event{
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "fail", state: with(predicted(0), "has_axe", false), verdict: Replan, step: -1,
				reason: "step 2 (chop) failed and its preconditions no longer hold: has_axe equals true (is false)"},
		}},
		{"failed but the goal holds", TrackerConfig{}, []event{
			{do: "fail", state: with(r.Start, "cabin", true), verdict: Done, step: -1},
		}},
		{"threshold 1 replans at once", TrackerConfig{FailureThreshold: 1}, []event{
			{do: "fail", state: r.Start, verdict: Replan, step: -1},
		}},
		{"replan limit", TrackerConfig{FailureThreshold: 1, MaxReplans: 1}, []event{
			{do: "fail", state: r.Start, verdict: Replan, step: -1, reason: "replan 1 of 1"},
			{do: "replan", state: r.Start},
			{do: "fail", state: r.Start, verdict: GiveUp, step: -1, reason: "no replans left (1 made)"},
		}},
		{"no replans", TrackerConfig{MaxReplans: -1}, []event{
			{do: "observe", state: with(r.Start, "axe_in_shed", false), verdict: GiveUp, step: -1},
		}},
		{"plan finished, goal not", TrackerConfig{}, []event{
			{do: "ok", state: predicted(0), verdict: Continue, step: 1},
			{do: "ok", state: predicted(1), verdict: Continue, step: 2},
			{do: "ok", state: predicted(2), verdict: Continue, step: 3},
			{do: "ok", state: predicted(3), verdict: Continue, step: 4},
			{do: "ok", state: with(predicted(4), "cabin", false), verdict: Replan, step: -1,
				reason: "the plan is finished but the goal is unsatisfied: cabin equals true (is false)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTracker(d, r, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tt.events {
				var dec Decision
				var err error
				switch e.do {
				case "ok":
					dec, err = tr.Succeeded(e.state)
				case "fail":
					dec, err = tr.Failed(e.state)
				case "observe":
					dec, err = tr.Observe(e.state)
				case "replan":
					again, err := Plan(context.Background(), d, e.state, "build-cabin", Options{})
					if err != nil {
						t.Fatal(err)
					}
					if err := tr.Replanned(again); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if dec.Verdict != e.verdict || dec.Step != e.step || !strings.Contains(dec.Reason, e.reason) {
					t.Fatalf("event %d: got %s step %d %q, want %s step %d %q", i, dec.Verdict, dec.Step, dec.Reason, e.verdict, e.step, e.reason)
				}
			}
		})
	}
}

func TestTrackerNoStep(t *testing.T) {
	d, r := cabinPlan(t)
	tr, _ := NewTracker(d, r, TrackerConfig{FailureThreshold: 1})
	if dec, _ := tr.Failed(r.Start); dec.Verdict != Replan {
		t.Fatalf("got %s, want replan", dec.Verdict)
	}
	// Waiting for a new plan: outcomes are refused.
	if _, err := tr.Succeeded(r.Start); !errors.Is(err, ErrNoStep) {
		t.Errorf("got %v, want ErrNoStep", err)
	}
	if _, err := tr.Observe(r.Start); !errors.Is(err, ErrNoStep) {
		t.Errorf("got %v, want ErrNoStep", err)
	}
	if tr.Failures() != 1 {
		t.Errorf("failures = %d, want 1", tr.Failures())
	}
	other, _ := Plan(context.Background(), d, nil, "stock-wood", Options{})
	if err := tr.Replanned(other); err == nil {
		t.Error("Replanned accepted a plan for another goal")
	}
}

func TestTrackerEmptyPlan(t *testing.T) {
	d := loadExample(t, "woodcutter")
	r, err := Plan(context.Background(), d, State{"cabin": true}, "build-cabin", Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := NewTracker(d, r, TrackerConfig{})
	if dec, err := tr.Observe(r.Start); err != nil || dec.Verdict != Done {
		t.Errorf("got %v %v, want done", dec, err)
	}
}

func TestTrackerStateRoundTrip(t *testing.T) {
	d, r := cabinPlan(t)
	tr, _ := NewTracker(d, r, TrackerConfig{})
	tr.Succeeded(r.Steps[0].State)
	tr.Failed(r.Steps[0].State)
	doc, err := json.Marshal(tr.State())
	if err != nil {
		t.Fatal(err)
	}
	var st TrackerState
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatal(err)
	}
	want := TrackerState{Goal: "build-cabin", Plan: []string{"take-axe", "chop", "chop", "chop", "build-cabin"}, Next: 1, ConsecutiveFailures: 1, Failures: 1}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	again, err := RestoreTracker(d, st, TrackerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// The streak survives: two more failures reach the threshold.
	again.Failed(r.Steps[0].State)
	if dec, _ := again.Failed(r.Steps[0].State); dec.Verdict != Replan {
		t.Errorf("got %s, want replan after 3 failures in a row", dec.Verdict)
	}
	for _, bad := range []TrackerState{
		{Goal: "nope"},
		{Goal: "build-cabin", Plan: []string{"fly"}},
		{Goal: "build-cabin", Plan: []string{"chop"}, Next: 2},
	} {
		if _, err := RestoreTracker(d, bad, TrackerConfig{}); err == nil {
			t.Errorf("RestoreTracker(%+v) succeeded", bad)
		}
	}
	if _, err := NewTracker(d, r, TrackerConfig{FailureThreshold: -1}); err == nil || !strings.Contains(err.Error(), "TrackerConfig.FailureThreshold") {
		t.Errorf("got %v, want an error naming TrackerConfig.FailureThreshold", err)
	}
}

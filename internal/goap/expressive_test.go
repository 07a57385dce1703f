package goap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Preconditions with or, derived facts and a goal without conditions in
// the tracker and the arbiter
// (testdata/domains/farmer.goap.json; the planner's scenarios are golden
// files, see golden_test.go).

func loadFarmer(t testing.TB) *Domain {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", "domains", "farmer.goap.json"))
	if err != nil {
		t.Fatal(err)
	}
	return mustDecode(t, string(doc))
}

func TestTrackerExpressive(t *testing.T) {
	d := loadFarmer(t)
	plan := func(goal string, s State) *Result {
		t.Helper()
		r, err := Plan(context.Background(), d, s, goal, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("a derived precondition broken by the world", func(t *testing.T) {
		r := plan("write-signs", nil) // ... make-sticks, chop, process-wood, craft-sign, write-sign
		tr, _ := NewTracker(d, r, TrackerConfig{})
		for i := range 5 {
			if dec, err := tr.Succeeded(r.Steps[i].State); err != nil || dec.Verdict != Continue {
				t.Fatalf("step %d: %v %v", i+1, dec, err)
			}
		}
		// Someone takes the planks: craft-sign's derived precondition fails.
		dec, err := tr.Observe(with(r.Steps[4].State, "planks", 2))
		if err != nil {
			t.Fatal(err)
		}
		if want := "step 6 (craft-sign) would not apply: canCraftSign equals true (is false)"; dec.Verdict != Replan || !strings.Contains(dec.Reason, want) {
			t.Errorf("got %s %q, want replan with %q", dec.Verdict, dec.Reason, want)
		}
	})
	t.Run("a requires broken by the world", func(t *testing.T) {
		r := plan("write-signs", nil)
		tr, _ := NewTracker(d, r, TrackerConfig{})
		for i := range 6 {
			tr.Succeeded(r.Steps[i].State)
		}
		dec, err := tr.Observe(with(r.Steps[5].State, "has_sign", false))
		if err != nil {
			t.Fatal(err)
		}
		if want := "step 7 (write-sign) would not apply: requires has_sign && pending_signs > 0 (is false)"; dec.Verdict != Replan || !strings.Contains(dec.Reason, want) {
			t.Errorf("got %s %q, want replan with %q", dec.Verdict, dec.Reason, want)
		}
	})
	t.Run("an or precondition still met another way", func(t *testing.T) {
		r := plan("get-hoe", State{"logs": 2}) // craft-hoe through logs >= 2
		tr, _ := NewTracker(d, r, TrackerConfig{})
		// The logs are gone but planks came: the requires still holds.
		if dec, err := tr.Observe(State{"logs": 0, "planks": 4}); err != nil || dec.Verdict != Continue {
			t.Errorf("got %v %v, want continue", dec, err)
		}
		if dec, err := tr.Observe(State{"logs": 1, "planks": 3, "sticks": 1}); err != nil || dec.Verdict != Replan {
			t.Errorf("got %v %v, want replan: no branch of the or holds", dec, err)
		}
	})
	t.Run("a goal without conditions is done when its plan ran", func(t *testing.T) {
		r := plan("explore", nil)
		tr, _ := NewTracker(d, r, TrackerConfig{})
		if dec, err := tr.Observe(r.Start); err != nil || dec.Verdict != Continue || dec.Step != 0 {
			t.Fatalf("before the step: got %v %v, want continue with step 0", dec, err)
		}
		if dec, err := tr.Succeeded(r.Steps[0].State); err != nil || dec.Verdict != Done {
			t.Errorf("after the step: got %v %v, want done", dec, err)
		}
	})
	t.Run("an empty plan for a goal without conditions", func(t *testing.T) {
		tr, err := RestoreTracker(d, TrackerState{Goal: "explore"}, TrackerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if dec, err := tr.Observe(State{}); err != nil || dec.Verdict != Replan {
			t.Errorf("got %v %v, want replan", dec, err)
		}
	})
}

func TestArbiterExpressive(t *testing.T) {
	d := loadFarmer(t)
	a, _ := NewArbiter(d, ArbiterConfig{})
	t0 := time.Unix(0, 0)
	report, err := a.Report(State{"pending_signs": 0, "idle_ticks": 10, "logs": 1}, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]GoalStatus{}
	for _, st := range report {
		got[st.Goal] = st
	}
	// explore has no conditions: never satisfied, so eligible.
	if st := got["explore"]; st.Satisfied || !st.Eligible || st.Utility != 10 {
		t.Errorf("explore: %+v, want eligible, unsatisfied, utility 10", st)
	}
	// get-hoe is valid while not busy (a derived fact).
	if st := got["get-hoe"]; !st.Valid || !st.Eligible {
		t.Errorf("get-hoe: %+v, want valid and eligible", st)
	}
	// stock-wood's condition and utility read materials (logs * 4 + planks).
	if st := got["stock-wood"]; st.Satisfied || st.Utility != 30 {
		t.Errorf("stock-wood: %+v, want unsatisfied with utility 30", st)
	}
	if sel, _ := a.Select(State{"pending_signs": 0, "logs": 3, "has_hoe": true}, t0); sel.Goal != "explore" {
		t.Errorf("with a hoe, 12 planks of wood and nothing else to do: got %s (%s), want explore", sel.Goal, sel.Detail)
	}
	a.Clear()
	if sel, _ := a.Select(State{"drops": 2}, t0); sel.Goal != "write-signs" {
		t.Errorf("got %s (%s), want write-signs (200)", sel.Goal, sel.Detail)
	}
	report, _ = a.Report(State{"drops": 2}, t0)
	for _, st := range report {
		if st.Goal == "get-hoe" && (st.Valid || st.Eligible) {
			t.Errorf("get-hoe while busy: %+v, want not valid", st)
		}
	}
}

func TestExpressiveErrors(t *testing.T) {
	d := mustDecode(t, `{"name": "d", "facts": {"n": 0, "s": {"type": "string"}},
		"derived": {"size": "len(s)"},
		"actions": [
			{"name": "a", "requires": "len(s) > 0", "effects": {"n": 1}},
			{"name": "b", "effects": {"n": 2}}
		],
		"goals": [{"name": "one", "conditions": {"n": 1}}, {"name": "big", "conditions": {"size": {"gt": 3}}}]}`)
	ctx := context.Background()
	_, err := Plan(ctx, d, State{"s": "x"}, "one", Options{})
	if err != nil {
		t.Fatalf("with s set: %v", err)
	}
	for _, tt := range []struct {
		goal  string
		state State
		want  string
	}{
		{"one", State{}, "goap: derived fact size: "},
		{"big", State{}, "goap: derived fact size: "},
	} {
		_, err := Plan(ctx, d, tt.state, tt.goal, Options{})
		if !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("goal %s in %v: got %v, want an ErrEval containing %q", tt.goal, tt.state, err, tt.want)
		}
	}
	// Without the derived fact, a requires that fails names its action.
	d2 := mustDecode(t, `{"name": "d", "facts": {"n": 0, "s": {"type": "string"}},
		"actions": [{"name": "a", "requires": "len(s) > 0", "effects": {"n": 1}}],
		"goals": [{"name": "one", "conditions": {"n": 1}}]}`)
	if _, err := Plan(ctx, d2, State{}, "one", Options{}); !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "goap: action a: requires: ") {
		t.Errorf("got %v, want an ErrEval naming action a's requires", err)
	}
	a, _ := NewArbiter(d, ArbiterConfig{})
	if _, err := a.Select(State{}, time.Time{}); !errors.Is(err, ErrEval) {
		t.Errorf("arbiter: got %v, want ErrEval", err)
	}
}

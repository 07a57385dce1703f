package generator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/htn"
	"github.com/planbus/planbus/internal/request"
)

const travelDomain = `at(downtown). distance(downtown, park, 5). taxi-to(park).
walking-distance(?u, ?v) :- distance(?u, ?v, ?w), =<(?w, 3).
travel-to(?q) :- if(at(?p), walking-distance(?p, ?q)), do(walk(?p, ?q)).
travel-to(?y) :- if(at(?x), taxi-to(?y)), do(ride(?x, ?y)).
walk(?here, ?there) :- del(at(?here)), add(at(?there)).
ride(?x, ?y) :- del(at(?x)), add(at(?y)).
`

// htnInput is a generation of goal in domain, with workers serving the
// skills named.
func htnInput(domain, goal string, traces bool, skills ...string) Input {
	in := Input{Request: &request.Request{Kind: request.KindHTN, HTN: &request.HTNRequest{Program: domain, Goal: goal, Traces: traces}},
		Skills: map[string]planbus.SkillManifest{}}
	for _, s := range skills {
		in.Skills[s] = planbus.SkillManifest{Name: s}
	}
	return in
}

// A NO_PLAN error says how far the search got, before the operators the
// planner refused.
func TestHTNNoPlanSaysHowFarTheSearchGot(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"condition", htnInput(travelDomain, "travel-to(mall)", false, "walk", "ride"),
			"NO_PLAN: no plan for travel-to(mall): the search got furthest at task travel-to(mall) at depth 1: " +
				"method travel-to(?q) (line 3) failed its condition at walking-distance(downtown,mall) (goal 2 of its if())"},
		{"skill without a worker", htnInput(travelDomain, "travel-to(park)", false, "walk"),
			"NO_PLAN: no plan for travel-to(park): the search got furthest at task ride(downtown,park) at depth 2: " +
				"operator ride is disabled; operators not applied: ride (no worker serves skill ride)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HTN{}.Generate(context.Background(), tc.in)
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("got %v, want a *GenError", err)
			}
			if got := ge.Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// htnSearchOf reads metadata.htn.search of a generated plan.
func htnSearchOf(t *testing.T, in Input) *htnSearch {
	t.Helper()
	p, err := HTN{}.Generate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		HTN struct {
			Search *htnSearch `json:"search"`
		} `json:"htn"`
	}
	if err := json.Unmarshal(p.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	return meta.HTN.Search
}

// htn.traces puts the search into the plan's metadata.
func TestHTNTracesInPlanMetadata(t *testing.T) {
	if got := htnSearchOf(t, htnInput(travelDomain, "travel-to(park)", false, "walk", "ride")); got != nil {
		t.Errorf("search %+v without traces, want none", got)
	}
	want := &htnSearch{Events: []string{
		"[1] task travel-to(park)",
		"[1] method travel-to(?q) (line 3) for travel-to(park): no answer: its condition failed at walking-distance(downtown,park) (goal 2 of its if())",
		"[1] method travel-to(?y) (line 4) for travel-to(park): 1 answer",
		"[2] task ride(downtown,park)",
		"[2] operator ride(downtown,park)",
		"[3] plan 1",
	}}
	got := htnSearchOf(t, htnInput(travelDomain, "travel-to(park)", true, "walk", "ride"))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata.htn.search (-want +got):\n%s", diff)
	}
}

// The trace of a large search is bounded: the first HTNTraceLimit events
// are kept, of at most HTNTraceBytes of text; the rest is counted.
func TestHTNTracesAreBounded(t *testing.T) {
	const domain = "step(0, ?s) :- if(), do().\nstep(?n, ?s) :- if(>(?n, 0)), do(tick(?n, ?s), step(-(?n, 1), ?s)).\ntick(?n, ?s) :- del(), add(ticked(?n)).\n"
	for _, tc := range []struct {
		name, goal string
		events     int // kept
	}{
		{"events", "step(150, s)", HTNTraceLimit},
		{"bytes", "step(150, " + strings.Repeat("s", 200) + ")", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := htnSearchOf(t, htnInput(domain, tc.goal, true, "tick"))
			size := 0
			for _, ev := range got.Events {
				size += len(ev)
			}
			if size > HTNTraceBytes || len(got.Events) > HTNTraceLimit || got.Dropped == 0 || !strings.HasPrefix(got.Events[0], "[1] task step(150,") {
				t.Fatalf("%d events of %d bytes, %d dropped, first %q; want at most %d of %d bytes, some dropped, the first task",
					len(got.Events), size, got.Dropped, got.Events[0], HTNTraceLimit, HTNTraceBytes)
			}
			if tc.events > 0 && len(got.Events) != tc.events {
				t.Errorf("%d events, want %d", len(got.Events), tc.events)
			}
		})
	}
}

// The trace counts against the request's memory budget.
func TestHTNTracesCountAgainstTheMemoryBudget(t *testing.T) {
	domain := "step(0) :- if(), do().\nstep(?n) :- if(>(?n, 0)), do(tick(?n), step(-(?n, 1))).\ntick(?n) :- del(), add(ticked(?n)).\n"
	prog, err := htn.Parse(domain)
	if err != nil {
		t.Fatal(err)
	}
	res, err := prog.Plan(context.Background(), "step(200)", htn.Options{FirstOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	in := htnInput(domain, "step(200)", false, "tick")
	in.Memory = res.Stats.PeakMemory + 1024
	if _, err := (HTN{}).Generate(context.Background(), in); err != nil {
		t.Fatalf("untraced within %d bytes: %v", in.Memory, err)
	}
	in.Request.HTN.Traces = true
	_, err = HTN{}.Generate(context.Background(), in)
	var ge *Error
	if !errors.As(err, &ge) || ge.Code != planbus.CodeHTNMemoryBudget {
		t.Fatalf("traced within %d bytes: got %v, want %s", in.Memory, err, planbus.CodeHTNMemoryBudget)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo"}]}}`))
	f.Add([]byte(`{"kind":"htn","htn":{"program":"a(1).","goal":"a(?x)","facts":["b"]}}`))
	f.Add([]byte(`{"kind":"external","planner":"p.q","input":{"x":[1,2]}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		r, err := request.Decode(doc)
		if err != nil {
			if !errors.Is(err, request.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalidRequest", err)
			}
			return
		}
		if r.Kind == "" || r.SessionID == "" || r.MaxAttempts < 1 {
			t.Fatalf("decoded request without defaults: %+v", r)
		}
		if r.Kind == request.KindHTN {
			// Parsing a fuzzed domain must end, with a program or an error.
			_, _ = HTN{}.Program(r.HTN, nil)
		}
	})
}

package goap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/plan"
)

func TestToPlan(t *testing.T) {
	d, r := cabinPlan(t)
	p, err := ToPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	type tool struct{ ID, Skill, Deps, Input string }
	var got []tool
	for _, tl := range p.Tools {
		deps, _ := json.Marshal(tl.Dependencies)
		got = append(got, tool{tl.ToolID, tl.Skill, string(deps), string(tl.Input)})
	}
	want := []tool{
		{"1-take-axe", "fetch", `[]`, `{"from":"shed","item":"axe"}`},
		{"2-chop", "chop", `["1-take-axe"]`, `{"note":"felling oak #0","tree":"oak"}`},
		{"3-chop", "chop", `["2-chop"]`, `{"note":"felling oak #2","tree":"oak"}`},
		{"4-chop", "chop", `["3-chop"]`, `{"note":"felling oak #4","tree":"oak"}`},
		{"5-build-cabin", "build", `["4-chop"]`, `{"logs":6,"structure":"cabin"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if p.Graph() == nil {
		t.Error("plan was not checked (no graph)")
	}
	var meta struct {
		Goap Metadata `json:"goap"`
	}
	if err := json.Unmarshal(p.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Goap.Domain != d.Name || meta.Goap.Goal != "build-cabin" || meta.Goap.Cost != 12 || len(meta.Goap.Steps) != 5 {
		t.Errorf("metadata %+v", meta.Goap)
	}
	if s := meta.Goap.Steps[4]; s.Tool != "5-build-cabin" || s.Cost != 5 || s.State["cabin"] != true {
		t.Errorf("last step metadata %+v", s)
	}
	if meta.Goap.Start["axe_in_shed"] != true {
		t.Errorf("start %v", meta.Goap.Start)
	}
}

func TestToPlanEmpty(t *testing.T) {
	d := loadExample(t, "woodcutter")
	r, err := Plan(context.Background(), d, State{"cabin": true}, "build-cabin", Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ToPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tools) != 0 {
		t.Errorf("got %d tools for a goal that holds, want 0", len(p.Tools))
	}
}

func TestToPlanRejectsBadResults(t *testing.T) {
	r := &Result{Domain: "d", Goal: "g", Steps: []Step{{Action: "a b", Skill: "a b"}}}
	if _, err := ToPlan(r); err == nil {
		t.Error("ToPlan accepted a step whose skill is not a valid name")
	}
}

// samePlan fails unless got is want: the same fields, unexported ones
// included (the checked graph, which of timeoutMs and retryPolicy the
// document gave), the same inputs and metadata byte for byte, the same
// document.
func samePlan(t *testing.T, what string, want, got *plan.Plan) {
	t.Helper()
	all := cmp.Exporter(func(reflect.Type) bool { return true })
	if diff := cmp.Diff(want, got, all); diff != "" {
		t.Errorf("%s: plan (-want +got):\n%s", what, diff)
	}
	if !bytes.Equal(want.Metadata, got.Metadata) {
		t.Errorf("%s: metadata\n%s\nwant\n%s", what, got.Metadata, want.Metadata)
	}
	for i := range want.Tools {
		if !bytes.Equal(want.Tools[i].Input, got.Tools[i].Input) {
			t.Errorf("%s: tool %d: input %s, want %s", what, i, got.Tools[i].Input, want.Tools[i].Input)
		}
	}
	wdoc, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gdoc, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wdoc, gdoc) {
		t.Errorf("%s: document\n%s\nwant\n%s", what, gdoc, wdoc)
	}
}

// sameOutcome holds ToPlan to toPlanJSON, the plan by way of its
// document: the same plan, or errors with the same message.
func sameOutcome(t *testing.T, what string, r *Result) {
	t.Helper()
	want, werr := toPlanJSON(r)
	got, err := ToPlan(r)
	switch {
	case werr != nil || err != nil:
		if werr == nil || err == nil || !sameError(werr, err) || !errors.Is(err, ErrPlanJSON) {
			t.Errorf("%s: error %v, want %v", what, err, werr)
		}
	default:
		samePlan(t, what, want, got)
	}
}

// sameError reports whether two errors say the same, in any order of
// the schema's findings (which it lists in no fixed order).
func sameError(a, b error) bool {
	parts := func(err error) []string {
		ps := strings.Split(err.Error(), "; ")
		if i := strings.Index(ps[0], "at /"); i > 0 { // the prefix before the first finding
			ps = append(ps, ps[0][:i])
			ps[0] = ps[0][i:]
		}
		return slices.Sorted(slices.Values(ps))
	}
	return slices.Equal(parts(a), parts(b))
}

// TestToPlanDirect holds the plans ToPlan, Solution.ToPlan and PlanJSON
// build to those of the document toPlanJSON writes and plan.Decode reads,
// on every example, reference and test domain.
func TestToPlanDirect(t *testing.T) {
	type problem struct {
		d     *Domain
		goal  string
		state State
		opts  Options
	}
	var problems []problem
	for _, gc := range goldenCases {
		d, opts := goldenProblem(t, gc.example, gc.disabled)
		problems = append(problems, problem{d, gc.goal, gc.state, opts})
	}
	docs := []string{signs, travel, arbiterDomain, workshopDomain(2),
		`{"name":"d","facts":{"x":0},"actions":[{"name":"a","input":{"k":"{x} {{","h":"<a & b>","u":"é\u2028"},"effects":{"x":{"inc":0.1}},"cost":"x*2+0.5"}],"goals":[{"name":"g","conditions":{"x":{"gte":0.3}}}]}`,
		`{"name":"d","facts":{"x":{"type":"string"},"n":{"type":"number"}},"actions":[{"name":"a","input":{"v":"{x}","w":"{n}"},"effects":{"x":"v<&>","n":{"inc":1e21}}},{"name":"b","effects":{"n":{"dec":1e-7}}}],"goals":[{"name":"g","conditions":{"x":{"exists":true},"n":{"gte":1}}}]}`,
		`{"name":"overflow","facts":{"x":0},"actions":[{"name":"a","effects":{"x":{"inc":1e308}}}],"goals":[{"name":"g","conditions":{"x":{"gte":1.7e308}}}]}`,
		// States written from the one before: facts absent at the start
		// that steps make present (the first of them, in the middle, the
		// last), members that grow and shrink, several effects a step.
		`{"name":"grow","facts":{"a":{"type":"string"},"b":true,"m":{"type":"number"},"n":0,"q":{"type":"string"},"z":{"type":"bool"}},"actions":[
			{"name":"one","preconditions":{"b":true},"effects":{"z":true,"a":"<long \" é\u2028>","n":{"inc":1.5}}},
			{"name":"two","preconditions":{"z":true,"n":{"gte":1}},"effects":{"m":{"inc":-3},"a":"","b":false}},
			{"name":"three","preconditions":{"b":false},"effects":{"a":"x","z":false,"n":{"inc":1e21}}}],
			"goals":[{"name":"g","conditions":{"n":{"gte":1e20}}},{"name":"h","conditions":{"m":{"lt":0}}},{"name":"k","conditions":{"a":"x"}}]}`,
	}
	for _, name := range []string{"camp", "release", "woodcutter"} {
		docs = append(docs, exampleDoc(t, name))
	}
	for _, name := range []string{"soldier", "forage", "maze"} {
		doc, err := os.ReadFile(filepath.Join("testdata", "reference", name+".goap.json"))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(doc))
	}
	for _, doc := range docs {
		d, err := Decode([]byte(doc))
		if err != nil {
			continue // a test domain of errors
		}
		for _, g := range d.Goals {
			problems = append(problems, problem{d: d, goal: g.Name})
		}
	}
	ctx := context.Background()
	n := 0
	for _, pr := range problems {
		what := fmt.Sprintf("%s/%s %v", pr.d.Name, pr.goal, pr.state)
		r, err := Plan(ctx, pr.d, pr.state, pr.goal, pr.opts)
		if err != nil {
			if _, err2 := PlanJSON(ctx, pr.d, pr.state, pr.goal, pr.opts); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("%s: PlanJSON error %v, Plan's %v", what, err2, err)
			}
			continue
		}
		n++
		sameOutcome(t, what, r)
		if _, ok := toPlanDirect(r); !ok && pr.d.Name != "overflow" {
			t.Errorf("%s: ToPlan went by way of the document", what)
		}
		want, werr := toPlanJSON(r)
		got, err := PlanJSON(ctx, pr.d, pr.state, pr.goal, pr.opts)
		if werr != nil || err != nil {
			if werr == nil || err == nil || !sameError(werr, err) {
				t.Errorf("%s: PlanJSON error %v, want %v", what, err, werr)
			}
			continue
		}
		samePlan(t, what+" PlanJSON", want, got)
	}
	if n < 20 {
		t.Errorf("only %d plans compared", n)
	}
}

// TestToPlanDirectForeign holds ToPlan to toPlanJSON on results built by
// hand, with what Plan never gives: inputs encoding/json rewrites, state
// values of other types, names a plan does not take.
func TestToPlanDirectForeign(t *testing.T) {
	step := func(action, skill, desc, input string, cost float64, st State) Step {
		var in json.RawMessage
		if input != "" {
			in = json.RawMessage(input)
		}
		return Step{Action: action, Skill: skill, Description: desc, Input: in, Cost: cost, State: st}
	}
	ok := step("a", "a", "do a", `{"k":"v"}`, 1, State{"b": true})
	direct := []string{"plain", "no steps", "nil start", "nil input", "escaped input", "empty desc", "numbers", "other types", "ref input", "bad ref"}
	cases := map[string]*Result{
		"plain":          {Domain: "d", Goal: "g", Start: State{"b": false}, Steps: []Step{ok, ok}, Cost: 2},
		"no steps":       {Domain: "d", Goal: "g", Start: State{}},
		"nil start":      {Domain: "d", Goal: "g", Steps: []Step{ok}, Cost: 1},
		"nil input":      {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", "", 1, nil)}},
		"spaced input":   {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", "{ \"k\" : [1, 2] }", 1, nil)}},
		"html input":     {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", `{"k":"<&>"}`, 1, nil)}},
		"u2028 input":    {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", "{\"k\":\"\u2028\"}", 1, nil)}},
		"escaped input":  {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", `{"k\" ":"\\\" x","u":"\u003c é"}`, 1, nil)}},
		"array input":    {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", `[1]`, 1, nil)}},
		"bad input":      {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", `{"k":}`, 1, nil)}},
		"empty input":    {Domain: "d", Goal: "g", Steps: []Step{{Action: "a", Skill: "a", Input: json.RawMessage{}}}},
		"bad utf8 input": {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", "{\"k\":\"\xff\"}", 1, nil)}},
		"bad skill":      {Domain: "d", Goal: "g", Steps: []Step{step("a b", "a b", "x", "", 1, nil)}},
		"empty desc":     {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "", "", 1, nil)}},
		"bad utf8 desc":  {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "\xff<", "", 1, nil)}},
		"odd names":      {Domain: "d<\xff>", Goal: "g\n\"", Start: State{"é": 1.0, "<": "\u2028\x01", "": "", "\xff": true}, Steps: []Step{ok}},
		"numbers": {Domain: "d", Goal: "g", Cost: 1e21, Start: State{"a": 1e21, "b": 1e-7, "c": math.Copysign(0, -1), "d": 0.1, "e": 123456789.125, "f": -1e-300, "g": 5e-324, "h": 9007199254740991.0, "i": -42.0, "j": 1e15, "k": 9007199254740993.0, "l": -9007199254740992.0},
			Steps: []Step{step("a", "a", "x", "", 1e-7, State{"x": 1e20})}},
		"other types": {Domain: "d", Goal: "g", Start: State{"i": 3, "f32": float32(0.1), "n": json.Number("1.50"), "nil": nil, "m": map[string]any{"z": 1, "a": []any{"<"}}},
			Steps: []Step{ok}},
		"nan state":   {Domain: "d", Goal: "g", Start: State{"x": math.NaN()}},
		"inf cost":    {Domain: "d", Goal: "g", Cost: math.Inf(1)},
		"inf step":    {Domain: "d", Goal: "g", Steps: []Step{step("a", "a", "x", "", math.Inf(-1), nil)}},
		"bad type":    {Domain: "d", Goal: "g", Start: State{"c": make(chan int)}},
		"ref input":   {Domain: "d", Goal: "g", Steps: []Step{ok, step("b", "b", "x", `{"k":{"$ref":"1-a"}}`, 1, nil)}},
		"bad ref":     {Domain: "d", Goal: "g", Steps: []Step{ok, step("b", "b", "x", `{"k":{"$ref":"9-a"}}`, 1, nil)}},
		"long action": {Domain: "d", Goal: "g", Steps: []Step{step(strings.Repeat("a", 127), "a", "x", "", 1, nil)}},
	}
	for name, r := range cases {
		sameOutcome(t, name, r)
		if _, ok := toPlanDirect(r); ok != slices.Contains(direct, name) {
			t.Errorf("%s: direct %v", name, ok)
		}
	}
}

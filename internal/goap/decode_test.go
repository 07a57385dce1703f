package goap

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/safeexpr"
	"github.com/planbus/planbus/schemas"
)

func mustDecode(t testing.TB, doc string) *Domain {
	t.Helper()
	d, err := Decode([]byte(doc))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return d
}

func TestDecode(t *testing.T) {
	d := mustDecode(t, `{
		"name": "d",
		"facts": {"wood": 0, "axe": false, "tree": {"type": "string", "default": "oak"}, "spot": {"type": "string"}},
		"actions": [
			{"name": "chop", "input": {"tree": "{tree}"}, "preconditions": {"axe": true, "wood": {"lt": 10, "gte": 0}}, "effects": {"wood": {"inc": 2}}},
			{"name": "fetch", "skill": "shop", "effects": {"axe": true}, "cost": "wood > 3 ? 2 : 5", "minCost": 2},
			{"name": "free", "effects": {"spot": "here"}, "cost": 0}
		],
		"goals": [
			{"name": "g", "conditions": {"wood": {"gte": 4}}, "utility": "10 - wood", "valid": "axe || wood > 0", "cooldownMs": 250},
			{"name": "h", "conditions": {"spot": {"exists": true}}}
		]
	}`)
	var facts []string
	for _, f := range d.Facts {
		facts = append(facts, f.Name+":"+string(f.Type))
	}
	if diff := cmp.Diff([]string{"axe:bool", "spot:string", "tree:string", "wood:number"}, facts); diff != "" {
		t.Errorf("facts sorted by name (-want +got):\n%s", diff)
	}
	if f, _ := d.Fact("spot"); f.Default != nil {
		t.Errorf("spot default = %v, want nil (may be absent)", f.Default)
	}
	if f, _ := d.Fact("tree"); f.Default != "oak" {
		t.Errorf("tree default = %v, want oak", f.Default)
	}
	chop := d.Action("chop")
	if chop.Skill != "chop" || chop.Cost != 1 || chop.MinCost != 1 {
		t.Errorf("chop: skill %q cost %v minCost %v, want chop 1 1", chop.Skill, chop.Cost, chop.MinCost)
	}
	var pre []string
	for _, c := range chop.Preconditions {
		pre = append(pre, c.String())
	}
	if diff := cmp.Diff([]string{"axe equals true", "wood lt 10", "wood gte 0"}, pre); diff != "" {
		t.Errorf("chop preconditions (-want +got):\n%s", diff)
	}
	if e := chop.Effects[0].String(); e != "wood inc 2" {
		t.Errorf("chop effect = %q, want wood inc 2", e)
	}
	fetch := d.Action("fetch")
	if fetch.Skill != "shop" || fetch.CostExpr != "wood > 3 ? 2 : 5" || fetch.MinCost != 2 || fetch.Cost != 0 {
		t.Errorf("fetch = %+v", fetch)
	}
	if string(d.Action("free").Input) != "{}" {
		t.Errorf("free input = %s, want {}", d.Action("free").Input)
	}
	g := d.Goal("g")
	if g.UtilityExpr != "10 - wood" || g.Valid != "axe || wood > 0" || g.Cooldown != 250*time.Millisecond {
		t.Errorf("goal g = %+v", g)
	}
	if h := d.Goal("h"); h.Utility != 1 || h.Cooldown != DefaultCooldown {
		t.Errorf("goal h utility %v cooldown %v, want 1 and the default", h.Utility, h.Cooldown)
	}
}

func TestDecodeErrors(t *testing.T) {
	const facts = `"facts": {"wood": 0, "axe": false, "tree": "oak", "spot": {"type": "string"}}`
	action := func(a string) string {
		return `{"name": "d", ` + facts + `, "actions": [` + a + `]}`
	}
	goal := func(g string) string {
		return `{"name": "d", ` + facts + `, "actions": [{"name": "a"}], "goals": [` + g + `]}`
	}
	derived := func(members string, actions ...string) string {
		if len(actions) == 0 {
			actions = []string{`{"name": "a"}`}
		}
		return `{"name": "d", ` + facts + `, "derived": {` + members + `}, "actions": [` + strings.Join(actions, ", ") + `]}`
	}
	tests := []struct {
		name, doc string
		path      string // DomainError.Path
		want      string // substring of the message
	}{
		{"not JSON", `{"name":`, "", "malformed JSON"},
		{"no actions", `{"name": "d", ` + facts + `}`, "", "missing property 'actions'"},
		{"bad fact name", `{"name": "d", "facts": {"a/b": 1}, "actions": [{"name": "a"}]}`, "/facts/a~1b", `fact name "a/b": want a letter`},
		{"keyword fact", `{"name": "d", "facts": {"in": 1}, "actions": [{"name": "a"}]}`, "/facts/in", `fact name "in" is an expression keyword`},
		{"null fact", `{"name": "d", "facts": {"x": null}, "actions": [{"name": "a"}]}`, "", "at /facts/x"},
		{"default type", `{"name": "d", "facts": {"x": {"type": "number", "default": "3"}}, "actions": [{"name": "a"}]}`, "/facts/x/default", `fact x is a number, but its default "3" is a string`},
		{"unknown precondition fact", action(`{"name": "a", "preconditions": {"stone": 1}}`), "/actions/0/preconditions/stone", `action a: unknown fact "stone"`},
		{"equals type", action(`{"name": "a", "preconditions": {"axe": 1}}`), "/actions/0/preconditions/axe", "action a: axe equals 1: the fact is a bool"},
		{"lt on string", action(`{"name": "a", "preconditions": {"tree": {"lt": 3}}}`), "/actions/0/preconditions/tree", "lt compares numbers and the fact is a string"},
		{"exists false with default", action(`{"name": "a", "preconditions": {"wood": {"exists": false}}}`), "/actions/0/preconditions/wood", "never holds"},
		{"unknown comparison", action(`{"name": "a", "preconditions": {"wood": {"above": 3}}}`), "", "at /actions/0/preconditions/wood"},
		{"unknown effect fact", action(`{"name": "a", "effects": {"stone": 1}}`), "/actions/0/effects/stone", `action a: unknown fact "stone"`},
		{"set type", action(`{"name": "a", "effects": {"wood": true}}`), "/actions/0/effects/wood", "action a: sets wood to true, but the fact is a number"},
		{"inc on bool", action(`{"name": "a", "effects": {"axe": {"inc": 1}}}`), "/actions/0/effects/axe", "inc on axe: the fact is a bool"},
		{"two effect ops", action(`{"name": "a", "effects": {"wood": {"inc": 1, "dec": 1}}}`), "", "at /actions/0/effects/wood"},
		{"duplicate action", action(`{"name": "a"}, {"name": "a"}`), "/actions/1/name", `duplicate action name "a"`},
		{"bad action name", action(`{"name": "a b"}`), "", "at /actions/0/name"},
		{"negative cost", action(`{"name": "a", "cost": -1}`), "", "at /actions/0/cost"},
		{"cost syntax", action(`{"name": "a", "cost": "wood +"}`), "/actions/0/cost", "action a: cost: unexpected token EOF (1:6)"},
		{"cost unknown name", action(`{"name": "a", "cost": "stone * 2"}`), "/actions/0/cost", "action a: cost: unknown name stone"},
		{"cost not number", action(`{"name": "a", "cost": "tree"}`), "/actions/0/cost", "action a: cost: expected float64, but got string"},
		{"cost repeats", action(`{"name": "a", "cost": "len(repeat(tree, 999999)) > 0 ? 1 : 1"}`), "/actions/0/cost", "repeat is not available in GOAP expressions"},
		{"requires joins", action(`{"name": "a", "requires": "len(join([tree, tree], tree)) > 0"}`), "/actions/0/requires", "join is not available"},
		{"utility maps", goal(`{"name": "g", "conditions": {"axe": true}, "utility": "len(map(1..10, tree)) > 0 ? 1 : 0"}`), "/goals/0/utility", "map is not available"},
		{"derived to JSON", derived(`"j": "toJSON(tree)"`), "/derived/j", "toJSON is not available"},
		{"cost of too many nodes", action(`{"name": "a", "cost": "` + strings.Repeat("1+", MaxExprNodes) + `1"}`), "/actions/0/cost", "exceeds maximum allowed nodes"},
		{"default too long", `{"name": "d", "facts": {"x": "` + strings.Repeat("x", MaxString+1) + `"}, "actions": [{"name": "a"}]}`, "/facts/x", "a fact holds at most 16384"},
		{"reserved fact name", `{"name": "d", "facts": {"` + safeexpr.PlusFunc + `": 1}, "actions": [{"name": "a"}]}`, "/facts/" + safeexpr.PlusFunc, "names beginning with __ are planbus's own"},
		{"cost uses now", action(`{"name": "a", "cost": "now().Unix()"}`), "/actions/0/cost", "now is not available in GOAP expressions"},
		{"minCost with number", action(`{"name": "a", "cost": 2, "minCost": 1}`), "/actions/0/minCost", "minCost applies only to an expression cost"},
		{"template unknown fact", action(`{"name": "a", "input": {"x": ["ok", {"y": "{stone}"}]}}`), "/actions/0/input/x/1/y", "{stone} in \"{stone}\" names no declared fact"},
		{"template unclosed", action(`{"name": "a", "input": {"x": "a {tree"}}`), "/actions/0/input/x", "unclosed {"},
		{"template stray brace", action(`{"name": "a", "input": {"x": "a}"}}`), "/actions/0/input/x", "unmatched }"},
		{"input ref", action(`{"name": "a", "input": {"x": {"$ref": "1-a"}}}`), "/actions/0/input/x", "GOAP actions cannot do"},
		{"input not object", action(`{"name": "a", "input": [1]}`), "", "at /actions/0/input"},
		{"goal unknown fact", goal(`{"name": "g", "conditions": {"stone": 1}}`), "/goals/0/conditions/stone", `goal g: unknown fact "stone"`},
		{"duplicate goal", goal(`{"name": "g", "conditions": {"axe": true}}, {"name": "g", "conditions": {"axe": true}}`), "/goals/1/name", `duplicate goal name "g"`},
		{"utility not number", goal(`{"name": "g", "conditions": {"axe": true}, "utility": "axe"}`), "/goals/0/utility", "goal g: utility: expected float64, but got bool"},
		{"valid not bool", goal(`{"name": "g", "conditions": {"axe": true}, "valid": "wood + 1"}`), "/goals/0/valid", "goal g: valid: expected bool, but got float64"},
		{"negative cooldown", goal(`{"name": "g", "conditions": {"axe": true}, "cooldownMs": -1}`), "", "at /goals/0/cooldownMs"},
		{"derived bad name", derived(`"a/b": "wood"`), "/derived/a~1b", `derived fact name "a/b": want a letter`},
		{"derived keyword", derived(`"not": "wood"`), "/derived/not", `derived fact name "not" is an expression keyword`},
		{"derived named like a fact", derived(`"wood": "axe"`), "/derived/wood", "derived fact wood has the name of a fact"},
		{"derived unknown name", derived(`"x": "stone > 1"`), "/derived/x", "derived fact x: unknown name stone"},
		{"derived reads derived", derived(`"x": "wood * 2", "y": "x + 1"`), "/derived/y", "derived fact y: unknown name x"},
		{"derived type mismatch", derived(`"x": {"expr": "wood", "type": "bool"}`), "/derived/x", "derived fact x: expected bool, but got float64"},
		{"derived not a scalar", derived(`"x": "[wood, 1]"`), "/derived/x", "want a bool, a number or a string, or declare the type"},
		{"derived unknown type", derived(`"x": {"expr": "wood", "type": "list"}`), "", "at /derived/x"},
		{"derived empty", derived(`"x": ""`), "", "at /derived/x"},
		{"effect on derived", derived(`"x": "wood > 2"`, `{"name": "a", "effects": {"x": true}}`), "/actions/0/effects/x", "action a: x is a derived fact; change the facts it reads instead"},
		{"exists on derived", derived(`"x": "wood > 2"`, `{"name": "a", "preconditions": {"x": {"exists": true}}}`), "/actions/0/preconditions/x", "x is a derived fact, which always exists"},
		{"derived condition type", derived(`"x": "wood > 2"`, `{"name": "a", "preconditions": {"x": 3}}`), "/actions/0/preconditions/x", "action a: x equals 3: the fact is a bool"},
		{"derived lt on bool", derived(`"x": "wood > 2"`, `{"name": "a", "preconditions": {"x": {"lt": 3}}}`), "/actions/0/preconditions/x", "lt compares numbers and the fact is a bool"},
		{"derived in template", derived(`"x": "wood > 2"`, `{"name": "a", "input": {"k": "{x}"}}`), "/actions/0/input/k", "names a derived fact"},
		{"requires syntax", action(`{"name": "a", "requires": "wood >"}`), "/actions/0/requires", "action a: requires: unexpected token EOF"},
		{"requires not bool", action(`{"name": "a", "requires": "wood + 1"}`), "/actions/0/requires", "action a: requires: expected bool, but got float64"},
		{"requires unknown name", action(`{"name": "a", "requires": "stone || axe"}`), "/actions/0/requires", "action a: requires: unknown name stone"},
		{"requires empty", action(`{"name": "a", "requires": ""}`), "", "at /actions/0/requires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if err == nil {
				t.Fatalf("got a domain, want an error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidDomain) {
				t.Errorf("error %v does not match ErrInvalidDomain", err)
			}
			var de *DomainError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DomainError", err)
			}
			if de.Path != tt.path {
				t.Errorf("path: got %q, want %q (%v)", de.Path, tt.path, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message spans lines: %q", err.Error())
			}
		})
	}
}

func TestDecodeSchemaErrorsWrapSchemas(t *testing.T) {
	_, err := Decode([]byte(`{"name": "d"}`))
	if !errors.Is(err, schemas.ErrInvalid) || !errors.Is(err, ErrInvalidDomain) {
		t.Fatalf("got %v, want it to match schemas.ErrInvalid and ErrInvalidDomain", err)
	}
}

func TestTemplates(t *testing.T) {
	d := mustDecode(t, `{"name": "d", "facts": {"n": 2.5, "b": true, "s": "oak", "x": {"type": "number"}},
		"actions": [{"name": "a", "input": {
			"whole": "{n}", "bool": "{b}", "str": "{ s }", "absent": "{x}",
			"text": "n={n} b={b} s={s} x=[{x}]", "braces": "{{n}} }}", "plain": 7,
			"deep": [{"k": "{s}-{n}"}], "keep": "no templates here"}}]}`)
	s, err := d.vector(State{})
	if err != nil {
		t.Fatal(err)
	}
	got := string(d.Action("a").render(d, s))
	want := `{"absent":null,"bool":true,"braces":"{n} }","deep":[{"k":"oak-2.5"}],"keep":"no templates here","plain":7,"str":"oak","text":"n=2.5 b=true s=oak x=[]","whole":2.5}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestDecodeExpressive(t *testing.T) {
	d := mustDecode(t, `{"name": "d", "facts": {"wood": 0, "axe": false, "tree": "oak"},
		"derived": {"rich": "wood >= 10", "worth": "wood * 2", "label": "tree + \"-\" + string(wood)",
			"half": {"expr": "wood / 2", "type": "number", "description": "half the wood"}},
		"actions": [{"name": "chop", "requires": "axe || wood > 3", "effects": {"wood": {"inc": 1}}, "cost": "rich ? 1 : 2", "minCost": 1}],
		"goals": [{"name": "explore"}, {"name": "also", "conditions": {}}, {"name": "g", "conditions": {"rich": true, "worth": {"gte": 4}}}]}`)
	var got []string
	for _, df := range d.Derived {
		got = append(got, df.Name+":"+string(df.Type)+":"+df.Expr)
	}
	want := []string{"half:number:wood / 2", "label:string:tree + \"-\" + string(wood)", "rich:bool:wood >= 10", "worth:number:wood * 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("derived facts sorted by name, typed (-want +got):\n%s", diff)
	}
	if d.Derived[0].Description != "half the wood" {
		t.Errorf("half's description = %q", d.Derived[0].Description)
	}
	if _, ok := d.Fact("rich"); ok {
		t.Error("Fact(rich) found a derived fact")
	}
	if r := d.Action("chop").Requires; r != "axe || wood > 3" {
		t.Errorf("chop requires %q", r)
	}
	for _, g := range []string{"explore", "also"} {
		if n := len(d.Goal(g).Conditions); n != 0 {
			t.Errorf("goal %s has %d conditions, want none", g, n)
		}
	}
	var conds []string
	for _, c := range d.Goal("g").Conditions {
		conds = append(conds, c.String())
	}
	if diff := cmp.Diff([]string{"rich equals true", "worth gte 4"}, conds); diff != "" {
		t.Errorf("conditions on derived facts (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		state State
		sat   bool
	}{
		{State{"wood": 9}, false},
		{State{"wood": 10}, true},
	} {
		if ok, err := d.Satisfied("g", tt.state); err != nil || ok != tt.sat {
			t.Errorf("Satisfied(g, %v) = %v, %v; want %v", tt.state, ok, err, tt.sat)
		}
		if ok, _ := d.Satisfied("explore", tt.state); ok {
			t.Errorf("a goal without conditions is satisfied in %v", tt.state)
		}
	}
	if n, _ := d.Normalize(State{"wood": 3}); len(n) != 3 {
		t.Errorf("Normalize gave %v, want the three facts without derived ones", n)
	}
}

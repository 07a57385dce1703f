package goap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary documents to Decode: it must return a domain
// or a *DomainError, never panic, and a domain it returns must plan (or
// fail with a package error) for each of its goals, PlanJSON giving the
// Plan JSON of the plan.
func FuzzDecode(f *testing.F) {
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "goap", "*.json"))
	for _, e := range examples {
		if doc, err := os.ReadFile(e); err == nil {
			f.Add(doc)
		}
	}
	for _, dir := range []string{filepath.Join("testdata", "domains"), filepath.Join("testdata", "reference")} {
		docs, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, e := range docs {
			if doc, err := os.ReadFile(e); err == nil {
				f.Add(doc)
			}
		}
	}
	f.Add([]byte(`{"name":"d","facts":{"x":0,"s":"a"},"derived":{"big":"x > 2","n":{"expr":"x * 2","type":"number"}},"actions":[{"name":"a","requires":"big || s == \"b\"","effects":{"x":{"inc":1}},"cost":"n + 1"}],"goals":[{"name":"g","conditions":{"n":{"gte":8}}},{"name":"e"}]}`))
	f.Add([]byte(signs))
	f.Add([]byte(travel))
	f.Add([]byte(arbiterDomain))
	f.Add([]byte(`{"name":"d","facts":{"x":0},"actions":[{"name":"a","input":{"k":"{x} {{"},"effects":{"x":{"inc":1}},"cost":"x*2"}],"goals":[{"name":"g","conditions":{"x":{"gte":3}}}]}`))
	f.Add([]byte(`{"name":"d","facts":{"x":{"type":"string"}},"actions":[{"name":"a","effects":{"x":"v"}}],"goals":[{"name":"g","conditions":{"x":{"exists":true}},"valid":"x != nil"}]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := Decode(doc)
		if err != nil {
			var de *DomainError
			if !errors.As(err, &de) || !errors.Is(err, ErrInvalidDomain) {
				t.Fatalf("error %T %v is not a *DomainError", err, err)
			}
			return
		}
		for _, g := range d.Goals {
			r, err := Plan(context.Background(), d, nil, g.Name, Options{MaxNodes: 200})
			switch {
			case err == nil:
				if _, err := ToPlan(r); err != nil {
					t.Fatalf("goal %s: ToPlan: %v", g.Name, err)
				}
				// PlanJSON writes the steps' states from one another: it
				// must give the plan of the document.
				want, werr := toPlanJSON(r)
				got, err := PlanJSON(context.Background(), d, nil, g.Name, Options{MaxNodes: 200})
				if (werr == nil) != (err == nil) {
					t.Fatalf("goal %s: PlanJSON error %v, want %v", g.Name, err, werr)
				}
				if err == nil {
					samePlan(t, "goal "+g.Name, want, got)
				}
			case errors.Is(err, ErrUnreachable), errors.Is(err, ErrBudgetExceeded), errors.Is(err, ErrEval):
			default:
				t.Fatalf("goal %s: unexpected error %v", g.Name, err)
			}
		}
	})
}

// FuzzTemplate checks the input template parser on arbitrary strings:
// parsing never panics, and rendering a template that parsed gives valid
// JSON.
func FuzzTemplate(f *testing.F) {
	d := mustDecode(f, `{"name": "d", "facts": {"n": 1.5, "s": "x", "o": {"type": "string"}}, "actions": [{"name": "a"}]}`)
	for _, s := range []string{"", "plain", "{n}", "a {s} b {o}", "{{n}}", "}}{{", "{", "}", "{nope}", "{ n }", "{n}{s}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := d.parseTemplate(s); err != nil {
			return
		}
		a := &Action{input: map[string]any{"k": s}}
		st, _ := d.vector(State{})
		out := a.render(d, st)
		if len(out) == 0 || out[0] != '{' {
			t.Fatalf("render(%q) = %s", s, out)
		}
	})
}

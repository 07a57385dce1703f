package templates

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func FuzzDecode(f *testing.F) {
	if doc, err := os.ReadFile("../../examples/templates/library.json"); err == nil {
		f.Add(doc)
	}
	f.Add(lib(`{"id":"p","name":"P","triggers":["fix bug*"],"vars":{"a":{"default":"x","pattern":"[a-z]"}},"captures":["(?P<a>[a-z])"],
		"steps":[{"id":"s","skill":"echo","input":{"{a}":"{input}","r":{"$ref":"t"}},"verify":{"type":"contains","value":"{a}"}},
		{"id":"t","skill":"echo","after":[],"onFail":{"then":"fallback","step":"f"}}],"fallbacks":[{"id":"f","skill":"echo","onFail":"skip"}]}`))
	f.Add(lib(`{"id":"p","name":"P","steps":[{"id":"a","skill":"echo","after":["b"]},{"id":"b","skill":"echo","after":["a"]}]}`))
	f.Add(lib(`{"id":"p","name":"P","steps":[{"id":"a","skill":"echo","verify":{"type":"expr","expr":"output.x > 1"},"onFail":{"then":"fallback","plan":"q"}}]}`,
		`{"id":"q","name":"Q","domains":["d"],"triggers":["a","b"],"triggerThreshold":2,"steps":[{"id":"a","skill":"echo"}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := Decode(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		for _, tmpl := range l.Plans {
			// With every variable given a value its pattern admits (or its
			// default), the template makes a plan or says why not.
			vars := map[string]string{}
			for name, v := range tmpl.Vars {
				if v.Default == nil {
					vars[name] = "x"
				}
			}
			if _, err := ToPlan(tmpl, vars); err != nil && !errors.Is(err, ErrVars) {
				t.Fatalf("%s: ToPlan error %v does not match ErrVars", tmpl.ID, err)
			}
			// A text holding every trigger matches the template.
			if len(tmpl.Triggers) > 0 {
				text := strings.Join(tmpl.Triggers, " . ")
				found := false
				for _, c := range Match(l, MatchInput{Text: text}) {
					found = found || c.Template == tmpl
				}
				if !found {
					t.Fatalf("%s: not matched by its own triggers %q", tmpl.ID, text)
				}
			}
		}
	})
}

func FuzzParseGate(f *testing.F) {
	f.Add([]byte(`{"type":"matches","path":"/stdout","pattern":"(?m)^ok\\s"}`), []byte(shellOK))
	f.Add([]byte(`{"type":"all","gates":[{"type":"exitCode"},{"type":"httpStatus","value":"2xx","path":"/a/0"}]}`), []byte(`{"exitCode":0,"a":[200]}`))
	f.Add([]byte(`{"type":"expr","expr":"len(output.items) > 0 && text != ''"}`), []byte(`{"items":[1]}`))
	f.Add([]byte(`{"type":"equals","path":"/a~1b","value":{"x":[1,null]}}`), []byte(`{"a/b":{"x":[1,null]}}`))
	f.Add([]byte(`{"verify":{"type":"nonEmpty"},"onFail":"skip"}`), []byte(`""`))
	f.Fuzz(func(t *testing.T, gate, output []byte) {
		_, _ = ParseToolMeta(gate)
		g, err := ParseGate(gate)
		if err != nil {
			if !errors.Is(err, ErrInvalidGate) {
				t.Fatalf("error %v does not match ErrInvalidGate", err)
			}
			return
		}
		ok, why := g.Check(output)
		if ok2, why2 := g.Check(output); ok2 != ok || why2 != why {
			t.Fatalf("Check is not deterministic: %v %q, then %v %q", ok, why, ok2, why2)
		}
		if why == "" || g.String() == "" {
			t.Fatal("a gate must say why and describe itself")
		}
		// A gate survives its JSON round trip, as it does in tool metadata.
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseGate(b)
		if err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if ok3, why3 := back.Check(output); ok3 != ok || why3 != why {
			t.Fatalf("round trip changed the verdict: %v %q, then %v %q", ok, why, ok3, why3)
		}
	})
}

// FuzzGatePathPattern throws arbitrary JSON pointers and regular
// expressions at the gates that take them.
func FuzzGatePathPattern(f *testing.F) {
	f.Add("/stdout", "(?m)^## ", []byte(shellOK))
	f.Add("/a/01", "a{2,}", []byte(`{"a":[1,2]}`))
	f.Add("/~0/~1/", "[[:alpha:]]+", []byte(`{"~":{"/":{"":"x"}}}`))
	f.Add("", `\p{Greek}`, []byte(`"αβγ"`))
	f.Fuzz(func(t *testing.T, path, pattern string, output []byte) {
		for _, g := range []*Gate{
			{Type: GateMatches, Path: path, Pattern: pattern},
			{Type: GateExists, Path: path},
			{Type: GateNonEmpty, Path: path},
			{Type: GateContains, Path: path, Value: pattern},
		} {
			err := g.Compile()
			if err != nil {
				if !errors.Is(err, ErrInvalidGate) {
					t.Fatalf("%+v: error %v does not match ErrInvalidGate", g, err)
				}
				continue
			}
			ok, why := g.Check(output)
			if ok2, why2 := g.Check(output); ok2 != ok || why2 != why {
				t.Fatalf("%+v: Check is not deterministic", g)
			}
		}
	})
}

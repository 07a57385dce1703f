package gate

import (
	"encoding/json"
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"type":"matches","path":"/stdout","pattern":"(?m)^ok\\s"}`), []byte(shellOK))
	f.Add([]byte(`{"type":"all","gates":[{"type":"exitCode"},{"type":"httpStatus","value":"2xx","path":"/a/0"}]}`), []byte(`{"exitCode":0,"a":[200]}`))
	f.Add([]byte(`{"type":"expr","expr":"len(output.items) > 0 && text != ''"}`), []byte(`{"items":[1]}`))
	f.Add([]byte(`{"type":"equals","path":"/a~1b","value":{"x":[1,null]}}`), []byte(`{"a/b":{"x":[1,null]}}`))
	f.Fuzz(func(t *testing.T, gate, output []byte) {
		g, err := Parse(gate)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
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
		// A gate survives its JSON round trip, as it does in a plan tool.
		b, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b)
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
			{Type: Matches, Path: path, Pattern: pattern},
			{Type: Exists, Path: path},
			{Type: NonEmpty, Path: path},
			{Type: Contains, Path: path, Value: pattern},
		} {
			err := g.Compile()
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%+v: error %v does not match ErrInvalid", g, err)
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

package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	tests := []struct {
		doc     string
		pointer string // "" for no error
		name    bool
	}{
		{`{"s":"plain"}`, "", false},
		{`{"s":"\ud83d\ude00 a pair"}`, "", false},
		{`{"s":"\\ud800 an escaped backslash"}`, "", false},
		{`{"s":"\u00e9"}`, "", false},
		{`not json \ud800`, "", false},
		{`{"kind":"plan","plan":{"tools":[{"toolId":"a","skill":"echo","input":{"s":"\ud800"}}]}}`, "/plan/tools/0/input/s", false},
		{`{"a":["x","\uDC00y"]}`, "/a/1", false},
		{`{"a":"\ud83d"}`, "/a", false},
		{`{"a":"\ud83d\u0041"}`, "/a", false},
		{`{"o":{"k\ud800":1}}`, "/o", true},
	}
	for _, tt := range tests {
		err := CheckText([]byte(tt.doc))
		if tt.pointer == "" {
			if err != nil && !strings.HasPrefix(tt.doc, "not json") {
				t.Errorf("%s: %v, want nil", tt.doc, err)
			}
			if strings.HasPrefix(tt.doc, "not json") && err != nil {
				t.Errorf("%s: %v; a document that is not JSON is its decoder's to refuse", tt.doc, err)
			}
			continue
		}
		var te *TextError
		if !errors.As(err, &te) || te.Pointer != tt.pointer || te.Name != tt.name {
			t.Errorf("%s: %#v, want pointer %s, name %v", tt.doc, err, tt.pointer, tt.name)
			continue
		}
		if !strings.Contains(err.Error(), "lone surrogate") {
			t.Errorf("%s: %q does not say what is wrong", tt.doc, err)
		}
	}
}

func FuzzCheckText(f *testing.F) {
	f.Add([]byte(`{"a":"\ud800"}`))
	f.Add([]byte(`{"a\udbff":["\udfff"]}`))
	f.Add([]byte(`["\ud83d\ude00"]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := CheckText(doc)
		var te *TextError
		if err != nil && !errors.As(err, &te) {
			t.Fatalf("%T: %v", err, err)
		}
		if err == nil && json.Valid(doc) {
			// A JSON document it passes decodes with the strict
			// decoder, or is refused for something other than its text.
			var v any
			if e := strict(append([]byte(`{"v":`), append(doc, '}')...), &v); e != nil && strings.Contains(e.Error(), "surrogate") {
				t.Fatalf("CheckText passed %q; the strict decoder refuses it: %v", doc, e)
			}
		}
	})
}

func TestGrouped(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 100_001: "100,001", 4_000_000: "4,000,000", -1234: "-1,234", -999: "-999"} {
		if got := Grouped(n); got != want {
			t.Errorf("Grouped(%d) = %q, want %q", n, got, want)
		}
	}
}

package placeholder

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestNamesAndExpand(t *testing.T) {
	vars := map[string]string{"a": "A", "b_2": "B", "input": "{a}"}
	tests := []struct {
		in, out string
		names   []string
	}{
		{"plain", "plain", nil},
		{"{a}-{b_2}", "A-B", []string{"a", "b_2"}},
		{"{a}{a}", "AA", []string{"a", "a"}},
		{"{{a}}", "{a}", nil},
		{"{{{a}}}", "{A}", []string{"a"}},
		{"awk '{ print $1 }'", "awk '{ print $1 }'", nil},
		{"{2}{ a}{a b}{", "{2}{ a}{a b}{", nil},
		{"}}{input}}", "}{a}}", []string{"input"}}, // values are not expanded again
		{"{missing}", "", []string{"missing"}},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, vars); got != tt.out {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.out)
		}
		if got := Names(tt.in); !slices.Equal(got, tt.names) {
			t.Errorf("Names(%q) = %q, want %q", tt.in, got, tt.names)
		}
	}
}

func decode(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestJSON(t *testing.T) {
	v := decode(t, `{"x/{k}": ["{a}", 1, {"~": "{b}"}], "n": null}`)
	var seen []string
	Strings(v, func(at, s string) { seen = append(seen, at+"="+s) })
	want := []string{"/n (key)=n", "/x~1{k} (key)=x/{k}", "/x~1{k}/0={a}", "/x~1{k}/2/~0 (key)=~", "/x~1{k}/2/~0={b}"}
	if !slices.Equal(seen, want) {
		t.Errorf("Strings visited\n%q\nwant\n%q", seen, want)
	}
	got, err := ExpandJSON(v, map[string]string{"a": "A", "b": "B", "k": "K"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(got)
	if string(out) != `{"n":null,"x/K":["A",1,{"~":"B"}]}` {
		t.Errorf("ExpandJSON = %s", out)
	}
	// Two keys that become one are refused, naming where.
	_, err = ExpandJSON(decode(t, `{"o": {"{a}": 1, "A": 2}}`), map[string]string{"a": "A"})
	if err == nil || !strings.Contains(err.Error(), "at /o:") {
		t.Errorf("colliding keys: err = %v", err)
	}
}

// FuzzExpand checks that Expand and Names agree on any text: expanding
// with each name's value set to a marker yields as many markers as names.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"{a}", "{{a}}", "}}{x}}", "{ a}", "{a_1}{b}", "awk '{ print }'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "\x00") {
			return
		}
		names := Names(s)
		vars := map[string]string{}
		for _, n := range names {
			vars[n] = "\x00"
		}
		if got := strings.Count(Expand(s, vars), "\x00"); got != len(names) {
			t.Fatalf("Expand(%q) has %d markers, Names gives %d", s, got, len(names))
		}
	})
}

package plan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDecodeDefaults(t *testing.T) {
	p, err := Decode([]byte(`{"planId":"p1","tools":[{"toolId":"A","skill":"echo"},
		{"toolId":"B","skill":"echo","dependencies":["A"],"required":false,"retryPolicy":{"maxAttempts":5}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Parallel || p.TimeoutMs != 60000 || p.MaxConcurrency != 0 {
		t.Errorf("plan defaults: parallel=%v timeoutMs=%d maxConcurrency=%d", p.Parallel, p.TimeoutMs, p.MaxConcurrency)
	}
	a, b := p.Tools[0], p.Tools[1]
	want := Tool{ToolID: "A", Skill: "echo", Input: json.RawMessage(`{}`), Dependencies: []string{},
		Required: true, Async: true, TimeoutMs: 30000, RetryPolicy: RetryPolicy{MaxAttempts: 3, BackoffMs: 100}}
	if diff := cmp.Diff(want, a, cmpopts.IgnoreUnexported(Tool{})); diff != "" {
		t.Errorf("tool A (-want +got):\n%s", diff)
	}
	if to, rp := a.Defaults(); !to || !rp {
		t.Errorf("A.Defaults() = %v, %v; want both left to defaults", to, rp)
	}
	if to, rp := b.Defaults(); !to || rp {
		t.Errorf("B.Defaults() = %v, %v; want retryPolicy given", to, rp)
	}
	if b.Required || b.RetryPolicy != (RetryPolicy{MaxAttempts: 5, BackoffMs: 100}) {
		t.Errorf("tool B: required=%v retryPolicy=%+v", b.Required, b.RetryPolicy)
	}
	if got := p.Graph().OrderIDs(); !cmp.Equal(got, []string{"A", "B"}) {
		t.Errorf("order = %v", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown dependency", `{"planId":"p-17","tools":[{"toolId":"A","skill":"s"},{"toolId":"D","skill":"s","dependencies":["X"]}]}`,
			`plan p-17: tool "D" depends on unknown tool "X"`},
		{"cycle", `{"planId":"p","tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A","C"]},{"toolId":"C","skill":"s","dependencies":["B"]}]}`,
			`plan p: cycle: B -> C -> B`},
		{"duplicate", `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"A","skill":"s"}]}`, `plan: tool #1: duplicate toolId "A"`},
		{"self", `{"tools":[{"toolId":"A","skill":"s","dependencies":["A"]}]}`, `plan: tool "A" depends on itself`},
		{"schema", `{"planId":"p9","tools":[{"toolId":"A"}]}`, `plan p9: at /tools/0: missing property 'skill'`},
		{"malformed", `{"planId":`, `plan: malformed JSON`},
		{"ref not a dependency", `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","input":{"x":{"$ref":"A"}}}]}`,
			`plan: tool "B": input at /x references "A", which it does not depend on, directly or through other tools`},
		{"ref bad pointer", `{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"],"input":{"x":{"$ref":"A#x"}}}]}`,
			`must start with '/'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
}

func TestResolveInput(t *testing.T) {
	p, err := Decode([]byte(`{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","required":false},
		{"toolId":"C","skill":"s","dependencies":["A","B"],"input":{
			"whole":{"$ref":"A"},"field":{"$ref":"A#/body/items/1"},"missing":{"$ref":"A#/nope"},
			"failed":{"$ref":"B"},"list":[{"$ref":"A#/n"}],"literal":{"$ref":"A","other":1}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	outputs := func(id string) (json.RawMessage, bool) {
		if id == "A" {
			return json.RawMessage(`{"body":{"items":["x","y"]},"n":7}`), true
		}
		return nil, false
	}
	if p.HasRefs(0) || !p.HasRefs(2) {
		t.Fatalf("HasRefs: A=%v C=%v", p.HasRefs(0), p.HasRefs(2))
	}
	got, err := p.ResolveInput(2, outputs)
	if err != nil {
		t.Fatal(err)
	}
	var gv, wv any
	_ = json.Unmarshal(got, &gv)
	_ = json.Unmarshal([]byte(`{"whole":{"body":{"items":["x","y"]},"n":7},"field":"y","missing":null,
		"failed":null,"list":[7],"literal":{"$ref":"A","other":1}}`), &wv)
	if diff := cmp.Diff(wv, gv); diff != "" {
		t.Errorf("resolved input (-want +got):\n%s", diff)
	}
	if _, err := Decode([]byte(`{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"]},
		{"toolId":"C","skill":"s","dependencies":["B"],"input":{"a":{"$ref":"A"}}}]}`)); err != nil {
		t.Errorf("reference to a transitive dependency: %v", err)
	}
	same, _ := p.ResolveInput(0, outputs)
	if string(same) != "{}" {
		t.Errorf("input without refs changed: %s", same)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"s"},{"toolId":"B","skill":"s","dependencies":["A"],"input":{"x":{"$ref":"A#/y"}}}]}`))
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"s","dependencies":["B"]},{"toolId":"B","skill":"s","dependencies":["A"]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Decode(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		for i := range p.Tools {
			if _, err := p.ResolveInput(i, func(string) (json.RawMessage, bool) { return json.RawMessage(`{"a":[1]}`), true }); err != nil {
				t.Fatalf("resolve %d: %v", i, err)
			}
		}
	})
}

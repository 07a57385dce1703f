package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/planbus/planbus/internal/gate"
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
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"s","timeoutMs":30000,"verify":{"type":"nonEmpty"},"metadata":{"verify":{"type":"exitCode"}},
		"fallback":{"skill":"f","retryPolicy":{"maxAttempts":1},"verify":{"type":"all","gates":[{"type":"exists","path":"/a"}]}}}]}`))
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
		// What Decode accepts, encoded again, decodes to the same plan.
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("%s does not decode again: %v", b, err)
		}
		gates := cmp.Comparer(func(a, b *gate.Gate) bool { return a.String() == b.String() })
		// Inputs and metadata are the same JSON: encoding writes "&", "<"
		// and ">" in strings as \u0026, \u003c and \u003e.
		sameJSON := cmp.Comparer(func(a, b json.RawMessage) bool {
			var va, vb any
			if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
				return string(a) == string(b)
			}
			return cmp.Equal(va, vb)
		})
		if diff := cmp.Diff(p, again, cmpopts.IgnoreUnexported(Plan{}), cmp.AllowUnexported(Tool{}, Fallback{}), gates, sameJSON); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

func TestDecodeGates(t *testing.T) {
	p, err := Decode([]byte(`{"planId":"p","tools":[
		{"toolId":"A","skill":"s","verify":{"type":"contains","path":"/x","value":"yes"},
		 "fallback":{"skill":"f","retryPolicy":{"maxAttempts":1},"verify":{"type":"exitCode"}}},
		{"toolId":"B","skill":"s","metadata":{"verify":{"type":"nonEmpty"},"owner":"me"},
		 "fallback":{"skill":"f","metadata":{"verify":{"type":"equals","path":"/n","value":1}}}},
		{"toolId":"C","skill":"s","verify":{"type":"exitCode"},"metadata":{"verify":{"type":"nonEmpty"}}},
		{"toolId":"D","skill":"s","metadata":{"verify":null}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, attempt int
		want          string // the gate's description, "" for none
	}{
		{0, 1, `/x contains "yes"`},
		{0, 3, `/x contains "yes"`},
		{0, 4, "exit code 0"}, // the fallback's own
		{1, 1, "output is not empty"},
		{1, 4, "/n = 1"}, // from metadata.verify, as plans carried gates before
		{2, 1, "exit code 0"},
		{3, 1, ""},
	}
	for _, tt := range tests {
		tool := &p.Tools[tt.tool]
		g, v := tool.Gate(tt.attempt), tool.Variant(tt.attempt).Verify
		if g != v {
			t.Errorf("%s attempt %d: Gate and Variant disagree", tool.ToolID, tt.attempt)
		}
		got := ""
		if g != nil {
			got = g.String()
		}
		if got != tt.want {
			t.Errorf("%s attempt %d: gate %q, want %q", tool.ToolID, tt.attempt, got, tt.want)
		}
	}
	// Decoded gates are compiled: checking them compiles nothing again.
	if ok, why := p.Tools[0].Verify.Check(json.RawMessage(`{"x":"no"}`)); ok || why != `/x does not contain "yes"` {
		t.Errorf("A's gate: %v %q", ok, why)
	}
}

func TestDecodeGateErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"schema", `{"planId":"p","tools":[{"toolId":"A","skill":"s","verify":{"type":"sometimes"}}]}`,
			`plan p: at /tools/0/verify/type`},
		{"unknown field", `{"planId":"p","tools":[{"toolId":"A","skill":"s","verify":{"type":"nonEmpty","pattrn":"x"}}]}`,
			`plan p: at /tools/0/verify: additional properties 'pattrn' not allowed`},
		{"bad pattern", `{"planId":"p","tools":[{"toolId":"A","skill":"s","verify":{"type":"matches","pattern":"("}}]}`,
			`plan p: tool "A": verify: gate: invalid: pattern: error parsing regexp`},
		{"bad fallback expr", `{"planId":"p","tools":[{"toolId":"A","skill":"s","fallback":{"skill":"f","verify":{"type":"expr","expr":"1 +"}}}]}`,
			`plan p: tool "A": fallback.verify: gate: invalid: expr:`},
		{"bad metadata gate", `{"planId":"p","tools":[{"toolId":"A","skill":"s","metadata":{"verify":{"type":"matches","pattern":"("}}}]}`,
			`plan p: tool "A": metadata.verify: gate: invalid: pattern`},
		{"metadata gate unknown field", `{"planId":"p","tools":[{"toolId":"A","skill":"s","fallback":{"skill":"f","metadata":{"verify":{"type":"exitCode","vaule":0}}}}]}`,
			`plan p: tool "A": fallback.metadata.verify: gate: invalid: json: unknown field "vaule"`},
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

// A plan encoded and decoded again says the same, and what its document
// left to defaults is still left to them: the dispatcher gives those the
// skill manifest's values.
func TestEncodeKeepsWhatWasNotSet(t *testing.T) {
	doc := `{"planId":"p","requestId":"r","sessionId":"s","description":"d","parallel":false,"maxConcurrency":2,"timeoutMs":5000,
		"metadata":{"m":1},"tools":[
		{"toolId":"A","skill":"s"},
		{"toolId":"B","skill":"s","description":"b","input":{"x":{"$ref":"A"}},"dependencies":["A"],"required":false,"async":false,
		 "timeoutMs":30000,"retryPolicy":{"maxAttempts":3,"backoffMs":100},"metadata":{"k":"v"},"verify":{"type":"nonEmpty"},
		 "fallback":{"skill":"f","description":"fb","input":{"y":1},"timeoutMs":10,"retryPolicy":{"maxAttempts":1,"backoffMs":0},
		  "metadata":{"z":true},"verify":{"type":"exitCode","value":3}}},
		{"toolId":"C","skill":"s","timeoutMs":700},
		{"toolId":"D","skill":"s","retryPolicy":{}}]}`
	p, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	gates := cmp.Comparer(func(a, b *gate.Gate) bool { return a.String() == b.String() })
	if diff := cmp.Diff(p, again, cmpopts.IgnoreUnexported(Plan{}), cmp.AllowUnexported(Tool{}, Fallback{}), gates); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	type set struct{ timeout, retry bool }
	want := []set{{false, false}, {true, true}, {true, false}, {false, true}}
	for i, tool := range again.Tools {
		to, rp := tool.Defaults()
		if got := (set{!to, !rp}); got != want[i] {
			t.Errorf("%s: set %+v, want %+v", tool.ToolID, got, want[i])
		}
	}
	var raw struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.Tools[0]["timeoutMs"]; ok {
		t.Errorf("A's default timeoutMs written: %s", b)
	}
	if _, ok := raw.Tools[0]["retryPolicy"]; ok {
		t.Errorf("A's default retryPolicy written: %s", b)
	}
}

// A tool built in Go writes what differs from the defaults, and leaves
// out zeros and defaults (an input of {}, no dependencies, required and
// async true: a plan of 100,000 tools must fit in a message).
func TestEncodeToolBuiltInGo(t *testing.T) {
	tests := []struct {
		tool Tool
		want string
	}{
		{Tool{ToolID: "a", Skill: "s", Input: json.RawMessage(`{}`), Dependencies: []string{}},
			`{"toolId":"a","skill":"s","required":false,"async":false}`},
		{Tool{ToolID: "a", Skill: "s", Input: json.RawMessage(`{}`), Dependencies: []string{}, TimeoutMs: DefaultToolTimeoutMs,
			RetryPolicy: RetryPolicy{MaxAttempts: DefaultMaxAttempts, BackoffMs: DefaultBackoffMs}},
			`{"toolId":"a","skill":"s","required":false,"async":false}`},
		{Tool{ToolID: "a", Skill: "s", Input: json.RawMessage(`{}`), Dependencies: []string{}, TimeoutMs: 5,
			RetryPolicy: RetryPolicy{MaxAttempts: 1}},
			`{"toolId":"a","skill":"s","required":false,"async":false,"timeoutMs":5,"retryPolicy":{"maxAttempts":1,"backoffMs":0}}`},
		{Tool{ToolID: "b", Skill: "s", Input: json.RawMessage(`{"x":1}`), Dependencies: []string{"a"}, Required: true, Async: true},
			`{"toolId":"b","skill":"s","input":{"x":1},"dependencies":["a"]}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.tool)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("got  %s\nwant %s", b, tt.want)
		}
	}
}

// A plan holds up to 100,000 tools: a fan-out of 50,000 with its two end
// tools decodes, one tool more than the limit is refused naming it.
func TestToolLimit(t *testing.T) {
	fanout := func(width int) []byte {
		var b strings.Builder
		b.WriteString(`{"tools":[{"toolId":"s","skill":"noop"}`)
		ids := make([]string, width)
		for i := range width {
			ids[i] = fmt.Sprintf(`"t%d"`, i)
			fmt.Fprintf(&b, `,{"toolId":"t%d","skill":"noop","dependencies":["s"]}`, i)
		}
		fmt.Fprintf(&b, `,{"toolId":"e","skill":"noop","dependencies":[%s]}]}`, strings.Join(ids, ","))
		return []byte(b.String())
	}
	p, err := Decode(fanout(50_000))
	if err != nil {
		t.Fatalf("fan-out of 50,000: %v", err)
	}
	if len(p.Tools) != 50_002 {
		t.Fatalf("%d tools, want 50,002", len(p.Tools))
	}
	_, err = Decode(fanout(99_999)) // 100,001 tools
	if err == nil || !strings.Contains(err.Error(), "at /tools: maxItems: got 100,001, want 100,000") {
		t.Fatalf("100,001 tools: %v, want the limit named", err)
	}
}

// Checking references costs time linear in the plan for plans people and
// planners write, and is bounded for plans built to be costly.
func TestReferenceChecksAreBounded(t *testing.T) {
	chain := func(n, back int, direct bool) []byte {
		var b strings.Builder
		b.WriteString(`{"tools":[{"toolId":"t0","skill":"s"}`)
		for i := 1; i < n; i++ {
			ref := 0
			if back > 0 {
				ref = max(i-back, 0)
			}
			deps := fmt.Sprintf(`"t%d"`, i-1)
			if direct && ref != i-1 {
				deps += fmt.Sprintf(`,"t%d"`, ref)
			}
			fmt.Fprintf(&b, `,{"toolId":"t%d","skill":"s","dependencies":[%s],"input":{"a":{"$ref":"t%d"}}}`, i, deps, ref)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	// Every tool of a 20,000-long chain reads the first one's output.
	if _, err := Decode(chain(20_000, 0, false)); err != nil {
		t.Fatalf("a chain reading its first tool: %v", err)
	}
	// Each tool reads the one 10,000 back, each a different tool: a walk
	// of 10,000 steps per reference, beyond the budget.
	_, err := Decode(chain(20_000, 10_000, false))
	if !errors.Is(err, errReachBudget) || !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), `: input at /a references "t`) ||
		!strings.Contains(err.Error(), "list the tools it references among its dependencies") {
		t.Fatalf("distant references: %v, want the budget named", err)
	}
	// Listing them as dependencies, as the error says, makes it cheap.
	if _, err := Decode(chain(20_000, 10_000, true)); err != nil {
		t.Fatalf("distant references listed as dependencies: %v", err)
	}
	// A reference to a tool that is not upstream is still refused.
	if _, err := Decode([]byte(`{"tools":[{"toolId":"a","skill":"s"},{"toolId":"b","skill":"s","dependencies":["a"]},
		{"toolId":"c","skill":"s","dependencies":["a"],"input":{"x":{"$ref":"b"}}},
		{"toolId":"d","skill":"s","dependencies":["c"],"input":{"x":{"$ref":"b"}}}]}`)); err == nil ||
		!strings.Contains(err.Error(), `tool "c": input at /x references "b", which it does not depend on`) {
		t.Fatalf("sibling reference: %v", err)
	}
}

// The documented maximum, a plan of 100,000 tools, fits in a message of
// the embedded server's max payload (8 MiB) as the planner and the
// dispatchers write it: written with every default it took 9.3 MB and was
// refused.
func TestTheLargestPlanFitsInAMessage(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"planId":"big","tools":[`)
	for i := range maxTools {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"toolId":"t%d","skill":"echo"}`, i)
	}
	b.WriteString(`]}`)
	p, err := Decode([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if limit := 8 << 20; len(out) > limit/2 {
		t.Errorf("a fan-out of %d tools takes %d bytes written; want at most half of %d, leaving room for its request and state", maxTools, len(out), limit)
	}
}

package plan

import (
	"encoding/json"
	"testing"
)

func mustDecode(t *testing.T, doc string) *Plan {
	t.Helper()
	p, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// identities returns a plan's identities by tool id.
func identities(t *testing.T, doc string) map[string]string {
	t.Helper()
	p := mustDecode(t, doc)
	out := map[string]string{}
	for i, id := range p.Identities() {
		out[p.Tools[i].ToolID] = id
	}
	return out
}

const chain = `{"tools":[
	{"toolId":"fetch","skill":"http","input":{"url":"https://example.org","n":1.50}},
	{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/body"},"all":{"$ref":"fetch"}},"dependencies":["fetch"]},
	{"toolId":"store","skill":"remember","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse"]}]}`

// A tool's identity is what it does given what it depends on: ids,
// timeouts, retries, gates, approvals and metadata do not change it; a
// skill, an input (key order aside) or anything upstream does.
func TestIdentities(t *testing.T) {
	base := identities(t, chain)
	if len(base) != 3 || base["fetch"] == base["parse"] || base["parse"] == base["store"] {
		t.Fatalf("identities %v", base)
	}
	same := identities(t, `{"tools":[
		{"toolId":"s3","skill":"remember","input":{"value":{"$ref":"p2"},"key":"k"},"dependencies":["p2"],"timeoutMs":5,"approval":{"prompt":"ok?"}},
		{"toolId":"p2","skill":"echo","input":{"all":{"$ref":"f1"},"body":{"$ref":"f1#/body"}},"dependencies":["f1"],"verify":{"type":"nonEmpty"}},
		{"toolId":"f1","skill":"http","input":{"n":1.50,"url":"https://example.org"},"retryPolicy":{"maxAttempts":9},"metadata":{"x":1}}]}`)
	for old, renamed := range map[string]string{"fetch": "f1", "parse": "p2", "store": "s3"} {
		if base[old] != same[renamed] {
			t.Errorf("tool %s renamed %s, reordered and retimed: identity changed", old, renamed)
		}
	}
	tests := []struct {
		name    string
		doc     string
		changed []string // the tools whose identity must change
		kept    []string // and those whose must not
	}{
		{"a root's input", `{"tools":[
			{"toolId":"fetch","skill":"http","input":{"url":"https://example.com","n":1.50}},
			{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/body"},"all":{"$ref":"fetch"}},"dependencies":["fetch"]},
			{"toolId":"store","skill":"remember","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse"]}]}`,
			[]string{"fetch", "parse", "store"}, nil},
		{"a number written otherwise", `{"tools":[
			{"toolId":"fetch","skill":"http","input":{"url":"https://example.org","n":1.5}},
			{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/body"},"all":{"$ref":"fetch"}},"dependencies":["fetch"]},
			{"toolId":"store","skill":"remember","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse"]}]}`,
			[]string{"fetch", "parse", "store"}, nil},
		{"the last skill", `{"tools":[
			{"toolId":"fetch","skill":"http","input":{"url":"https://example.org","n":1.50}},
			{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/body"},"all":{"$ref":"fetch"}},"dependencies":["fetch"]},
			{"toolId":"store","skill":"remember2","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse"]}]}`,
			[]string{"store"}, []string{"fetch", "parse"}},
		{"a reference's pointer", `{"tools":[
			{"toolId":"fetch","skill":"http","input":{"url":"https://example.org","n":1.50}},
			{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/head"},"all":{"$ref":"fetch"}},"dependencies":["fetch"]},
			{"toolId":"store","skill":"remember","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse"]}]}`,
			[]string{"parse", "store"}, []string{"fetch"}},
		{"a fallback", `{"tools":[
			{"toolId":"fetch","skill":"http","input":{"url":"https://example.org","n":1.50}},
			{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/body"},"all":{"$ref":"fetch"}},"dependencies":["fetch"],"fallback":{"skill":"echo"}},
			{"toolId":"store","skill":"remember","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse"]}]}`,
			[]string{"parse", "store"}, []string{"fetch"}},
		{"one more dependency", `{"tools":[
			{"toolId":"fetch","skill":"http","input":{"url":"https://example.org","n":1.50}},
			{"toolId":"parse","skill":"echo","input":{"body":{"$ref":"fetch#/body"},"all":{"$ref":"fetch"}},"dependencies":["fetch"]},
			{"toolId":"other","skill":"echo"},
			{"toolId":"store","skill":"remember","input":{"key":"k","value":{"$ref":"parse"}},"dependencies":["parse","other"]}]}`,
			[]string{"store"}, []string{"fetch", "parse"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identities(t, tt.doc)
			for _, id := range tt.changed {
				if got[id] == base[id] {
					t.Errorf("tool %s kept its identity", id)
				}
			}
			for _, id := range tt.kept {
				if got[id] != base[id] {
					t.Errorf("tool %s changed identity", id)
				}
			}
		})
	}
}

// Identical tools of one plan get identities of their own, by rank, so
// that each reuses its own counterpart's output.
func TestIdenticalToolsAreToldApart(t *testing.T) {
	const doc = `{"tools":[{"toolId":"a","skill":"echo","input":{"x":1}},{"toolId":"b","skill":"echo","input":{"x":1}},
		{"toolId":"c","skill":"echo","input":{"v":{"$ref":"b"}},"dependencies":["b"]}]}`
	got := identities(t, doc)
	if got["a"] == got["b"] {
		t.Fatalf("two identical tools share identity %s", got["a"])
	}
	again := identities(t, doc)
	for id := range got {
		if got[id] != again[id] {
			t.Errorf("tool %s: identity %s, then %s", id, got[id], again[id])
		}
	}
	if p := (&Plan{}); p.Identities() != nil {
		t.Error("a plan that did not pass Check has identities")
	}
}

// reuse and reuseFrom survive encoding; reuse is written only when false.
func TestEncodeReuseAndApproval(t *testing.T) {
	p := mustDecode(t, `{"tools":[{"toolId":"a","skill":"echo","reuse":false,"approval":{"prompt":"go?"}},
		{"toolId":"b","skill":"echo","reuse":true,"reuseFrom":{"planId":"r-1","toolId":"b","resultSeq":7}}]}`)
	if !p.Tools[0].NoReuse || p.Tools[1].NoReuse || p.Tools[0].Approval == nil || p.Tools[0].Approval.Prompt != "go?" {
		t.Fatalf("decoded %+v %+v", p.Tools[0], p.Tools[1])
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw.Tools[0]["reuse"]) != "false" || raw.Tools[1]["reuse"] != nil {
		t.Errorf("reuse written as %s and %s, want false and nothing", raw.Tools[0]["reuse"], raw.Tools[1]["reuse"])
	}
	again := mustDecode(t, string(data))
	if r := again.Tools[1].ReuseFrom; r == nil || *r != (ReuseRef{PlanID: "r-1", ToolID: "b", ResultSeq: 7}) {
		t.Errorf("reuseFrom %+v after encoding", r)
	}
	if _, err := Decode([]byte(`{"tools":[{"toolId":"a","skill":"echo","approval":{"prompt":""}}]}`)); err == nil {
		t.Error("an empty approval prompt was accepted")
	}
}

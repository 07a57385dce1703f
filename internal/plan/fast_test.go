package plan

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/schemas"
)

// agree checks the fast path against the slow one on doc: what the fast
// path takes, the slow path takes too, as the same plan. It reports
// whether the fast path took it.
func agree(t *testing.T, doc []byte) bool {
	t.Helper()
	fast, ok, _ := decodeFast(doc)
	if !ok {
		return false
	}
	slow, err := decodeSlow(doc)
	if err != nil {
		t.Fatalf("the fast path took a document the schema refuses: %v\n%s", err, doc)
	}
	gates := cmp.Comparer(func(a, b *gate.Gate) bool { return a.String() == b.String() })
	if diff := cmp.Diff(slow, fast, cmpopts.IgnoreUnexported(Plan{}), cmp.AllowUnexported(Tool{}, Fallback{}), gates); diff != "" {
		t.Fatalf("the paths decode differently (-slow +fast):\n%s\n%s", diff, doc)
	}
	return true
}

const fullTool = `{"toolId":"b.step:1","skill":"s-1","description":"d","input":{"x":{"$ref":"a"}, "y" : [1, 2.5]},
"dependencies":["a"],"required":false,"async":false,"timeoutMs":86400000,"retryPolicy":{"maxAttempts":100,"backoffMs":0},
"metadata":{"k":"v"},"verify":{"type":"contains","value":"ok"},"approval":{"prompt":"go?"},"reuse":false,
"reuseFrom":{"planId":"p0","toolId":"b.step:1","resultSeq":7},
"fallback":{"skill":"f","description":"fd","input":{},"timeoutMs":5,"retryPolicy":{"backoffMs":3600000},"metadata":{},
"verify":{"type":"all","gates":[{"type":"exists","path":"/a"}]}}}`

func planWith(tool string) string {
	return `{"planId":"p1","requestId":"r1","sessionId":"s1","description":"x","parallel":false,"maxConcurrency":100000,
"timeoutMs":1,"metadata":{"m":1},"tools":[{"toolId":"a","skill":"s"},` + tool + `]}`
}

// Every field the schema allows goes the fast way and decodes as the slow
// way decodes it.
func TestFastPathTakesValidPlans(t *testing.T) {
	docs := map[string]string{
		"every field":                 planWith(fullTool),
		"bare":                        `{"tools":[{"toolId":"A","skill":"s"}]}`,
		"no tools":                    `{"tools":[]}`,
		"spaces":                      " \n{ \"tools\" : [ { \"toolId\" : \"A\" , \"skill\" : \"s\" , \"input\" : { \"a\" : [ ] } } ] }\n ",
		"escapes":                     `{"tools":[{"toolId":"A","skill":"s","description":"\u00e9\"\\\/\n<&>","input":{"s":"\u0000\ud83d\ude00"}}]}`,
		"escaped key":                 `{"tools":[{"tool\u0049d":"A","skill":"s"}]}`,
		"null, \"\" and n in strings": `{"tools":[{"toolId":"n","skill":"null","description":"null \"\" \\\"\" n","input":{"null":"\"\""}}]}`,
		"long prompt":                 planWith(`{"toolId":"b","skill":"s","approval":{"prompt":"` + strings.Repeat("é", 1024) + `"}}`),
		"fan-out":                     string(fanoutDoc(t, 300)),
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			if !agree(t, []byte(doc)) {
				_, err := decodeSlow([]byte(doc))
				t.Fatalf("the fast path declined a valid plan (slow path: %v)", err)
			}
		})
	}
	// The example plans go the fast way.
	files, err := filepath.Glob("../../examples/plans/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !agree(t, doc) {
			t.Errorf("%s: the fast path declined it", filepath.Base(f))
		}
	}
}

// Documents the fast path must leave to the slow one: invalid under the
// schema, or valid in a way the decoding types cannot see (nulls, empty
// strings) or that encoding/json reads differently (duplicate names,
// invalid UTF-8, numbers written as floats).
func TestFastPathDeclines(t *testing.T) {
	bad := map[string]string{
		"not an object":          `[]`,
		"empty":                  ``,
		"trailing data":          `{"tools":[]} {}`,
		"no tools":               `{"planId":"p"}`,
		"unknown member":         `{"tools":[],"x":1}`,
		"unknown in tool":        `{"tools":[{"toolId":"A","skill":"s","x":1}]}`,
		"unknown in retry":       `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"tries":2}}]}`,
		"unknown in fallback":    `{"tools":[{"toolId":"A","skill":"s","fallback":{"skill":"f","x":1}}]}`,
		"unknown in approval":    `{"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"p","x":1}}]}`,
		"unknown in reuseFrom":   `{"tools":[{"toolId":"A","skill":"s","reuseFrom":{"planId":"p","toolId":"A","resultSeq":1,"x":1}}]}`,
		"name in another case":   `{"tools":[{"ToolId":"A","skill":"s"}]}`,
		"duplicate name":         `{"tools":[{"toolId":"A","toolId":"B","skill":"s"}]}`,
		"invalid UTF-8":          "{\"tools\":[{\"toolId\":\"A\",\"skill\":\"s\",\"description\":\"\xff\"}]}",
		"null":                   `{"tools":[{"toolId":"A","skill":"s","description":null}]}`,
		"null parallel":          `{"parallel":null,"tools":[]}`,
		"null in input":          `{"tools":[{"toolId":"A","skill":"s","input":{"a":null}}]}`,
		"empty description":      `{"tools":[{"toolId":"A","skill":"s","description":""}]}`,
		"empty plan id":          `{"planId":"","tools":[]}`,
		"plan id pattern":        `{"planId":"a.b","tools":[]}`,
		"request id pattern":     `{"requestId":"a b","tools":[]}`,
		"session id too long":    `{"sessionId":"` + strings.Repeat("s", 129) + `","tools":[]}`,
		"tool id pattern":        `{"tools":[{"toolId":"A/B","skill":"s"}]}`,
		"tool id too long":       `{"tools":[{"toolId":"` + strings.Repeat("t", 129) + `","skill":"s"}]}`,
		"skill too long":         `{"tools":[{"toolId":"A","skill":"` + strings.Repeat("s", 65) + `"}]}`,
		"skill missing":          `{"tools":[{"toolId":"A"}]}`,
		"dependency pattern":     `{"tools":[{"toolId":"A","skill":"s","dependencies":["B C"]}]}`,
		"input array":            `{"tools":[{"toolId":"A","skill":"s","input":[]}]}`,
		"input string":           `{"tools":[{"toolId":"A","skill":"s","input":"x"}]}`,
		"metadata array":         `{"metadata":[],"tools":[]}`,
		"tool metadata number":   `{"tools":[{"toolId":"A","skill":"s","metadata":1}]}`,
		"concurrency 0":          `{"maxConcurrency":0,"tools":[]}`,
		"concurrency too many":   `{"maxConcurrency":100001,"tools":[]}`,
		"concurrency float":      `{"maxConcurrency":5.0,"tools":[]}`,
		"concurrency exponent":   `{"maxConcurrency":1e2,"tools":[]}`,
		"timeout 0":              `{"timeoutMs":0,"tools":[]}`,
		"timeout over a day":     `{"tools":[{"toolId":"A","skill":"s","timeoutMs":86400001}]}`,
		"timeout negative":       `{"tools":[{"toolId":"A","skill":"s","timeoutMs":-1}]}`,
		"timeout huge":           `{"timeoutMs":99999999999999999999999,"tools":[]}`,
		"attempts 0":             `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":0}}]}`,
		"attempts 101":           `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":101}}]}`,
		"backoff negative":       `{"tools":[{"toolId":"A","skill":"s","retryPolicy":{"backoffMs":-1}}]}`,
		"backoff over an hour":   `{"tools":[{"toolId":"A","skill":"s","fallback":{"skill":"f","retryPolicy":{"backoffMs":3600001}}}]}`,
		"bool as string":         `{"tools":[{"toolId":"A","skill":"s","required":"false"}]}`,
		"gate type":              `{"tools":[{"toolId":"A","skill":"s","verify":{"type":"sometimes"}}]}`,
		"gate not object":        `{"tools":[{"toolId":"A","skill":"s","verify":"nonEmpty"}]}`,
		"fallback gate":          `{"tools":[{"toolId":"A","skill":"s","fallback":{"skill":"f","verify":{"type":"contains","x":1}}}]}`,
		"fallback skill missing": `{"tools":[{"toolId":"A","skill":"s","fallback":{"input":{}}}]}`,
		"fallback input array":   `{"tools":[{"toolId":"A","skill":"s","fallback":{"skill":"f","input":[]}}]}`,
		"prompt missing":         `{"tools":[{"toolId":"A","skill":"s","approval":{}}]}`,
		"prompt too long":        `{"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"` + strings.Repeat("é", 1025) + `"}}]}`,
		"reuse seq 0":            `{"tools":[{"toolId":"A","skill":"s","reuseFrom":{"planId":"p","toolId":"A","resultSeq":0}}]}`,
		"reuse seq negative":     `{"tools":[{"toolId":"A","skill":"s","reuseFrom":{"planId":"p","toolId":"A","resultSeq":-1}}]}`,
		"reuse plan missing":     `{"tools":[{"toolId":"A","skill":"s","reuseFrom":{"toolId":"A","resultSeq":1}}]}`,
		"tools not array":        `{"tools":{}}`,
		"tool not object":        `{"tools":[1]}`,
	}
	for name, doc := range bad {
		t.Run(name, func(t *testing.T) {
			if agree(t, []byte(doc)) {
				t.Fatalf("the fast path took %s", doc)
			}
		})
	}
}

// Whatever the fast path takes, the schema takes, and both paths decode
// it to the same plan.
func FuzzDecodeFast(f *testing.F) {
	f.Add([]byte(planWith(fullTool)))
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"s","input":{"x":1e2}}]}`))
	f.Add([]byte(`{"maxConcurrency":7,"timeoutMs":9,"tools":[{"toolId":"A","skill":"s","retryPolicy":{"maxAttempts":2}}]}`))
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"s","approval":{"prompt":"é"},"verify":{"type":"expr","expr":"output.ok"}}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		agree(t, doc)
	})
}

// The decoding types have exactly the members the schema allows, object
// by object: the fast path relies on the decoder refusing the others.
func TestDecodingTypesMatchTheSchema(t *testing.T) {
	read := func(name string) map[string]any {
		doc, err := fs.ReadFile(schemas.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	plan, common := read(schemas.Plan), read("common.schema.json")
	// at follows a path of member names from the root of a schema.
	at := func(v map[string]any, path ...string) map[string]any {
		for _, p := range path {
			v, _ = v[p].(map[string]any)
		}
		return v
	}
	tool := at(plan, "$defs", "tool")
	for _, tt := range []struct {
		what   string
		schema map[string]any
		typ    reflect.Type
	}{
		{"plan", plan, reflect.TypeFor[planJSON]()},
		{"tool", tool, reflect.TypeFor[toolJSON]()},
		{"approval", at(tool, "properties", "approval"), reflect.TypeFor[Approval]()},
		{"reuseFrom", at(tool, "properties", "reuseFrom"), reflect.TypeFor[ReuseRef]()},
		{"fallback", at(tool, "properties", "fallback"), reflect.TypeFor[fallbackJSON]()},
		{"retryPolicy", at(common, "$defs", "retryPolicy"), reflect.TypeFor[retryJSON]()},
	} {
		if tt.schema["additionalProperties"] != false {
			t.Errorf("%s: the schema allows other members; the fast path would refuse them", tt.what)
		}
		var want, got []string
		for name := range at(tt.schema, "properties") {
			want = append(want, name)
		}
		for f := range tt.typ.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				got = append(got, name)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if len(want) == 0 || !slices.Equal(want, got) {
			t.Errorf("%s: the schema has members %v, the decoding type %v", tt.what, want, got)
		}
	}
}

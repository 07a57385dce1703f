package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

const tok = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // 43 base64url characters

var validCall = `{"planId":"p1","requestId":"r1","toolId":"build.step:1","skill":"echo","attempt":1,"maxAttempts":3,
"input":{"x":[1,2]},"timeoutMs":30000,"idempotencyKey":"p1/build.step:1/1","releasedAt":"2026-11-26T12:00:00.123Z",
"token":"` + tok + `","cancelDigest":"` + tok + `"}`

var validResult = `{"planId":"p1","requestId":"r1","toolId":"A","skill":"echo","attempt":2,"state":"failed",
"output":null,"error":{"code":"TOOL_FAILED","message":"boom","category":"transient"},"statePatch":{"k":1},
"workerId":"w1","startedAt":"2026-11-26T12:00:00Z","finishedAt":"2026-11-26T12:00:01Z","durationMs":1000.5,
"token":"` + tok + `"}`

func TestValidMessagesDecode(t *testing.T) {
	c, err := DecodeCall([]byte(validCall))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if c.ToolID != "build.step:1" || c.Attempt != 1 || c.TimeoutMs != 30000 || string(c.Input) != `{"x":[1,2]}` {
		t.Fatalf("call decoded as %+v", c)
	}
	r, err := DecodeResult([]byte(validResult))
	if err != nil {
		t.Fatalf("result: %v", err)
	}
	if r.State != "failed" || r.Error == nil || r.Error.Category != "transient" || r.DurationMs != 1000.5 {
		t.Fatalf("result decoded as %+v", r)
	}
	// Both agree with the schemas on the same documents.
	for name, doc := range map[string]string{schemas.ToolCall: validCall, schemas.ToolResult: validResult} {
		if err := schemas.Validate(name, []byte(doc)); err != nil {
			t.Fatalf("%s: the test's valid document is not valid: %v", name, err)
		}
	}
}

// Each broken message is refused with an error naming the field, in the
// schema's words when the schema refuses it too.
func TestInvalidMessagesAreRefusedNamingWhere(t *testing.T) {
	tests := []struct {
		name, doc, want string
		call            bool
	}{
		{"call not JSON", `{"planId":`, "malformed JSON", true},
		{"call array", `[1]`, "want object", true},
		{"call unknown field", strings.Replace(validCall, `"maxAttempts"`, `"extra":1,"maxAttempts"`, 1), "additional properties 'extra'", true},
		{"call plan id", strings.Replace(validCall, `"planId":"p1"`, `"planId":"p.1"`, 1), "at /planId", true},
		{"call tool id", strings.Replace(validCall, `"toolId":"build.step:1"`, `"toolId":""`, 1), "at /toolId", true},
		{"call skill", strings.Replace(validCall, `"skill":"echo"`, `"skill":"a>b"`, 1), "at /skill", true},
		{"call attempt", strings.Replace(validCall, `"attempt":1`, `"attempt":0`, 1), "at /attempt", true},
		{"call input", strings.Replace(validCall, `"input":{"x":[1,2]}`, `"input":[1]`, 1), "at /input", true},
		{"call no input", strings.Replace(validCall, `"input":{"x":[1,2]},`, ``, 1), "missing property 'input'", true},
		{"call timeout", strings.Replace(validCall, `"timeoutMs":30000`, `"timeoutMs":86400001`, 1), "at /timeoutMs", true},
		{"call token", strings.Replace(validCall, `"token":"`+tok, `"token":"`+tok[1:], 1), "at /token", true},
		{"call digest", strings.Replace(validCall, `"cancelDigest":"`+tok, `"cancelDigest":"`+tok[1:]+"=", 1), "at /cancelDigest", true},
		{"call released", strings.Replace(validCall, `"releasedAt":"2026-11-26T12:00:00.123Z"`, `"releasedAt":"yesterday"`, 1), "at /releasedAt", true},
		{"call two values", validCall + ` {}`, "more than one value", true},
		// Names match exactly, as in the schema.
		{"call name case", strings.Replace(validCall, `"planId"`, `"PlanId"`, 1), "missing property 'planId'", true},
		// A second value for a field is not quietly taken over the first.
		{"call duplicate name", strings.Replace(validCall, `"skill":"echo"`, `"skill":"echo","skill":"sleep"`, 1), `duplicate object member name "skill"`, true},
		{"result state", strings.Replace(validResult, `"state":"failed"`, `"state":"done"`, 1), "at /state", false},
		{"result no error", strings.Replace(validResult, `"error":{"code":"TOOL_FAILED","message":"boom","category":"transient"},`, ``, 1), "missing property 'error'", false},
		{"result category", strings.Replace(validResult, `"category":"transient"`, `"category":"odd"`, 1), "at /error/category", false},
		{"result code", strings.Replace(validResult, `"code":"TOOL_FAILED"`, `"code":""`, 1), "at /error/code", false},
		{"result error field", strings.Replace(validResult, `"category":"transient"`, `"category":"transient","stack":"x"`, 1), "additional properties 'stack'", false},
		{"result patch", strings.Replace(validResult, `"statePatch":{"k":1}`, `"statePatch":[1]`, 1), "at /statePatch", false},
		{"result duration", strings.Replace(validResult, `"durationMs":1000.5`, `"durationMs":-1`, 1), "at /durationMs", false},
		{"result no token", strings.Replace(validResult, ",\n\"token\":\""+tok+"\"", ``, 1), "missing property 'token'", false},
		{"result request id", strings.Replace(validResult, `"requestId":"r1"`, `"requestId":"r 1"`, 1), "at /requestId", false},
		{"result misspelt output", strings.Replace(validResult, `"output":null`, `"ouput":1`, 1), "additional properties 'ouput'", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.call {
				_, err = DecodeCall([]byte(tt.doc))
			} else {
				_, err = DecodeResult([]byte(tt.doc))
			}
			if err == nil {
				t.Fatalf("accepted %s", tt.doc)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// agrees checks the package's promise on one document: what it accepts
// is valid under the schema once re-encoded (what the reader goes on to
// use), and what the schema accepts in the form a dispatcher or worker
// writes it, it accepts.
func agrees(t *testing.T, doc []byte) {
	t.Helper()
	if c, err := DecodeCall(doc); err == nil {
		b, _ := json.Marshal(c)
		if err := schemas.Validate(schemas.ToolCall, b); err != nil {
			t.Fatalf("accepted call %s, but as read it is invalid: %v", doc, err)
		}
		if _, err := DecodeCall(b); err != nil {
			t.Fatalf("call %s re-encoded is refused: %v", b, err)
		}
	}
	if r, err := DecodeResult(doc); err == nil {
		b, _ := json.Marshal(r)
		if err := schemas.Validate(schemas.ToolResult, b); err != nil {
			t.Fatalf("accepted result %s, but as read it is invalid: %v", doc, err)
		}
		if _, err := DecodeResult(b); err != nil {
			t.Fatalf("result %s re-encoded is refused: %v", b, err)
		}
	}
}

// Mutations of valid messages, each one field's value replaced by a value
// from a pool of near-misses, must never be accepted unless valid as read.
func TestAgreesWithSchemaOnMutations(t *testing.T) {
	values := []any{nil, "", "x", "p.1", "a b", tok, tok + "A", strings.Repeat("a", 129), strings.Repeat("a", 128),
		0, 1, -1, 1.5, 86400000, 86400001, true, []any{}, []any{1}, map[string]any{}, map[string]any{"k": nil},
		"succeeded", "failed", "timeout", "running", "2026-11-26T12:00:00Z", "2026-13-01T00:00:00Z",
		map[string]any{"code": "X", "message": "m", "category": "network"}, map[string]any{"code": "X", "category": "network"},
		map[string]any{"code": "", "message": "m", "category": "network"}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, base := range []string{validCall, validResult} {
		var m map[string]any
		if err := json.Unmarshal([]byte(base), &m); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		for range 4000 {
			mut := make(map[string]any, len(m))
			for k, v := range m {
				mut[k] = v
			}
			for range 1 + rng.IntN(2) {
				k := keys[rng.IntN(len(keys))]
				switch rng.IntN(4) {
				case 0:
					delete(mut, k)
				default:
					mut[k] = values[rng.IntN(len(values))]
				}
			}
			doc, _ := json.Marshal(mut)
			agrees(t, doc)
			// What the schema accepts, the fast path accepts too.
			if base == validCall && schemas.Validate(schemas.ToolCall, doc) == nil {
				if _, err := DecodeCall(doc); err != nil && !numberForm(mut) {
					t.Fatalf("schema-valid call %s refused: %v", doc, err)
				}
			}
			if base == validResult && schemas.Validate(schemas.ToolResult, doc) == nil {
				if _, err := DecodeResult(doc); err != nil && !numberForm(mut) {
					t.Fatalf("schema-valid result %s refused: %v", doc, err)
				}
			}
		}
	}
}

// numberForm reports a message the schema accepts but the fast path may
// refuse: an integer field written as a float such as 1.0 (nothing in
// planbus writes one) or a null timestamp.
func numberForm(m map[string]any) bool {
	for _, k := range []string{"attempt", "maxAttempts", "timeoutMs"} {
		if f, ok := m[k].(float64); ok && f != float64(int64(f)) {
			return true
		}
	}
	return false
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(validCall))
	f.Add([]byte(validResult))
	f.Add([]byte(`{"planId":"p","requestId":"r","toolId":"t","skill":"s","attempt":1,"state":"succeeded","token":"` + tok + `"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		agrees(t, doc)
	})
}

// BenchmarkStrictDecode decodes a tool call with strict (the JSON v2
// decoder) and with encoding/json's Decoder as strict did before (the
// baseline), alternating rounds of 200 in the same process, and reports
// the median ns of each and their ratio.
func BenchmarkStrictDecode(b *testing.B) {
	data := []byte(validCall)
	v1 := func() {
		var c planbus.ToolCall
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			b.Fatal(err)
		}
	}
	v2 := func() {
		var c planbus.ToolCall
		if err := strict(data, &c); err != nil {
			b.Fatal(err)
		}
	}
	mb, mc := alternate(b, v1, v2)
	b.ReportMetric(mb, "ns-baseline/call")
	b.ReportMetric(mc, "ns-strict/call")
	b.ReportMetric(mb/mc, "x-faster")
}

// alternate times rounds of 200 runs of baseline and of current, one
// after the other until the benchmark's loop ends, and returns the median
// ns a run of each.
func alternate(b *testing.B, baseline, current func()) (base, cur float64) {
	const round = 200
	var bs, cs []float64
	timeRound := func(f func()) float64 {
		start := time.Now()
		for range round {
			f()
		}
		return float64(time.Since(start).Nanoseconds()) / round
	}
	for b.Loop() {
		bs = append(bs, timeRound(baseline))
		cs = append(cs, timeRound(current))
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	return median(bs), median(cs)
}

// IsSkill is the schema's skill pattern: a name, optionally in a
// namespace (NAME.TOOL), each part 1 to 64 of [A-Za-z0-9_-].
func FuzzIsSkillIsThePattern(f *testing.F) {
	for _, s := range []string{"echo", "demo.echo", "demo.", ".echo", "a.b.c", "demo..x", strings.Repeat("a", 64) + "." + strings.Repeat("b", 64),
		strings.Repeat("a", 65), "sp ace", "ü", "x.y-z_1", ""} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^([A-Za-z0-9_-]{1,64}\.)?[A-Za-z0-9_-]{1,64}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsSkill(s), re.MatchString(s); got != want {
			t.Fatalf("IsSkill(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestValidatePlan(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // substring of the error; empty = valid
	}{
		{"minimal", `{"tools":[{"toolId":"A","skill":"echo"}]}`, ""},
		{"full", `{"planId":"p1","requestId":"r1","parallel":true,"maxConcurrency":4,"timeoutMs":1000,
			"tools":[{"toolId":"A","skill":"echo","input":{"x":1},"dependencies":[],"required":true,"async":true,
			"timeoutMs":500,"retryPolicy":{"maxAttempts":2,"backoffMs":10}}],"metadata":{"k":"v"}}`, ""},
		{"missing skill", `{"tools":[{"toolId":"A"}]}`, "at /tools/0: missing property 'skill'"},
		{"typo field", `{"tools":[{"toolId":"A","skill":"echo","dependecies":[]}]}`, "at /tools/0: additional properties 'dependecies' not allowed"},
		{"bad skill name", `{"tools":[{"toolId":"A","skill":"a.b.c"}]}`, "at /tools/0/skill:"},
		{"bad plan id", `{"planId":"p 1","tools":[]}`, "at /planId:"},
		{"zero attempts", `{"tools":[{"toolId":"A","skill":"echo","retryPolicy":{"maxAttempts":0}}]}`, "at /tools/0/retryPolicy/maxAttempts: minimum"},
		{"input not object", `{"tools":[{"toolId":"A","skill":"echo","input":[1]}]}`, "at /tools/0/input: got array, want object"},
		{"not JSON", `{"tools": [}`, "malformed JSON: line 1, column 12"},
		{"two values", `{"tools":[]} {}`, "more than one value"},
		{"empty", ``, "malformed JSON: empty document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(Plan, []byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got valid, want error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err.Error(), tt.want)
			}
		})
	}
}

func TestToolResultNeedsErrorWhenFailed(t *testing.T) {
	doc := `{"planId":"p","requestId":"r","toolId":"A","skill":"echo","attempt":1,"state":"failed"}`
	err := Validate(ToolResult, []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "missing property 'error'") {
		t.Fatalf("got %v, want missing error", err)
	}
}

func TestAllSchemasCompile(t *testing.T) {
	for _, n := range []string{Plan, ToolCall, ToolResult, ExecutionResult, Event, SkillManifest, PlanRequest, Outcome, Cancel, CancelRequest, ListRequest, ApproveRequest} {
		if _, err := schema(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func FuzzValidatePlan(f *testing.F) {
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"echo"}]}`))
	f.Add([]byte(`{"tools":[{"toolId":"A","skill":"echo","input":{"$ref":"B"}}]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := Validate(Plan, doc)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v does not match ErrInvalid", err)
		}
	})
}

// Results must echo their call's token; a worker that does not, or that
// sends something else in its place, is refused at the schema.
func TestToolResultNeedsItsToken(t *testing.T) {
	const base = `{"planId":"p","requestId":"r","toolId":"A","skill":"echo","attempt":1,"state":"succeeded"`
	tests := []struct {
		name, doc, want string
	}{
		{"no token", base + `}`, "missing property 'token'"},
		{"too short", base + `,"token":"abc"}`, "at /token: "},
		{"not base64url", base + `,"token":"` + strings.Repeat("+", 43) + `"}`, "at /token: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(ToolResult, []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := Validate(ToolResult, []byte(base+`,"token":"`+strings.Repeat("A", 43)+`"}`)); err != nil {
		t.Errorf("a result with a token: %v", err)
	}
}

// decode reads every document as encoding/json alone would: the same
// value when it reads one, the same error when it does not.
func FuzzDecodeAsEncodingJSON(f *testing.F) {
	for _, doc := range []string{`{"tools":[{"toolId":"A","skill":"echo","input":{"x":1.5e3,"y":[true,null,"\u00e9"]}}]}`,
		`{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":1} {}`, `[1, 2`, ``, ` 17 `, `{"n":123456789012345678901234567890}`} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, gotErr := decode(Plan, doc)
		var want any
		dec := json.NewDecoder(bytes.NewReader(doc))
		wantErr := dec.Decode(&want)
		if wantErr == nil {
			if _, err := dec.Token(); err == nil {
				wantErr = errors.New("more than one value")
			}
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decode error %v, encoding/json's %v", doc, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %#v, encoding/json %#v", doc, got, want)
		}
	})
}

// Duplicate names and invalid UTF-8, which the fast decoder refuses, are
// read as encoding/json reads them: the last duplicate wins.
func TestDecodeTakesWhatEncodingJSONTakes(t *testing.T) {
	v, err := decode(Plan, []byte(`{"a":1,"a":2}`))
	if err != nil || v.(map[string]any)["a"] != 2.0 {
		t.Fatalf("duplicate names: %v, %v; want a = 2", v, err)
	}
	v, err = decode(Plan, []byte("{\"a\":\"\xff\"}"))
	if err != nil || v.(map[string]any)["a"] != "\ufffd" {
		t.Fatalf("invalid UTF-8: %v, %v; want the replacement character", v, err)
	}
}

// A definition with a name of its own validates as a schema does.
func TestGateDefinition(t *testing.T) {
	if err := Validate(Gate, []byte(`{"type":"contains","value":"ok"}`)); err != nil {
		t.Errorf("a contains gate: %v", err)
	}
	for _, doc := range []string{`{"type":"sometimes"}`, `{"value":"ok"}`, `[]`, `{"type":"contains","extra":1}`} {
		if err := Validate(Gate, []byte(doc)); err == nil {
			t.Errorf("%s validated as a gate", doc)
		}
	}
}

// A manifest may carry an output schema, a JSON Schema object like its
// input schema.
func TestSkillManifestOutputSchema(t *testing.T) {
	tests := []struct {
		doc, want string // want: substring of the error; empty = valid
	}{
		{`{"name":"count","inputSchema":{"type":"object"},"outputSchema":{"type":"object","required":["words"]}}`, ""},
		{`{"name":"count","outputSchema":{}}`, ""},
		{`{"name":"count","outputSchema":true}`, "at /outputSchema: got boolean, want object"},
		{`{"name":"count","outputschema":{}}`, "additional properties 'outputschema'"},
	}
	for _, tt := range tests {
		err := Validate(SkillManifest, []byte(tt.doc))
		if tt.want == "" && err != nil {
			t.Errorf("%s: %v, want valid", tt.doc, err)
		}
		if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want an error containing %q", tt.doc, err, tt.want)
		}
	}
}

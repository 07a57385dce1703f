package skill_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/skill"
)

type address struct {
	Street string `json:"street"`
	City   string `json:"city"`
	Zip    string `json:"zip,omitempty"`
}

type order struct {
	Customer string            `json:"customer" jsonschema:"who orders"`
	Quantity int               `json:"quantity"`
	Ship     address           `json:"ship"`
	Bill     *address          `json:"bill,omitempty"`
	Note     *string           `json:"note"`
	Items    []string          `json:"items"`
	Tags     map[string]string `json:"tags,omitempty"`
	Due      time.Time         `json:"due,omitzero"`
	Wait     time.Duration     `json:"wait,omitempty"`
	Blob     []byte            `json:"blob,omitempty"`
	Extra    json.RawMessage   `json:"extra,omitempty"`
	Internal string            `json:"-"`
}

type receipt struct {
	ID    string   `json:"id"`
	Total float64  `json:"total"`
	Lines []string `json:"lines"`
	Code  *int     `json:"code,omitempty"`
}

func placeOrder(_ context.Context, o order) (receipt, error) {
	return receipt{ID: "r-" + o.Customer, Total: float64(o.Quantity) * 2.5, Lines: o.Items}, nil
}

// schemaOf decodes a derived schema.
func schemaOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return m
}

func TestFuncDerivesTheSchemas(t *testing.T) {
	s := skill.Func("order", "Places an order.", placeOrder)
	if s.Manifest.Name != "order" || s.Manifest.Description != "Places an order." {
		t.Errorf("manifest %+v, want the name and description given", s.Manifest)
	}
	in := schemaOf(t, s.Manifest.InputSchema)
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"customer": map[string]any{"type": "string", "description": "who orders"},
			"quantity": map[string]any{"type": "integer"},
			"ship": map[string]any{"type": "object", "additionalProperties": false,
				"properties": map[string]any{"street": map[string]any{"type": "string"}, "city": map[string]any{"type": "string"}, "zip": map[string]any{"type": "string"}},
				"required":   []any{"street", "city"}},
			"bill": map[string]any{"type": []any{"null", "object"}, "additionalProperties": false,
				"properties": map[string]any{"street": map[string]any{"type": "string"}, "city": map[string]any{"type": "string"}, "zip": map[string]any{"type": "string"}},
				"required":   []any{"street", "city"}},
			"note":  map[string]any{"type": []any{"null", "string"}},
			"items": map[string]any{"type": []any{"null", "array"}, "items": map[string]any{"type": "string"}},
			"tags":  map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"due":   map[string]any{"type": "string", "format": "date-time"},
			"wait":  map[string]any{"type": "integer"},
			"blob":  map[string]any{"type": []any{"null", "string"}, "contentEncoding": "base64"},
			"extra": true,
		},
		"required":             []any{"customer", "quantity", "ship", "note", "items"},
		"additionalProperties": false,
	}
	if d := cmp.Diff(want, in); d != "" {
		t.Errorf("input schema (-want +got):\n%s\n%s", d, s.Manifest.InputSchema)
	}
	out := schemaOf(t, s.Manifest.OutputSchema)
	if got := out["required"]; !cmp.Equal(got, []any{"id", "total", "lines"}) {
		t.Errorf("output schema requires %v, want id, total and lines (code is omitempty)", got)
	}
}

// A derived manifest is one a worker accepts: valid under the manifest
// schema, with schemas that compile.
func TestFuncManifestIsValid(t *testing.T) {
	for _, s := range []skill.Skill{
		skill.Func("order", "", placeOrder),
		skill.Func("anything", "", func(context.Context, any) (any, error) { return nil, nil }),
		skill.Func("raw", "", func(context.Context, map[string]json.RawMessage) (json.RawMessage, error) { return nil, nil }),
		skill.Func("ptr", "", func(context.Context, *order) (*receipt, error) { return nil, nil }),
	} {
		b, err := json.Marshal(s.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas.Validate(schemas.SkillManifest, b); err != nil {
			t.Errorf("%s: manifest %s: %v", s.Manifest.Name, b, err)
		}
		if _, err := skill.InputSchema(s.Manifest); err != nil {
			t.Errorf("%s: %v", s.Manifest.Name, err)
		}
		if _, err := skill.OutputSchema(s.Manifest); err != nil {
			t.Errorf("%s: %v", s.Manifest.Name, err)
		}
	}
}

// The derived input schema, as the worker checks it, takes what the
// handler decodes and refuses what it should.
func TestFuncInputSchemaChecksInputs(t *testing.T) {
	s := skill.Func("order", "", placeOrder)
	check, err := skill.InputSchema(s.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	h := check(s.Handler)
	const ship = `"ship":{"street":"1 Main St","city":"Springfield"}`
	tests := []struct {
		name, input string
		place       string // where the error says the input is wrong; empty: valid
	}{
		{"required only", `{"customer":"ann","quantity":2,` + ship + `,"note":null,"items":["a","b"]}`, ""},
		{"optional too", `{"customer":"ann","quantity":2,` + ship + `,"note":"gift","items":null,
			"bill":{"street":"2 Elm St","city":"Shelbyville","zip":"12345"},"tags":{"k":"v"},
			"due":"2026-11-29T10:00:00Z","wait":1500000000,"blob":"aGk=","extra":[1,{"x":2}]}`, ""},
		{"wrong type", `{"customer":"ann","quantity":"2",` + ship + `,"note":null,"items":[]}`, "at /quantity"},
		{"wrong type nested", `{"customer":"ann","quantity":2,"ship":{"street":1,"city":"x"},"note":null,"items":[]}`, "at /ship/street"},
		{"wrong item type", `{"customer":"ann","quantity":2,` + ship + `,"note":null,"items":[1]}`, "at /items/0"},
		{"missing required", `{"customer":"ann",` + ship + `,"note":null,"items":[]}`, "missing property 'quantity'"},
		{"missing required nested", `{"customer":"ann","quantity":2,"ship":{"street":"x"},"note":null,"items":[]}`, "at /ship: missing property 'city'"},
		{"missing pointer", `{"customer":"ann","quantity":2,` + ship + `,"items":[]}`, "missing property 'note'"},
		{"unknown member", `{"customer":"ann","quantity":2,` + ship + `,"note":null,"items":[],"colour":"red"}`, "additional properties 'colour'"},
		{"ignored field", `{"customer":"ann","quantity":2,` + ship + `,"note":null,"items":[],"Internal":"x"}`, "additional properties 'Internal'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.Handle(context.Background(), newCall("order", tt.input))
			if tt.place == "" {
				if err != nil {
					t.Fatalf("valid input refused: %v", err)
				}
				if !strings.Contains(string(res.Output), `"id":"r-ann"`) {
					t.Errorf("output %s, want the receipt", res.Output)
				}
				return
			}
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, "skill order: input", tt.place)
		})
	}
}

func TestFuncDecodesTheInput(t *testing.T) {
	var got order
	s := skill.Func("order", "", func(_ context.Context, o order) (receipt, error) {
		got = o
		return receipt{ID: "r1", Lines: []string{}}, nil
	})
	res, err := s.Handler.Handle(context.Background(), newCall("order", `{"customer":"ann","quantity":3,
		"ship":{"street":"1 Main St","city":"Springfield"},"bill":{"street":"2 Elm St","city":"Shelbyville"},
		"note":"gift","items":["a"],"due":"2026-11-29T10:00:00Z","wait":1500000000,"blob":"aGk=","extra":{"x":[1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"r1","total":0,"lines":[]}`; string(res.Output) != want {
		t.Errorf("output %s, want %s", res.Output, want)
	}
	note := "gift"
	want := order{Customer: "ann", Quantity: 3, Ship: address{Street: "1 Main St", City: "Springfield"},
		Bill: &address{Street: "2 Elm St", City: "Shelbyville"}, Note: &note, Items: []string{"a"},
		Due: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Wait: 1500 * time.Millisecond,
		Blob: []byte("hi"), Extra: json.RawMessage(`{"x":[1]}`)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("decoded input (-want +got):\n%s", d)
	}
}

// What the handler refuses to decode is INVALID_INPUT, and fn does not
// run, whether or not the worker's schema check ran first.
func TestFuncRefusesInputThatDoesNotDecode(t *testing.T) {
	ran := false
	s := skill.Func("order", "", func(context.Context, order) (receipt, error) {
		ran = true
		return receipt{}, nil
	})
	for _, input := range []string{`{"quantity":"3"}`, `{"Customer":"ann"}`, `{"wait":"1s"}`, `[1]`, `{`} {
		_, err := s.Handler.Handle(context.Background(), newCall("order", input))
		wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
		wantMessage(t, err, "skill order: input")
	}
	if ran {
		t.Error("fn ran on input that does not decode")
	}
}

func TestFuncPassesErrorsThrough(t *testing.T) {
	plain := errors.New("disk on fire")
	for _, want := range []error{
		skill.Permanent("NO_SUCH_USER", "no user ann"),
		skill.Transient("BUSY", "try later"),
		skill.Network("DOWN", "unreachable"),
		skill.InvalidInput("quantity above the stock"),
		plain,
		context.DeadlineExceeded,
	} {
		s := skill.Func("order", "", func(context.Context, order) (receipt, error) {
			return receipt{ID: "ignored"}, want
		})
		res, err := s.Handler.Handle(context.Background(), newCall("order", `{}`))
		if err != want {
			t.Errorf("error %v, want %v unchanged", err, want)
		}
		if res.Output != nil {
			t.Errorf("output %s with an error, want none", res.Output)
		}
	}
}

func TestFuncOutputThatCannotBeEncoded(t *testing.T) {
	s := skill.Func("nan", "", func(context.Context, struct{}) (float64, error) { return math.NaN(), nil })
	_, err := s.Handler.Handle(context.Background(), newCall("nan", `{}`))
	wantError(t, err, planbus.CategoryInternal, "OUTPUT_NOT_JSON")
	wantMessage(t, err, "skill nan: output")
}

// What a Func handler encodes passes its derived output schema, nil
// slices, maps and pointers included.
func TestFuncOutputKeepsItsSchema(t *testing.T) {
	type out struct {
		List  []int          `json:"list"`
		Map   map[string]int `json:"map"`
		Ptr   *address       `json:"ptr"`
		Empty string         `json:"empty,omitempty"`
		Wait  time.Duration  `json:"wait"`
		When  time.Time      `json:"when"`
		Text  string         `json:"text"`
	}
	for _, o := range []out{{}, {List: []int{1}, Map: map[string]int{"a": 1}, Ptr: &address{Street: "s", City: "c"}, Wait: time.Second, Text: "bad \xff byte"}} {
		s := skill.Func("out", "", func(context.Context, struct{}) (out, error) { return o, nil })
		check, err := skill.OutputSchema(s.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		res, err := check(s.Handler).Handle(context.Background(), newCall("out", `{}`))
		if err != nil {
			t.Errorf("output of %+v refused: %v (%s)", o, err, res.Output)
		}
	}
}

func TestFuncPanicsOnTypesWithoutASchema(t *testing.T) {
	tests := []struct {
		name, msg string
		mk        func()
	}{
		{"input not an object", `input type string: a call's input is a JSON object`,
			func() { skill.Func("s", "", func(context.Context, string) (int, error) { return 0, nil }) }},
		{"input slice", `input type []int`,
			func() { skill.Func("s", "", func(context.Context, []int) (int, error) { return 0, nil }) }},
		{"input map with int keys", `input type map[int]string`,
			func() { skill.Func("s", "", func(context.Context, map[int]string) (int, error) { return 0, nil }) }},
		{"input with a channel", `input type struct { C chan int }`,
			func() {
				skill.Func("s", "", func(context.Context, struct{ C chan int }) (int, error) { return 0, nil })
			}},
		{"output func", `output type func()`,
			func() { skill.Func("s", "", func(context.Context, struct{}) (func(), error) { return nil, nil }) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, `skill.Func("s"): `+tt.msg) {
					t.Errorf("panic %v, want one saying %q", r, tt.msg)
				}
			}()
			tt.mk()
		})
	}
}

// The derived schemas list properties in the fields' order, so manifests
// are the same bytes from one run to the next (a worker compares them).
func TestFuncSchemasAreStable(t *testing.T) {
	a := skill.Func("order", "", placeOrder).Manifest
	b := skill.Func("order", "", placeOrder).Manifest
	if !slices.Equal(a.InputSchema, b.InputSchema) || !slices.Equal(a.OutputSchema, b.OutputSchema) {
		t.Errorf("two derivations differ:\n%s\n%s", a.InputSchema, b.InputSchema)
	}
	if i, j := strings.Index(string(a.InputSchema), `"customer"`), strings.Index(string(a.InputSchema), `"quantity"`); i < 0 || j < i {
		t.Errorf("properties not in field order: %s", a.InputSchema)
	}
}

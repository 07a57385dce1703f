package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/planbus/planbus"
)

// Func returns a skill named name that runs fn: its handler decodes each
// call's input into an In as DecodeInput does (an input that does not
// decode is an INVALID_INPUT error naming the member; a time.Duration is
// a number of nanoseconds, as in encoding/json), calls fn, and reports the
// Out it returns, encoded as JSON, as the call's output. An error from fn is returned as
// it is, so a Permanent, Transient, Network or InvalidInput error keeps
// its code and category. An Out that cannot be encoded (a NaN, say) fails
// the call with OUTPUT_NOT_JSON, category internal. Strings that are not
// valid UTF-8 are encoded with U+FFFD in place of the bad bytes.
//
// The manifest's InputSchema is derived from In and its OutputSchema from
// Out by github.com/google/jsonschema-go (the generator of the MCP Go SDK),
// so the worker refuses, before fn runs, an input that breaks the schema,
// and fails an attempt whose output breaks it (OUTPUT_INVALID). The
// derived schemas follow encoding/json's view of the types:
//
//   - A struct is an object of its exported fields, named by their json
//     tags (a field without one by its Go name; "-" leaves it out), that
//     allows no other members (DecodeInput refuses them too).
//   - A field tagged omitempty or omitzero is optional; every other field
//     is required. Tag so every field a plan may leave out: the planner
//     refuses a plan whose literal input lacks a required field, and the
//     worker a call whose input does once its references are resolved,
//     rather than hand fn a zero value the caller never chose. A pointer
//     field without omitempty is required, and may be null.
//   - A slice or a pointer may be null; a map with string keys is an
//     object; time.Time is a string of format date-time (RFC 3339);
//     []byte a base64 string; json.RawMessage and interface types any
//     value.
//   - A field's jsonschema tag is its description:
//     `json:"text" jsonschema:"the text to count the words of"`.
//
// A call's input is always a JSON object, so In must be a struct, a map
// with string keys, an interface type or a pointer to one of them. Func
// panics when In is not, or when In or Out has no JSON Schema (a channel,
// a func, a complex number, a map with other keys, a type that contains
// itself): like regexp.MustCompile, it is called with types fixed when the
// program is written.
//
// The returned Skill's manifest has the name, description and the two
// schemas; set its other fields (Version, TimeoutMs, RetryPolicy,
// Parameters...) before serving it, or tighten a schema (a maximum, a
// pattern) by replacing it with a stricter one. A handler that patches the session state is written as a
// Handler.
func Func[In, Out any](name, description string, fn func(context.Context, In) (Out, error)) Skill {
	in := reflect.TypeFor[In]()
	if !objectType(in) {
		panic(fmt.Sprintf("skill.Func(%q): input type %v: a call's input is a JSON object; want a struct, a map with string keys, an interface type or a pointer to one of them", name, in))
	}
	inSchema, err := schemaFor(in)
	if err != nil {
		panic(fmt.Sprintf("skill.Func(%q): input type %v: %v", name, in, err))
	}
	outSchema, err := schemaFor(reflect.TypeFor[Out]())
	if err != nil {
		panic(fmt.Sprintf("skill.Func(%q): output type %v: %v", name, reflect.TypeFor[Out](), err))
	}
	return Skill{
		Manifest: Manifest{Name: name, Description: description, InputSchema: inSchema, OutputSchema: outSchema},
		Handler: HandlerFunc(func(ctx context.Context, call *Call) (Result, error) {
			var v In
			if err := decodeInput(call, &v, durationsAsNumbers); err != nil {
				return Result{}, err
			}
			out, err := fn(ctx, v)
			if err != nil {
				return Result{}, err
			}
			b, err := jsonv2.Marshal(out, durationsAsNumbers, jsontext.AllowInvalidUTF8(true))
			if err != nil {
				return Result{}, Failf(planbus.CodeOutputNotJSON, planbus.CategoryInternal, "skill %s: output: %v", call.Skill, err)
			}
			return Result{Output: b}, nil
		}),
	}
}

// durationsAsNumbers has a time.Duration read and written as a number of
// nanoseconds, as encoding/json does and the derived schemas say (JSON v2
// has no default for it and refuses one).
var durationsAsNumbers = jsonv2.JoinOptions(
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, d time.Duration) error {
		return enc.WriteToken(jsontext.Int(int64(d)))
	})),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, d *time.Duration) error {
		var n int64
		if err := jsonv2.UnmarshalDecode(dec, &n); err != nil {
			return err
		}
		*d = time.Duration(n)
		return nil
	})),
)

// objectType tells whether values of t can be decoded from a JSON object.
func objectType(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Interface:
		return true
	case reflect.Map:
		return t.Key().Kind() == reflect.String
	}
	return false
}

// typeSchemas are the schemas of the types jsonschema-go would describe
// otherwise than they are encoded: []byte and json.RawMessage as arrays
// of integers. time.Time gains its format.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[[]byte]():          {Types: []string{"null", "string"}, ContentEncoding: "base64"},
	reflect.TypeFor[time.Time]():       {Type: "string", Format: "date-time"},
}

// schemaFor derives the JSON Schema of t. A schema that allows any value
// is written {}, not true: a manifest's schemas are JSON objects.
func schemaFor(t reflect.Type) (json.RawMessage, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if string(b) == "true" {
		b = []byte("{}")
	}
	return b, nil
}

package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// The schema names, as files in this directory.
const (
	Plan            = "plan.schema.json"
	ToolCall        = "tool-call.schema.json"
	ToolResult      = "tool-result.schema.json"
	ExecutionResult = "execution-result.schema.json"
	Event           = "event.schema.json"
	SkillManifest   = "skill-manifest.schema.json"
	PlanRequest     = "plan-request.schema.json"
	Outcome         = "outcome.schema.json"
	Cancel          = "cancel.schema.json"
	CancelRequest   = "cancel-request.schema.json"
	ListRequest     = "list-request.schema.json"
	// The agent endpoints' requests, and the status they answer with.
	AgentStopRequest   = "agent-stop-request.schema.json"
	AgentStatusRequest = "agent-status-request.schema.json"
	AgentStatus        = "agent-status.schema.json"
	// ApproveRequest is the body of planbus.plan.approve.
	ApproveRequest = "approve-request.schema.json"

	// Gate is a definition within a file: a verification gate, as a
	// plan's tools and fallbacks carry them.
	Gate = "common.schema.json#/$defs/gate"
)

// defs are the definitions within files that have names of their own.
var defs = []string{Gate}

const baseURL = "https://planbus.dev/schemas/"

//go:embed *.schema.json
var files embed.FS

// FS returns the schema files.
func FS() fs.FS { return files }

// ErrInvalid is matched by every error Validate returns.
var ErrInvalid = errors.New("invalid document")

// Error says where a document breaks its schema, or that it is not JSON.
type Error struct {
	Schema string   // schema name, e.g. "plan.schema.json"
	Issues []string // each "at <JSON pointer>: <what is wrong>", or a syntax error
}

func (e *Error) Error() string { return strings.Join(e.Issues, "; ") }

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *Error) Unwrap() error { return ErrInvalid }

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

func compileAll() {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		compileErr = err
		return
	}
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			compileErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			compileErr = fmt.Errorf("schemas: %s: %w", e.Name(), err)
			return
		}
		if err := c.AddResource(baseURL+e.Name(), doc); err != nil {
			compileErr = fmt.Errorf("schemas: %s: %w", e.Name(), err)
			return
		}
	}
	compiled = make(map[string]*jsonschema.Schema)
	for _, e := range entries {
		s, err := c.Compile(baseURL + e.Name())
		if err != nil {
			compileErr = fmt.Errorf("schemas: %s: %w", e.Name(), err)
			return
		}
		compiled[e.Name()] = s
	}
	for _, name := range defs {
		s, err := c.Compile(baseURL + name)
		if err != nil {
			compileErr = fmt.Errorf("schemas: %s: %w", name, err)
			return
		}
		compiled[name] = s
	}
}

func schema(name string) (*jsonschema.Schema, error) {
	compileOnce.Do(compileAll)
	if compileErr != nil {
		return nil, compileErr
	}
	s, ok := compiled[name]
	if !ok {
		return nil, fmt.Errorf("schemas: no schema %q", name)
	}
	return s, nil
}

// Validate checks that doc is one JSON value that satisfies the named
// schema. It returns an *Error naming every place that does not, or a
// syntax error with its line and column.
func Validate(name string, doc []byte) error {
	s, err := schema(name)
	if err != nil {
		return err
	}
	v, err := decode(name, doc)
	if err != nil {
		return err
	}
	return validate(name, s, v)
}

// decode reads one JSON value. Numbers become float64: exact for every
// integer the schemas bound (ids, counts, milliseconds), and far cheaper for
// the validator to compare than json.Number.
//
// The JSON v2 decoder reads a well-formed document several times faster;
// one it refuses (a syntax error, also duplicate names or invalid UTF-8,
// which encoding/json takes) is read again by encoding/json, which names
// the error as users have seen it and otherwise reads it as it always has.
func decode(name string, doc []byte) (any, error) {
	var v any
	if jsonv2.Unmarshal(doc, &v) == nil {
		return v, nil
	}
	v = nil
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Schema: name, Issues: []string{syntaxMessage(doc, err)}}
	}
	if _, err := dec.Token(); err == nil {
		return nil, &Error{Schema: name, Issues: []string{fmt.Sprintf("malformed JSON: %s: more than one value", position(doc, dec.InputOffset()))}}
	}
	return v, nil
}

// ValidateValue checks a decoded value (as produced by encoding/json with
// UseNumber, or built of maps, slices and basic types) against the schema.
func ValidateValue(name string, v any) error {
	s, err := schema(name)
	if err != nil {
		return err
	}
	return validate(name, s, v)
}

func validate(name string, s *jsonschema.Schema, v any) error {
	err := s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Schema: name, Issues: []string{err.Error()}}
	}
	var issues []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			issues = append(issues, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return &Error{Schema: name, Issues: issues}
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		tok = strings.ReplaceAll(tok, "~", "~0")
		b.WriteString(strings.ReplaceAll(tok, "/", "~1"))
	}
	return b.String()
}

func syntaxMessage(doc []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the offending one included.
		return fmt.Sprintf("malformed JSON: %s: %s", position(doc, max(se.Offset-1, 0)), se.Error())
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("malformed JSON: %s: %s", position(doc, te.Offset), te.Error())
	}
	if errors.Is(err, io.EOF) {
		return "malformed JSON: empty document"
	}
	return "malformed JSON: " + err.Error()
}

// position turns a byte offset into "line L, column C" (1-based).
func position(doc []byte, off int64) string {
	if off > int64(len(doc)) {
		off = int64(len(doc))
	}
	line, col := 1, 1
	for _, c := range doc[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}

// Validator checks documents against one schema given at run time, such as
// a skill manifest's input schema.
type Validator struct {
	name   string
	schema *jsonschema.Schema
}

// Compile compiles a JSON Schema document; name identifies it in errors.
func Compile(name string, doc []byte) (*Validator, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := baseURL + "inline/" + name + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", name, err)
	}
	return &Validator{name: name, schema: s}, nil
}

// Validate checks one JSON document, reporting errors as Validate does.
func (v *Validator) Validate(doc []byte) error {
	x, err := decode(v.name, doc)
	if err != nil {
		return err
	}
	return validate(v.name, v.schema, x)
}

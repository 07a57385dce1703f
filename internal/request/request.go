package request

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/schemas"
)

// Request kinds.
const (
	KindPlan     = "plan"
	KindExternal = "external"
	KindHTN      = "htn"
	KindGOAP     = "goap"
	KindTemplate = "template"
	KindLLM      = "llm"
)

// DefaultMaxAttempts is a request's maxAttempts when it gives none (kind
// plan: 1): the plan generations before the loop ends with the fallback.
const DefaultMaxAttempts = 5

// Request is a plan request (schemas/plan-request.schema.json).
type Request struct {
	RequestID    string           `json:"requestId,omitempty"`
	SessionID    string           `json:"sessionId,omitempty"`
	Kind         string           `json:"kind"`
	Input        json.RawMessage  `json:"input,omitempty"`
	MaxAttempts  int              `json:"maxAttempts,omitempty"`
	Plan         json.RawMessage  `json:"plan,omitempty"`
	Planner      string           `json:"planner,omitempty"`
	HTN          *HTNRequest      `json:"htn,omitempty"`
	GOAP         *GOAPRequest     `json:"goap,omitempty"`
	Template     *TemplateRequest `json:"template,omitempty"`
	LLM          *LLMRequest      `json:"llm,omitempty"`
	PlanDefaults *PlanDefaults    `json:"planDefaults,omitempty"`
	Metadata     json.RawMessage  `json:"metadata,omitempty"`
	// Reuse false makes every replan run all its tools again; by default
	// a tool identical to one that succeeded in an earlier attempt reuses
	// its result (see reuse.go).
	Reuse *bool `json:"reuse,omitempty"`
}

// HTNRequest names a domain, a goal and extra facts.
type HTNRequest struct {
	Domain  string   `json:"domain,omitempty"`
	Program string   `json:"program,omitempty"`
	Goal    string   `json:"goal"`
	Facts   []string `json:"facts,omitempty"`
	// Budget lowers the planner's limits for this request's generations.
	Budget *Budget `json:"budget,omitempty"`
	// Traces records each generation's search (htn.Options.Trace): the
	// plan's metadata.htn.search lists it, at most HTNTraceLimit events
	// and HTNTraceBytes of text, and it counts against the memory budget.
	Traces bool `json:"traces,omitempty"`
}

// GOAPRequest names a GOAP domain, optionally a goal, and facts.
type GOAPRequest struct {
	Domain string          `json:"domain,omitempty"`
	Inline json.RawMessage `json:"inline,omitempty"`
	Goal   string          `json:"goal,omitempty"`
	State  map[string]any  `json:"state,omitempty"`
	// Budget lowers the planner's limits for this request's generations.
	Budget *Budget `json:"budget,omitempty"`
	// Agent starts the session's GOAP agent instead of planning once
	// (internal/agent).
	Agent bool `json:"agent,omitempty"`
}

// TemplateRequest names a template or gives text to match.
type TemplateRequest struct {
	ID       string            `json:"id,omitempty"`
	Domain   string            `json:"domain,omitempty"`
	Text     string            `json:"text,omitempty"`
	Vars     map[string]string `json:"vars,omitempty"`
	MinScore int               `json:"minScore,omitempty"`
}

// LLMRequest is the goal a language model plans for, and optionally the
// model to ask (else the planner's --llm-model).
type LLMRequest struct {
	Goal  string `json:"goal"`
	Model string `json:"model,omitempty"`
}

// PlanDefaults apply to generated plans.
type PlanDefaults struct {
	MaxConcurrency int   `json:"maxConcurrency,omitempty"`
	TimeoutMs      int64 `json:"timeoutMs,omitempty"`
}

// ErrInvalid is matched by every error Decode returns.
var ErrInvalid = errors.New("planner: invalid request")

// Error names what is wrong with a request and where.
type Error struct {
	Field string // a JSON pointer, e.g. /kind
	Msg   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("request: at %s: %s", e.Field, e.Msg)
	}
	return "request: " + e.Msg
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Decode validates a request against its schema and decodes it,
// filling defaults: sessionId planbus.DefaultSession, maxAttempts 5 (1 for
// kind plan).
func Decode(doc []byte) (*Request, error) {
	if !utf8.Valid(doc) {
		// JSON is UTF-8 (RFC 8259); decoding would quietly replace the
		// bad bytes, so what ran would not be what was sent.
		at := 0
		for at < len(doc) {
			r, size := utf8.DecodeRune(doc[at:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			at += size
		}
		return nil, &Error{Msg: fmt.Sprintf("not valid UTF-8 at byte offset %d (0x%02x)", at, doc[at])}
	}
	if err := wire.CheckText(doc); err != nil {
		// Workers decode strictly: a call with such text would never
		// reach a skill.
		te := err.(*wire.TextError)
		return nil, &Error{Field: cmp.Or(te.Pointer, "/"), Msg: strings.TrimPrefix(te.Error(), "at "+te.Pointer+": ")}
	}
	if err := schemas.Validate(schemas.PlanRequest, doc); err != nil {
		return nil, SchemaError(err, "")
	}
	var r Request
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	if r.SessionID == "" {
		r.SessionID = planbus.DefaultSession
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
		if r.Kind == KindPlan {
			r.MaxAttempts = 1
		}
	}
	return &r, nil
}

// Budget is a request's own limits for its generations (htn.budget,
// goap.budget): it may lower the planner's, never raise them.
type Budget struct {
	// Memory is the most bytes one generation may hold.
	Memory int64 `json:"memory,omitempty"`
	// Nodes is the most search nodes one generation may create (HTN) or
	// expand (GOAP).
	Nodes int64 `json:"nodes,omitempty"`
}

// SchemaError turns a schema violation (a *schemas.Error from
// schemas.Validate) into an *Error naming the first field at fault; want,
// if set, is added to the message: what a valid document looks like.
func SchemaError(err error, want string) error {
	var se *schemas.Error
	if !errors.As(err, &se) {
		return &Error{Msg: err.Error()}
	}
	field, msg := "", se.Error()
	if len(se.Issues) > 0 {
		if rest, ok := strings.CutPrefix(se.Issues[0], "at "); ok {
			if i := strings.Index(rest, ": "); i > 0 {
				// The field is the error's: the message does not say it twice.
				field, msg = rest[:i], strings.TrimPrefix(msg, "at "+rest[:i]+": ")
			}
		}
	}
	if want != "" {
		msg += " (" + want + ")"
	}
	return &Error{Field: field, Msg: msg}
}

// Reuses reports whether the request lets replans reuse earlier results
// (Reuse left out: it does).
func (r *Request) Reuses() bool { return r.Reuse == nil || *r.Reuse }

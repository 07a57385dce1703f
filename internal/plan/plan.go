package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/dag"
	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/schemas"
)

// Defaults of Plan JSON fields: a plan has a minute, each attempt of a
// tool half of one, and a tool three attempts 100 ms, then 200 ms apart.
const (
	DefaultPlanTimeoutMs = 60000
	DefaultToolTimeoutMs = 30000
	DefaultMaxAttempts   = 3
	DefaultBackoffMs     = 100
)

// MaxTimeoutMs is the longest timeout Plan JSON accepts, for a plan or a
// tool: a day.
const MaxTimeoutMs = 86_400_000

// MaxTools is the most tools a plan may have (the schema's maxItems).
const MaxTools = maxTools

// ErrInvalid is matched by every error Decode returns.
var ErrInvalid = errors.New("plan: invalid")

// RetryPolicy says how often a tool is tried and how long to wait between
// tries: before attempt n+1 the dispatcher waits BackoffMs × 2^(n−1).
type RetryPolicy = planbus.RetryPolicy

// Tool is one node of a plan.
type Tool struct {
	ToolID       string          `json:"toolId"`
	Skill        string          `json:"skill"`
	Description  string          `json:"description,omitempty"`
	Input        json.RawMessage `json:"input"`
	Dependencies []string        `json:"dependencies"`
	Required     bool            `json:"required"`
	Async        bool            `json:"async"`
	TimeoutMs    int64           `json:"timeoutMs"`
	RetryPolicy  RetryPolicy     `json:"retryPolicy"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	// Verify, if set, is checked against the output of each attempt that
	// succeeds; an output it refuses makes the attempt a failed one
	// (VERIFY_FAILED, retryable). Check compiles it.
	Verify *gate.Gate `json:"verify,omitempty"`
	// Fallback, if set, runs in the tool's place when its own attempts
	// have failed: same toolId and dependencies, its own skill, input,
	// timeout, retries and gate. Its attempts continue the tool's
	// numbering.
	Fallback *Fallback `json:"fallback,omitempty"`
	// Approval, if set, makes the tool wait for a person when it is
	// ready: it is released once approved, and fails with code REJECTED
	// if rejected.
	Approval *Approval `json:"approval,omitempty"`
	// NoReuse is Plan JSON's "reuse": false: a replan runs the tool again
	// even if an identical tool (see Identities) succeeded in an earlier
	// attempt of the request; by default it takes that tool's output.
	NoReuse bool `json:"-"`
	// ReuseFrom, set by the planner in a replan, is the earlier result
	// the tool takes instead of running (see ReuseRef).
	ReuseFrom *ReuseRef `json:"reuseFrom,omitempty"`

	// Which of TimeoutMs and RetryPolicy the document gave; the others may
	// take a skill manifest's defaults.
	timeoutSet, retrySet bool
}

// Fallback is what a tool falls back to.
type Fallback struct {
	Skill       string          `json:"skill"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input"`
	TimeoutMs   int64           `json:"timeoutMs"`
	RetryPolicy RetryPolicy     `json:"retryPolicy"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	// Verify is the fallback's own gate; the tool's does not apply to it.
	Verify *gate.Gate `json:"verify,omitempty"`

	// timeoutSet and retrySet record that the document gave them, as
	// Tool's do: the rest take the fallback skill's manifest defaults.
	timeoutSet, retrySet bool
}

// Defaults reports whether the fallback's timeoutMs and retryPolicy were
// left to their defaults in the document it was decoded from.
func (f *Fallback) Defaults() (timeout, retry bool) { return !f.timeoutSet, !f.retrySet }

// MarshalJSON writes the fallback as Plan JSON, leaving out a timeoutMs or
// retryPolicy the document left out (see Tool.MarshalJSON).
func (f Fallback) MarshalJSON() ([]byte, error) {
	j := fallbackOut{Skill: f.Skill, Description: f.Description, Input: f.Input, Metadata: f.Metadata, Verify: f.Verify}
	if f.timeoutSet || f.TimeoutMs != 0 && f.TimeoutMs != DefaultToolTimeoutMs {
		j.TimeoutMs = &f.TimeoutMs
	}
	if f.retrySet || f.RetryPolicy != (RetryPolicy{}) && f.RetryPolicy != (RetryPolicy{MaxAttempts: DefaultMaxAttempts, BackoffMs: DefaultBackoffMs}) {
		j.RetryPolicy = &f.RetryPolicy
	}
	return json.Marshal(j)
}

// fallbackOut is Fallback as MarshalJSON writes it.
type fallbackOut struct {
	Skill       string          `json:"skill"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input"`
	TimeoutMs   *int64          `json:"timeoutMs,omitempty"`
	RetryPolicy *RetryPolicy    `json:"retryPolicy,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Verify      *gate.Gate      `json:"verify,omitempty"`
}

// Approval is a tool's human approval step.
type Approval struct {
	// Prompt is what the person is asked, shown while the tool waits.
	Prompt string `json:"prompt"`
}

// ReuseRef names the earlier result a tool of a replan takes as its
// own: the result at ResultSeq in the RESULTS stream, which tool ToolID
// of plan PlanID (an earlier attempt of the same request) produced. The
// dispatcher checks that it is that tool's succeeded result, of the
// same request, with its call's token; one that is not, or is gone, is
// ignored and the tool runs.
type ReuseRef struct {
	PlanID    string `json:"planId"`
	ToolID    string `json:"toolId"`
	ResultSeq uint64 `json:"resultSeq"`
}

// Attempts is how many attempts the tool has in all, its fallback's
// included.
func (t *Tool) Attempts() int {
	n := t.RetryPolicy.MaxAttempts
	if t.Fallback != nil {
		n += t.Fallback.RetryPolicy.MaxAttempts
	}
	return n
}

// Variant is what one attempt of a tool runs.
type Variant struct {
	Skill       string
	Input       json.RawMessage
	TimeoutMs   int64
	RetryPolicy RetryPolicy
	Metadata    json.RawMessage
	// Verify is the gate of the attempt's output, or nil.
	Verify *gate.Gate
	// Fallback: the attempt is one of the fallback's.
	Fallback bool
	// Attempt is the attempt's number within its variant, from 1.
	Attempt int
}

// Variant returns what attempt n (1-based, counted over the tool and its
// fallback) runs.
func (t *Tool) Variant(n int) Variant {
	if t.Fallback == nil || n <= t.RetryPolicy.MaxAttempts {
		return Variant{Skill: t.Skill, Input: t.Input, TimeoutMs: t.TimeoutMs, RetryPolicy: t.RetryPolicy, Metadata: t.Metadata,
			Verify: t.Verify, Attempt: n}
	}
	f := t.Fallback
	return Variant{Skill: f.Skill, Input: f.Input, TimeoutMs: f.TimeoutMs, RetryPolicy: f.RetryPolicy, Metadata: f.Metadata,
		Verify: f.Verify, Fallback: true, Attempt: n - t.RetryPolicy.MaxAttempts}
}

// Gate returns the gate of attempt n's output (the tool's, or its
// fallback's for the fallback's attempts), or nil.
func (t *Tool) Gate(n int) *gate.Gate {
	if t.Fallback == nil || n <= t.RetryPolicy.MaxAttempts {
		return t.Verify
	}
	return t.Fallback.Verify
}

// Defaults reports whether the tool's timeoutMs and retryPolicy were left
// to their defaults in the document it was decoded from.
func (t *Tool) Defaults() (timeout, retry bool) { return !t.timeoutSet, !t.retrySet }

// MarshalJSON writes the tool as Plan JSON, leaving out what has its
// default value (an input of {}, no dependencies, required and async
// true). A timeoutMs or retryPolicy
// that the tool's document left out, and that still has its default (or
// zero) value, is left out again: whoever decodes the tool next (the
// dispatcher) must see it unset, to give it the defaults of the skill's
// manifest. The value of a field the document gave, or that was changed
// since, is written.
func (t Tool) MarshalJSON() ([]byte, error) {
	j := toolOut{ToolID: t.ToolID, Skill: t.Skill, Description: t.Description, Input: t.Input, Dependencies: t.Dependencies,
		Metadata: t.Metadata, Verify: t.Verify, Fallback: t.Fallback, Approval: t.Approval, ReuseFrom: t.ReuseFrom}
	// Fields at their defaults are left out: a plan of 100,000 tools
	// written with them all (93 bytes a tool) did not fit in a message.
	if string(bytes.TrimSpace(j.Input)) == "{}" {
		j.Input = nil
	}
	if !t.Required {
		j.Required = new(bool)
	}
	if !t.Async {
		j.Async = new(bool)
	}
	if t.NoReuse {
		j.Reuse = new(bool)
	}
	if t.timeoutSet || t.TimeoutMs != 0 && t.TimeoutMs != DefaultToolTimeoutMs {
		j.TimeoutMs = &t.TimeoutMs
	}
	if t.retrySet || t.RetryPolicy != (RetryPolicy{}) && t.RetryPolicy != (RetryPolicy{MaxAttempts: DefaultMaxAttempts, BackoffMs: DefaultBackoffMs}) {
		j.RetryPolicy = &t.RetryPolicy
	}
	return json.Marshal(j)
}

// toolOut is Tool as MarshalJSON writes it, in the order of the schema.
type toolOut struct {
	ToolID       string          `json:"toolId"`
	Skill        string          `json:"skill"`
	Description  string          `json:"description,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	Dependencies []string        `json:"dependencies,omitempty"`
	Required     *bool           `json:"required,omitempty"`
	Async        *bool           `json:"async,omitempty"`
	TimeoutMs    *int64          `json:"timeoutMs,omitempty"`
	RetryPolicy  *RetryPolicy    `json:"retryPolicy,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	Verify       *gate.Gate      `json:"verify,omitempty"`
	Fallback     *Fallback       `json:"fallback,omitempty"`
	Approval     *Approval       `json:"approval,omitempty"`
	Reuse        *bool           `json:"reuse,omitempty"`
	ReuseFrom    *ReuseRef       `json:"reuseFrom,omitempty"`
}

// toolJSON is Tool as decoded: pointers tell absent fields from zeros.
// Gates stay raw until tool() decodes them, so that a fast check can hold
// them to their schema first (fast.go).
type toolJSON struct {
	ToolID       string          `json:"toolId"`
	Skill        string          `json:"skill"`
	Description  string          `json:"description"`
	Input        json.RawMessage `json:"input"`
	Dependencies []string        `json:"dependencies"`
	Required     *bool           `json:"required"`
	Async        *bool           `json:"async"`
	TimeoutMs    *int64          `json:"timeoutMs"`
	RetryPolicy  *retryJSON      `json:"retryPolicy"`
	Metadata     json.RawMessage `json:"metadata"`
	Verify       json.RawMessage `json:"verify"`
	Fallback     *fallbackJSON   `json:"fallback"`
	Approval     *Approval       `json:"approval"`
	Reuse        *bool           `json:"reuse"`
	ReuseFrom    *ReuseRef       `json:"reuseFrom"`
}

// fallbackJSON is Fallback as decoded.
type fallbackJSON struct {
	Skill       string          `json:"skill"`
	Description string          `json:"description"`
	Input       json.RawMessage `json:"input"`
	TimeoutMs   *int64          `json:"timeoutMs"`
	RetryPolicy *retryJSON      `json:"retryPolicy"`
	Metadata    json.RawMessage `json:"metadata"`
	Verify      json.RawMessage `json:"verify"`
}

// retryJSON is RetryPolicy as decoded.
type retryJSON struct {
	MaxAttempts *int   `json:"maxAttempts"`
	BackoffMs   *int64 `json:"backoffMs"`
}

// decodeGate decodes a raw gate; absent or null is no gate.
func decodeGate(raw json.RawMessage) (*gate.Gate, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	g := new(gate.Gate)
	if err := json.Unmarshal(raw, g); err != nil {
		return nil, err
	}
	return g, nil
}

// tool fills the defaults of absent fields.
func (j *toolJSON) tool() (Tool, error) {
	verify, err := decodeGate(j.Verify)
	if err != nil {
		return Tool{}, fmt.Errorf("verify: %w", err)
	}
	t := Tool{ToolID: j.ToolID, Skill: j.Skill, Description: j.Description, Input: j.Input, Dependencies: j.Dependencies,
		Required: true, Async: true, TimeoutMs: DefaultToolTimeoutMs,
		RetryPolicy: RetryPolicy{MaxAttempts: DefaultMaxAttempts, BackoffMs: DefaultBackoffMs}, Metadata: j.Metadata, Verify: verify,
		Approval: j.Approval, NoReuse: j.Reuse != nil && !*j.Reuse, ReuseFrom: j.ReuseFrom}
	if t.Input == nil {
		t.Input = json.RawMessage(`{}`)
	}
	if t.Dependencies == nil {
		t.Dependencies = []string{}
	}
	if j.Required != nil {
		t.Required = *j.Required
	}
	if j.Async != nil {
		t.Async = *j.Async
	}
	if j.TimeoutMs != nil {
		t.TimeoutMs, t.timeoutSet = *j.TimeoutMs, true
	}
	t.retrySet = j.RetryPolicy.fill(&t.RetryPolicy)
	if fj := j.Fallback; fj != nil {
		verify, err := decodeGate(fj.Verify)
		if err != nil {
			return Tool{}, fmt.Errorf("fallback.verify: %w", err)
		}
		f := &Fallback{Skill: fj.Skill, Description: fj.Description, Input: fj.Input, TimeoutMs: DefaultToolTimeoutMs,
			RetryPolicy: RetryPolicy{MaxAttempts: DefaultMaxAttempts, BackoffMs: DefaultBackoffMs}, Metadata: fj.Metadata, Verify: verify}
		if f.Input == nil {
			f.Input = json.RawMessage(`{}`)
		}
		if fj.TimeoutMs != nil {
			f.TimeoutMs, f.timeoutSet = *fj.TimeoutMs, true
		}
		f.retrySet = fj.RetryPolicy.fill(&f.RetryPolicy)
		t.Fallback = f
	}
	return t, nil
}

// fill sets what the document gave of a retry policy, reporting whether
// it gave one.
func (rp *retryJSON) fill(to *RetryPolicy) bool {
	if rp == nil {
		return false
	}
	if rp.MaxAttempts != nil {
		to.MaxAttempts = *rp.MaxAttempts
	}
	if rp.BackoffMs != nil {
		to.BackoffMs = *rp.BackoffMs
	}
	return true
}

// UnmarshalJSON fills the defaults of absent fields.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var j toolJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var err error
	*t, err = j.tool()
	return err
}

// Plan is a DAG of tool calls.
type Plan struct {
	PlanID         string          `json:"planId,omitempty"`
	RequestID      string          `json:"requestId,omitempty"`
	SessionID      string          `json:"sessionId,omitempty"`
	Description    string          `json:"description,omitempty"`
	Parallel       bool            `json:"parallel"`
	MaxConcurrency int             `json:"maxConcurrency,omitempty"` // 0: the dispatcher's default
	TimeoutMs      int64           `json:"timeoutMs"`
	Tools          []Tool          `json:"tools"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`

	graph     *dag.Graph
	refs      [][]ref // per tool, the references in its input
	fallbacks [][]ref // per tool, the references in its fallback's input
}

// planJSON is Plan as decoded.
type planJSON struct {
	PlanID         string          `json:"planId"`
	RequestID      string          `json:"requestId"`
	SessionID      string          `json:"sessionId"`
	Description    string          `json:"description"`
	Parallel       *bool           `json:"parallel"`
	MaxConcurrency *int            `json:"maxConcurrency"`
	TimeoutMs      *int64          `json:"timeoutMs"`
	Tools          []toolJSON      `json:"tools"`
	Metadata       json.RawMessage `json:"metadata"`
}

// UnmarshalJSON fills the defaults of absent fields, in one pass over the
// document (a plan may have thousands of tools).
func (p *Plan) UnmarshalJSON(b []byte) error {
	var j planJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	return j.plan(p)
}

// plan fills p with the plan j holds, with the defaults of absent fields.
func (j *planJSON) plan(p *Plan) error {
	*p = Plan{PlanID: j.PlanID, RequestID: j.RequestID, SessionID: j.SessionID, Description: j.Description,
		Parallel: true, TimeoutMs: DefaultPlanTimeoutMs, Metadata: j.Metadata, Tools: make([]Tool, len(j.Tools))}
	if j.MaxConcurrency != nil {
		p.MaxConcurrency = *j.MaxConcurrency
	}
	if j.Parallel != nil {
		p.Parallel = *j.Parallel
	}
	if j.TimeoutMs != nil {
		p.TimeoutMs = *j.TimeoutMs
	}
	for i := range j.Tools {
		t, err := j.Tools[i].tool()
		if err != nil {
			return fmt.Errorf("tool %d: %w", i, err)
		}
		p.Tools[i] = t
	}
	return nil
}

// Graph returns the plan's validated dependency graph; node i is Tools[i].
// It is nil for a Plan that did not come from Decode or Check.
func (p *Plan) Graph() *dag.Graph { return p.graph }

// HasRefs reports whether tool i's input references dependency outputs.
func (p *Plan) HasRefs(i int) bool { return len(p.refsOf(i)) > 0 }

// refsOf returns the references in tool i's input: Check makes p.refs
// only for a plan with references.
func (p *Plan) refsOf(i int) []ref {
	if i < len(p.refs) {
		return p.refs[i]
	}
	return nil
}

// Error says what is wrong with a plan and where.
type Error struct {
	PlanID string
	Msg    string
	Err    error // the underlying *schemas.Error, *dag.CycleError, ... if any
}

func (e *Error) Error() string {
	if e.PlanID != "" {
		return fmt.Sprintf("plan %s: %s", e.PlanID, e.Msg)
	}
	return "plan: " + e.Msg
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func (e *Error) Unwrap() error { return e.Err }

// Decode parses and checks a Plan JSON document: the schema, then the
// dependency graph (duplicate ids, unknown dependencies, self-dependencies,
// cycles with their path), then input references and verification gates.
// Absent fields take their defaults. Every error is an *Error matching
// ErrInvalid.
func Decode(doc []byte) (*Plan, error) {
	p, ok, tools := decodeFast(doc)
	if ok {
		if err := p.Check(); err != nil {
			return nil, err
		}
		return p, nil
	}
	if tools > maxTools {
		// What the schema says of it, without its walk.
		return nil, &Error{PlanID: idOf(doc), Msg: fmt.Sprintf("at /tools: maxItems: got %s, want %s",
			wire.Grouped(int64(tools)), wire.Grouped(maxTools))}
	}
	if err := wire.CheckText(doc); err != nil {
		return nil, &Error{PlanID: idOf(doc), Msg: err.Error() + " (no worker could decode a call with it)", Err: err}
	}
	p, err := decodeSlow(doc)
	if err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// idOf returns the planId of a plan document refused, when it has a valid
// one, for the error to name.
func idOf(doc []byte) string {
	var id struct {
		PlanID string `json:"planId"`
	}
	_ = json.Unmarshal(doc, &id)
	if !ValidID(id.PlanID) {
		return ""
	}
	return id.PlanID
}

// decodeSlow validates doc against the plan schema and decodes it with
// encoding/json; it returns the plan before Check.
func decodeSlow(doc []byte) (*Plan, error) {
	if err := schemas.Validate(schemas.Plan, doc); err != nil {
		return nil, &Error{PlanID: idOf(doc), Msg: err.Error(), Err: err}
	}
	var p Plan
	if err := json.Unmarshal(doc, &p); err != nil {
		return nil, &Error{Msg: err.Error(), Err: err}
	}
	return &p, nil
}

// Check validates the dependency graph, input references and gates of a
// plan built in Go, and prepares it for execution: it compiles the gates,
// and gives a tool without a verify of its own the gate in its
// metadata.verify, where plans carried gates before verify was a field of
// its own (the same for a fallback). Decode calls it.
func (p *Plan) Check() error {
	g, err := dag.NewFunc(len(p.Tools), func(i int) dag.Node {
		return dag.Node{ID: p.Tools[i].ToolID, Deps: p.Tools[i].Dependencies}
	})
	if err != nil {
		return &Error{PlanID: p.PlanID, Msg: graphMessage(err), Err: err}
	}
	var refs [][]ref      // made for the first reference: only they read it
	var fallbacks [][]ref // made for the first fallback
	var rc *reach         // made for the first reference
	for i, t := range p.Tools {
		rs, err := p.checkRefs(g, &rc, i, t.Input, "input")
		if err != nil {
			return err
		}
		if rs != nil {
			if refs == nil {
				refs = make([][]ref, len(p.Tools))
			}
			refs[i] = rs
		}
		if t.Fallback != nil {
			if fallbacks == nil {
				fallbacks = make([][]ref, len(p.Tools))
			}
			if fallbacks[i], err = p.checkRefs(g, &rc, i, t.Fallback.Input, "fallback input"); err != nil {
				return err
			}
		}
		if err := p.checkGates(&p.Tools[i]); err != nil {
			return err
		}
	}
	p.graph, p.refs, p.fallbacks = g, refs, fallbacks
	return nil
}

// checkGates compiles a tool's gates, taking each from metadata.verify
// where verify is absent.
func (p *Plan) checkGates(t *Tool) error {
	check := func(g **gate.Gate, metadata json.RawMessage, where string) error {
		if *g == nil {
			legacy, err := metadataGate(metadata)
			if err != nil {
				return &Error{PlanID: p.PlanID, Msg: fmt.Sprintf("tool %q: %smetadata.verify: %v", t.ToolID, where, err), Err: err}
			}
			*g = legacy
		} else if err := (*g).Compile(); err != nil {
			return &Error{PlanID: p.PlanID, Msg: fmt.Sprintf("tool %q: %sverify: %v", t.ToolID, where, err), Err: err}
		}
		return nil
	}
	if err := check(&t.Verify, t.Metadata, ""); err != nil {
		return err
	}
	if t.Fallback != nil {
		return check(&t.Fallback.Verify, t.Fallback.Metadata, "fallback.")
	}
	return nil
}

// metadataGate reads the gate in a tool's metadata.verify, compiled, or
// nil when there is none.
func metadataGate(metadata json.RawMessage) (*gate.Gate, error) {
	if !bytes.Contains(metadata, []byte(`"verify"`)) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &m); err != nil {
		return nil, nil // the schema makes it an object; this is its author's business
	}
	raw, ok := m["verify"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	return gate.Parse(raw)
}

// checkRefs finds the references in one of tool i's inputs and checks
// that each names a tool it depends on, with *rc, made from g when nil.
func (p *Plan) checkRefs(g *dag.Graph, rc **reach, i int, input json.RawMessage, what string) ([]ref, error) {
	t := p.Tools[i]
	rs, err := findRefs(input)
	if err != nil {
		return nil, &Error{PlanID: p.PlanID, Msg: fmt.Sprintf("tool %q: %s: %v", t.ToolID, what, err), Err: err}
	}
	if len(rs) > 0 && *rc == nil {
		*rc = newReach(g)
	}
	for _, r := range rs {
		ok, err := (*rc).dependsOn(i, r.tool)
		if err != nil {
			return nil, &Error{PlanID: p.PlanID, Msg: fmt.Sprintf("tool %q: %s at %s references %q: %v", t.ToolID, what, r.at, r.tool, err), Err: err}
		}
		if !ok {
			return nil, &Error{PlanID: p.PlanID, Msg: fmt.Sprintf(
				"tool %q: %s at %s references %q, which it does not depend on, directly or through other tools", t.ToolID, what, r.at, r.tool)}
		}
	}
	return rs, nil
}

func graphMessage(err error) string {
	var ne *dag.NodeError
	if errors.As(err, &ne) {
		switch {
		case errors.Is(err, dag.ErrDuplicateID):
			return fmt.Sprintf("tool #%d: duplicate toolId %q", ne.Index, ne.ID)
		case errors.Is(err, dag.ErrUnknownDep):
			return fmt.Sprintf("tool %q depends on unknown tool %q", ne.ID, ne.Dep)
		case errors.Is(err, dag.ErrSelfDep):
			return fmt.Sprintf("tool %q depends on itself", ne.ID)
		case errors.Is(err, dag.ErrDuplicateDep):
			return fmt.Sprintf("tool %q lists dependency %q twice", ne.ID, ne.Dep)
		case errors.Is(err, dag.ErrEmptyID):
			return fmt.Sprintf("tool #%d has an empty toolId", ne.Index)
		}
	}
	return err.Error() // "cycle: A -> C -> B -> A"
}

// ValidID reports whether s can serve as a plan or request id: 1 to 128
// letters, digits, '_' or '-', so it is safe in subjects and KV keys.
func ValidID(s string) bool { return wire.IsID(s) }

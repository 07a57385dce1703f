package planbus

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planbus/planbus/schemas"
)

// Plan is a plan document (schemas/plan.schema.json) built in Go: a DAG of
// tools, each a call of a skill. Its JSON is exactly the document: fields
// left at their zero value are left out, so they take the schema's defaults
// (tools run in parallel, the plan times out after 60 s, a tool is required,
// 30 s an attempt, three attempts). Validate checks it against the schema
// before it is sent; the dispatcher checks the rest (references to
// dependencies, cycles, skills that exist) when it takes the plan.
//
//	p := planbus.Plan{Tools: []planbus.Tool{
//		{ToolID: "fetch", Skill: "http", Input: map[string]any{"url": "https://example.com"}},
//		{ToolID: "count", Skill: "wordcount", Dependencies: []string{"fetch"},
//			Input: map[string]any{"text": planbus.Ref("fetch", "/body")}},
//	}}
type Plan struct {
	// PlanID and RequestID are made up when left empty.
	PlanID    string `json:"planId,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	// SessionID names the session whose skill health and state the plan
	// uses; empty: the default session.
	SessionID   string `json:"sessionId,omitempty"`
	Description string `json:"description,omitempty"`
	// Sequential runs one tool at a time, in the DAG's order ("parallel":
	// false).
	Sequential bool `json:"-"`
	// MaxConcurrency bounds the tools of the plan in flight at once; 0:
	// the dispatcher's setting.
	MaxConcurrency int `json:"maxConcurrency,omitempty"`
	// TimeoutMs is the time for the whole plan from its start; 0: 60 s.
	TimeoutMs int64          `json:"timeoutMs,omitempty"`
	Tools     []Tool         `json:"tools"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Tool is one node of a Plan: a call of Skill with Input once the tools it
// depends on have succeeded.
type Tool struct {
	// ToolID is unique within the plan: letters, digits and _ . : -.
	ToolID      string `json:"toolId"`
	Skill       string `json:"skill"`
	Description string `json:"description,omitempty"`
	// Input is any Go value that marshals to a JSON object: a struct, a
	// map, json.RawMessage. A Ref anywhere in it is replaced, when the tool
	// is released, by the output (or the part of it) that it names; the
	// tool it names must be among Dependencies. nil: {}.
	Input        any      `json:"input,omitempty"`
	Dependencies []string `json:"dependencies,omitempty"`
	// Optional: the tool's failure does not fail the plan; its dependents
	// run with null in its place ("required": false).
	Optional bool `json:"-"`
	// Exclusive: while this tool runs, no other tool of the plan is
	// released ("async": false).
	Exclusive bool `json:"-"`
	// TimeoutMs is the time one attempt may run on a worker; 0: the
	// skill's default, else 30 s.
	TimeoutMs   int64          `json:"timeoutMs,omitempty"`
	RetryPolicy *RetryPolicy   `json:"retryPolicy,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	// Verify is a gate checked against the output of each attempt that
	// succeeds: an output it refuses makes the attempt a failed one
	// (VERIFY_FAILED), so the retry policy applies.
	Verify *Gate `json:"verify,omitempty"`
	// Approval makes the tool wait for a person when it is ready.
	Approval *Approval `json:"approval,omitempty"`
	// NoReuse: in a replan the tool runs again even if an identical tool
	// succeeded in an earlier attempt of the request ("reuse": false).
	NoReuse bool `json:"-"`
	// Fallback runs in the tool's place when its attempts have failed.
	Fallback *Fallback `json:"fallback,omitempty"`
}

// Fallback is what a tool falls back to: another skill, with its own
// input, timeout, retries and gate, under the tool's id and dependencies.
type Fallback struct {
	Skill       string         `json:"skill"`
	Description string         `json:"description,omitempty"`
	Input       any            `json:"input,omitempty"`
	TimeoutMs   int64          `json:"timeoutMs,omitempty"`
	RetryPolicy *RetryPolicy   `json:"retryPolicy,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Verify      *Gate          `json:"verify,omitempty"`
}

// Approval is a human approval step: the tool waits, holding no slot,
// until planbus.plan.approve approves it (it is released) or rejects it
// (it fails with code REJECTED without running).
type Approval struct {
	// Prompt is what the person is asked.
	Prompt string `json:"prompt"`
}

// Gate is a verification gate (docs/templates.md, "Gates"): a check of a
// tool's output, or of the part of it at Path (a JSON pointer).
type Gate struct {
	Type GateType `json:"type"`
	Path string   `json:"path,omitempty"`
	// Value is what contains, notContains and equals compare with, the
	// exit code of exitCode and the status (or class, "2xx") of httpStatus.
	Value         any    `json:"value,omitempty"`
	Pattern       string `json:"pattern,omitempty"` // matches: a regular expression
	Expr          string `json:"expr,omitempty"`    // expr: an expr-lang expression over output
	CaseSensitive bool   `json:"caseSensitive,omitempty"`
	Gates         []Gate `json:"gates,omitempty"` // all: every one of them
}

// GateType is the kind of check a Gate makes.
type GateType string

// The gate types.
const (
	GateNonEmpty    GateType = "nonEmpty"
	GateContains    GateType = "contains"
	GateNotContains GateType = "notContains"
	GateMatches     GateType = "matches"
	GateEquals      GateType = "equals"
	GateExists      GateType = "exists"
	GateExitCode    GateType = "exitCode"
	GateHTTPStatus  GateType = "httpStatus"
	GateExpr        GateType = "expr"
	GateAll         GateType = "all"
)

// Reference is a reference to another tool's output in a tool's input:
// Ref makes one.
type Reference struct {
	// Tool is the id of the tool whose output is meant.
	Tool string
	// Pointer is a JSON pointer into that output ("/body/items"); empty:
	// the whole output.
	Pointer string
}

// Ref refers, in a tool's input, to the output of the tool toolID, or with
// a pointer ("/words") to the part of it the JSON pointer names. It
// marshals to {"$ref": "toolID#/pointer"}.
func Ref(toolID, pointer string) Reference {
	return Reference{Tool: toolID, Pointer: pointer}
}

// MarshalJSON writes the reference as Plan JSON has it.
func (r Reference) MarshalJSON() ([]byte, error) {
	if r.Tool == "" {
		return nil, fmt.Errorf("planbus.Ref: no tool id")
	}
	if r.Pointer != "" && !strings.HasPrefix(r.Pointer, "/") {
		return nil, fmt.Errorf("planbus.Ref(%q, %q): a JSON pointer starts with /", r.Tool, r.Pointer)
	}
	s := r.Tool
	if r.Pointer != "" {
		s += "#" + r.Pointer
	}
	return json.Marshal(map[string]string{"$ref": s})
}

// MarshalJSON writes the plan as Plan JSON.
func (p Plan) MarshalJSON() ([]byte, error) {
	type plain Plan // without this method
	doc := struct {
		plain
		Parallel *bool `json:"parallel,omitempty"`
	}{plain: plain(p)}
	if p.Sequential {
		doc.Parallel = new(bool)
	}
	if doc.Tools == nil {
		doc.Tools = []Tool{}
	}
	return json.Marshal(doc)
}

// MarshalJSON writes the tool as Plan JSON has it.
func (t Tool) MarshalJSON() ([]byte, error) {
	type plain Tool
	no := new(bool)
	doc := struct {
		plain
		Required *bool `json:"required,omitempty"`
		Async    *bool `json:"async,omitempty"`
		Reuse    *bool `json:"reuse,omitempty"`
	}{plain: plain(t)}
	if t.Optional {
		doc.Required = no
	}
	if t.Exclusive {
		doc.Async = no
	}
	if t.NoReuse {
		doc.Reuse = no
	}
	return json.Marshal(doc)
}

// Validate checks the plan against the plan schema, as the dispatcher
// will. Its error names every place that does not hold (a JSON pointer
// and what is wrong there); its errors.Is schemas.ErrInvalid.
func (p Plan) Validate() error {
	doc, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("planbus: plan: %w", err)
	}
	return schemas.Validate(schemas.Plan, doc)
}

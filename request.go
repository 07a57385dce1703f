package planbus

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/planbus/planbus/schemas"
)

// Request is a plan request (schemas/plan-request.schema.json) built in
// Go: what to plan for and with which planner, which the planner turns
// into plans, runs, and replans when a plan fails. Fill one of Plan,
// Planner, HTN, GOAP and Template; Kind follows from it (or set Kind to
// say it). Its JSON is exactly the document; zero fields are left out and
// take the schema's defaults.
type Request struct {
	// RequestID is made up when left empty.
	RequestID string `json:"requestId,omitempty"`
	// SessionID names the session whose skill health and state the
	// request uses; empty: the default session.
	SessionID string      `json:"sessionId,omitempty"`
	Kind      RequestKind `json:"kind"`
	// Input is what the user asked for: handed to external planners, and
	// a template request's text when it gives none.
	Input any `json:"input,omitempty"`
	// NoReuse: a replan runs every tool again ("reuse": false).
	NoReuse bool `json:"-"`
	// MaxAttempts is how many plans are generated before the fallback;
	// 0: 5 (1 for a plan given as it is).
	MaxAttempts int `json:"maxAttempts,omitempty"`

	// Plan runs a plan as it is (kind plan).
	Plan *Plan `json:"plan,omitempty"`
	// Planner is the NATS subject of an external planner to ask (kind
	// external).
	Planner string `json:"planner,omitempty"`
	// HTN plans with an HTN domain (kind htn).
	HTN *HTNRequest `json:"htn,omitempty"`
	// GOAP plans with a GOAP domain, or starts the session's agent (kind
	// goap).
	GOAP *GOAPRequest `json:"goap,omitempty"`
	// Template takes a plan from the planner's template library (kind
	// template).
	Template *TemplateRequest `json:"template,omitempty"`

	// PlanDefaults are settings for the plans generated.
	PlanDefaults *PlanDefaults  `json:"planDefaults,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// RequestKind is the planner a request asks for.
type RequestKind string

// The kinds of requests.
const (
	KindPlan     RequestKind = "plan"
	KindExternal RequestKind = "external"
	KindHTN      RequestKind = "htn"
	KindGOAP     RequestKind = "goap"
	KindTemplate RequestKind = "template"
)

// HTNRequest is an HTN domain, in the InductorHtn language, and the goal
// to plan for: Domain names a file of the planner's --domains directory,
// or Program is the domain's text.
type HTNRequest struct {
	Domain  string   `json:"domain,omitempty"`
	Program string   `json:"program,omitempty"`
	Goal    string   `json:"goal"`
	Facts   []string `json:"facts,omitempty"` // added to the domain's, e.g. "at(downtown)"
	Budget  *Budget  `json:"budget,omitempty"`
	// Traces records each generation's search in the plan's metadata.
	Traces bool `json:"traces,omitempty"`
}

// GOAPRequest is a GOAP domain and what to plan for: Domain names a file of
// the planner's --domains directory, or Inline is the domain itself
// (schemas/goap-domain.schema.json).
type GOAPRequest struct {
	Domain string `json:"domain,omitempty"`
	Inline any    `json:"inline,omitempty"`
	// Agent starts the session's agent, which pursues the domain's goals
	// until stopped, instead of planning once; not with Goal or State.
	Agent bool `json:"agent,omitempty"`
	// Goal is the goal to reach; empty: the goal arbiter picks one.
	Goal string `json:"goal,omitempty"`
	// State holds facts over the session state.
	State  map[string]any `json:"state,omitempty"`
	Budget *Budget        `json:"budget,omitempty"`
}

// Budget lowers a request's generation limits below the planner's.
type Budget struct {
	Memory int64 `json:"memory,omitempty"` // bytes one generation may hold
	Nodes  int64 `json:"nodes,omitempty"`  // search nodes one generation may create
}

// TemplateRequest names a template of the planner's library (ID), or text
// to match against the templates' triggers.
type TemplateRequest struct {
	ID     string            `json:"id,omitempty"`
	Domain string            `json:"domain,omitempty"`
	Text   string            `json:"text,omitempty"`
	Vars   map[string]string `json:"vars,omitempty"`
	// MinScore, if set, is the least score a match needs.
	MinScore *int `json:"minScore,omitempty"`
}

// PlanDefaults are settings for the plans a request's planner generates.
type PlanDefaults struct {
	MaxConcurrency int   `json:"maxConcurrency,omitempty"`
	TimeoutMs      int64 `json:"timeoutMs,omitempty"`
}

// kind is the request's kind: Kind, else the one its filled field says.
func (r Request) kind() (RequestKind, error) {
	if r.Kind != "" {
		return r.Kind, nil
	}
	var kinds []RequestKind
	if r.Plan != nil {
		kinds = append(kinds, KindPlan)
	}
	if r.Planner != "" {
		kinds = append(kinds, KindExternal)
	}
	if r.HTN != nil {
		kinds = append(kinds, KindHTN)
	}
	if r.GOAP != nil {
		kinds = append(kinds, KindGOAP)
	}
	if r.Template != nil {
		kinds = append(kinds, KindTemplate)
	}
	switch len(kinds) {
	case 0:
		return "", errors.New("planbus: a request needs one of Plan, Planner, HTN, GOAP and Template")
	case 1:
		return kinds[0], nil
	}
	return "", fmt.Errorf("planbus: a request fills %v: set Kind to say which planner to use", kinds)
}

// MarshalJSON writes the request as the planner takes it.
func (r Request) MarshalJSON() ([]byte, error) {
	kind, err := r.kind()
	if err != nil {
		return nil, err
	}
	type plain Request
	doc := struct {
		plain
		Reuse *bool `json:"reuse,omitempty"`
	}{plain: plain(r)}
	doc.Kind = kind
	if r.NoReuse {
		doc.Reuse = new(bool)
	}
	return json.Marshal(doc)
}

// Validate checks the request against the request schema, and a plan it
// carries against the plan schema, as the planner will. Its error names
// every place that does not hold; its errors.Is schemas.ErrInvalid.
func (r Request) Validate() error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := schemas.Validate(schemas.PlanRequest, doc); err != nil {
		return err
	}
	if r.Plan != nil {
		if err := r.Plan.Validate(); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	}
	return nil
}

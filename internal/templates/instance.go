package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/templates/placeholder"
)

// Errors of Select, Instantiate and ToPlan.
var (
	ErrVars            = errors.New("templates: bad variables")
	ErrNoMatch         = errors.New("templates: no template matches")
	ErrUnknownTemplate = errors.New("templates: unknown template")
	ErrNotDecoded      = errors.New("templates: template did not come from Decode")
)

// Instance is a template with its variables resolved: the steps' names,
// actions, inputs and gate values have their placeholders filled in. It is
// what ToPlan turns into a plan and what a Tracker follows.
type Instance struct {
	Template *Template
	// Vars holds every variable's value, input included.
	Vars map[string]string
	// Steps and Fallbacks are the template's, filled in; their gates are
	// compiled.
	Steps     []Step
	Fallbacks []Step
	// Match is how the template was chosen, when Select matched it.
	Match *Candidate
}

// Step returns the step or fallback step with the given id.
func (in *Instance) Step(id string) (*Step, bool) {
	if i, ok := in.Template.steps[id]; ok {
		return &in.Steps[i], true
	}
	if i, ok := in.Template.fallback[id]; ok {
		return &in.Fallbacks[i], true
	}
	return nil, false
}

// Instantiate resolves a template's variables and fills in its steps.
// vars gives values by name, "input" being the request's text; a variable
// the request does not give takes its default, and one without a default
// is an error. Values must match their variable's pattern. Variables the
// template does not declare are ignored, so one request's variables can
// serve a template and the plan it falls back to. Errors match ErrVars (or
// ErrNotDecoded).
func Instantiate(t *Template, vars map[string]string) (*Instance, error) {
	return instantiate(t, vars, false)
}

// instantiateGuided is Instantiate for a guided session: a variable
// without a value, or with one its pattern refuses, is left out of the
// instance's Vars and reads <name> in the steps, for the agent to fill in.
func instantiateGuided(t *Template, vars map[string]string) (*Instance, error) {
	return instantiate(t, vars, true)
}

func instantiate(t *Template, vars map[string]string, lenient bool) (*Instance, error) {
	if t.deps == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotDecoded, t.ID)
	}
	resolved := map[string]string{InputVar: vars[InputVar]}
	filled := map[string]string{InputVar: vars[InputVar]}
	for _, name := range slices.Sorted(maps.Keys(t.Vars)) {
		v := t.Vars[name]
		val, ok := vars[name]
		if !ok && v.Default != nil {
			val, ok = *v.Default, true
		}
		bad := ok && v.re != nil && !v.re.MatchString(val)
		if lenient && (!ok || bad) {
			filled[name] = "<" + name + ">"
			continue
		}
		if !ok {
			return nil, fmt.Errorf("%w: template %q: variable %q is required (%s); give it in the request's vars or in the text",
				ErrVars, t.ID, name, orDefault(v.Description, "no default"))
		}
		if bad {
			return nil, fmt.Errorf("%w: template %q: variable %q: %q does not match the pattern %s", ErrVars, t.ID, name, val, v.Pattern)
		}
		resolved[name], filled[name] = val, val
	}
	in := &Instance{Template: t, Vars: resolved, Steps: make([]Step, len(t.Steps)), Fallbacks: make([]Step, len(t.Fallbacks))}
	for i := range t.Steps {
		s, err := fill(&t.Steps[i], filled)
		if err != nil {
			return nil, fmt.Errorf("%w: template %q: step %q: %v", ErrVars, t.ID, t.Steps[i].ID, err)
		}
		in.Steps[i] = s
	}
	for i := range t.Fallbacks {
		s, err := fill(&t.Fallbacks[i], filled)
		if err != nil {
			return nil, fmt.Errorf("%w: template %q: fallback step %q: %v", ErrVars, t.ID, t.Fallbacks[i].ID, err)
		}
		in.Fallbacks[i] = s
	}
	return in, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// fill returns a copy of s with its placeholders filled in.
func fill(s *Step, vars map[string]string) (Step, error) {
	out := *s
	out.Name, out.Action, out.Hint = placeholder.Expand(s.Name, vars), placeholder.Expand(s.Action, vars), placeholder.Expand(s.Hint, vars)
	if s.Approval != nil {
		out.Approval = &plan.Approval{Prompt: placeholder.Expand(s.Approval.Prompt, vars)}
	}
	out.After = slices.Clone(s.After)
	if len(s.Input) > 0 {
		v, err := decodeJSON(s.Input)
		if err != nil {
			return Step{}, fmt.Errorf("input: %v", err)
		}
		if v, err = placeholder.ExpandJSON(v, vars); err != nil {
			return Step{}, fmt.Errorf("input %v", err)
		}
		if out.Input, err = marshal(v); err != nil {
			return Step{}, fmt.Errorf("input: %v", err)
		}
	}
	if s.Verify != nil {
		g := fillGate(s.Verify, vars)
		if err := g.Compile(); err != nil {
			return Step{}, fmt.Errorf("verify: %v", err)
		}
		out.Verify = g
	}
	return out, nil
}

// fillGate returns a copy of g with its placeholders filled in. It is to
// be compiled again: it may still hold its source's compiled form.
func fillGate(g *gate.Gate, vars map[string]string) *gate.Gate {
	out := *g
	if s, ok := g.Value.(string); ok {
		out.Value = placeholder.Expand(s, vars)
	}
	if g.Gates != nil {
		out.Gates = make([]*gate.Gate, len(g.Gates))
		for i, sub := range g.Gates {
			out.Gates[i] = fillGate(sub, vars)
		}
	}
	return &out
}

// ToPlan instantiates a template (see Instantiate) and turns it into a
// plan (see Instance.Plan).
func ToPlan(t *Template, vars map[string]string) (*plan.Plan, error) {
	in, err := Instantiate(t, vars)
	if err != nil {
		return nil, err
	}
	return in.Plan()
}

// ToolMeta is what a templated plan tool carries in its metadata: the
// step it comes from and what follows a failure. (Its gate is the tool's
// verify.) ParseToolMeta reads it.
type ToolMeta struct {
	Template TemplateStep `json:"template,omitzero"`
	// OnFail says what follows the tool's last failed attempt.
	OnFail OnFail `json:"onFail"`
	// Fallback, when OnFail falls back to a step, is that step, ready to
	// run in the tool's place.
	Fallback *FallbackTool `json:"fallback,omitempty"`
}

// TemplateStep names where a tool comes from.
type TemplateStep struct {
	ID      string `json:"id"`      // the template
	Version string `json:"version"` // the template's version
	Step    string `json:"step"`    // the step, also the tool's id
	Index   int    `json:"index"`   // the step's position, 1-based
	Of      int    `json:"of"`      // the template's number of steps
}

// FallbackTool names the fallback step of a tool in its metadata and says
// what follows the fallback's own failure. What the fallback runs — skill,
// input, timeout, retries, gate — is the plan tool's "fallback", which the
// execution engine runs.
type FallbackTool struct {
	Step   string `json:"step"`
	OnFail OnFail `json:"onFail"`
}

// PlanMeta is what a templated plan carries in its metadata, under
// "template".
type PlanMeta struct {
	ID        string     `json:"id"`
	Version   string     `json:"version"`
	Name      string     `json:"name"`
	Steps     int        `json:"steps"`
	Staleness Staleness  `json:"staleness"`
	Match     *MatchMeta `json:"match,omitempty"`
}

// MatchMeta records why a template was chosen.
type MatchMeta struct {
	Score  int      `json:"score"`
	Hits   []string `json:"hits"`
	Domain bool     `json:"domain,omitempty"`
}

// ParseToolMeta reads a plan tool's metadata. It returns nil and no error
// when the metadata holds neither onFail nor fallback: the tool does not
// come from a template step. Errors name the field. A verify member, which
// plans carried before verify was a field of the tool, is left to
// plan.Decode.
func ParseToolMeta(metadata json.RawMessage) (*ToolMeta, error) {
	if len(bytes.TrimSpace(metadata)) == 0 {
		return nil, nil
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &probe); err != nil {
		return nil, fmt.Errorf("templates: tool metadata: %w", err)
	}
	_, o := probe["onFail"]
	_, f := probe["fallback"]
	if !o && !f {
		return nil, nil
	}
	m := ToolMeta{OnFail: DefaultOnFail()}
	fields := []struct {
		name string
		dst  any
	}{{"template", &m.Template}, {"onFail", &m.OnFail}, {"fallback", &m.Fallback}}
	for _, fd := range fields {
		raw, ok := probe[fd.name]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(fd.dst); err != nil {
			return nil, fmt.Errorf("templates: tool metadata: %s: %w", fd.name, err)
		}
	}
	if err := m.OnFail.check(); err != nil {
		return nil, fmt.Errorf("templates: tool metadata: onFail: %w", err)
	}
	if fb := m.Fallback; fb != nil {
		if err := fb.OnFail.check(); err != nil {
			return nil, fmt.Errorf("templates: tool metadata: fallback.onFail: %w", err)
		}
	}
	return &m, nil
}

// toolDoc is a plan tool as ToPlan writes it.
type toolDoc struct {
	ToolID       string           `json:"toolId"`
	Skill        string           `json:"skill"`
	Description  string           `json:"description,omitempty"`
	Input        json.RawMessage  `json:"input"`
	Dependencies []string         `json:"dependencies"`
	Required     bool             `json:"required"`
	TimeoutMs    int64            `json:"timeoutMs,omitempty"`
	RetryPolicy  plan.RetryPolicy `json:"retryPolicy"`
	Verify       *gate.Gate       `json:"verify,omitempty"`
	Metadata     ToolMeta         `json:"metadata"`
	Fallback     *fallbackDoc     `json:"fallback,omitempty"`
	Approval     *plan.Approval   `json:"approval,omitempty"`
}

// fallbackDoc is a plan tool's fallback as ToPlan writes it.
type fallbackDoc struct {
	Skill       string           `json:"skill"`
	Description string           `json:"description,omitempty"`
	Input       json.RawMessage  `json:"input"`
	TimeoutMs   int64            `json:"timeoutMs,omitempty"`
	RetryPolicy plan.RetryPolicy `json:"retryPolicy"`
	Verify      *gate.Gate       `json:"verify,omitempty"`
	Metadata    ToolMeta         `json:"metadata"`
}

// Plan turns the instance into Plan JSON, decoded and checked by
// plan.Decode:
//
//   - each step becomes a tool with the step's id, skill and input, after
//     the step before it or its After list;
//   - retryPolicy.maxAttempts is 1 + onFail.retries, backoffMs onFail's;
//   - required is false when the step's failure ends in skip (directly or
//     through its fallback step), so its dependents still run;
//   - verify is the step's gate;
//   - metadata carries the step, its onFail and its fallback step
//     (ToolMeta); the plan's metadata carries the template (PlanMeta).
//
// The plan has no planId: the planner gives it one.
func (in *Instance) Plan() (*plan.Plan, error) {
	doc, err := in.planDoc()
	if err != nil {
		return nil, err
	}
	p, err := plan.Decode(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: template %q: %v", ErrVars, in.Template.ID, err)
	}
	return p, nil
}

func (in *Instance) planDoc() ([]byte, error) {
	t := in.Template
	tools := make([]toolDoc, len(in.Steps))
	var total int64
	for i := range in.Steps {
		s := &in.Steps[i]
		meta := ToolMeta{
			Template: TemplateStep{ID: t.ID, Version: t.Version, Step: s.ID, Index: i + 1, Of: len(in.Steps)},
			OnFail:   s.OnFail,
		}
		required := s.OnFail.then() != ActionSkip
		total += stepBudget(s)
		var fallback *fallbackDoc
		if s.OnFail.Step != "" {
			fb, _ := in.Step(s.OnFail.Step)
			meta.Fallback = &FallbackTool{Step: fb.ID, OnFail: fb.OnFail}
			fallback = &fallbackDoc{Skill: fb.Skill, Description: fb.Title(), Input: inputOrEmpty(fb.Input), TimeoutMs: fb.TimeoutMs,
				RetryPolicy: plan.RetryPolicy{MaxAttempts: fb.OnFail.Attempts(), BackoffMs: fb.OnFail.backoff()}, Verify: fb.Verify,
				Metadata: ToolMeta{Template: TemplateStep{ID: t.ID, Version: t.Version, Step: fb.ID, Index: i + 1, Of: len(in.Steps)}, OnFail: fb.OnFail}}
			required = fb.OnFail.then() != ActionSkip
			total += stepBudget(fb)
		}
		tools[i] = toolDoc{
			ToolID: s.ID, Skill: s.planSkill(), Description: fmt.Sprintf("Step %d/%d: %s", i+1, len(in.Steps), s.Title()),
			Input: inputOrEmpty(s.Input), Dependencies: t.deps[i], Required: required, TimeoutMs: s.TimeoutMs,
			RetryPolicy: plan.RetryPolicy{MaxAttempts: s.OnFail.Attempts(), BackoffMs: s.OnFail.backoff()},
			Verify:      s.Verify, Metadata: meta, Fallback: fallback, Approval: s.Approval,
		}
	}
	timeout := t.TimeoutMs
	if timeout == 0 {
		// At most a day less an hour: dispatchers refuse plans that do
		// not end within the store's retention (a day by default) less a
		// minute.
		timeout = min(max(total, plan.DefaultPlanTimeoutMs), maxTimeoutMs-3_600_000)
	}
	pm := PlanMeta{ID: t.ID, Version: t.Version, Name: t.Name, Steps: len(in.Steps), Staleness: t.Staleness}
	if m := in.Match; m != nil {
		pm.Match = &MatchMeta{Score: m.Score, Hits: m.Hits, Domain: m.Domain}
	}
	return marshal(struct {
		Description string         `json:"description"`
		TimeoutMs   int64          `json:"timeoutMs"`
		Tools       []toolDoc      `json:"tools"`
		Metadata    map[string]any `json:"metadata"`
	}{t.Name, timeout, tools, map[string]any{"template": pm}})
}

// marshal is json.Marshal without HTML escaping, so that inputs such as
// "a && b" or "<token>" read as they were written.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// maxTimeoutMs is the largest timeout Plan JSON accepts (a day).
const maxTimeoutMs = 86_400_000

// stepBudget is the longest a step can take: every attempt to its timeout
// and every backoff between them.
func stepBudget(s *Step) int64 {
	per := s.TimeoutMs
	if per == 0 {
		per = plan.DefaultToolTimeoutMs
	}
	n := int64(s.OnFail.Attempts())
	budget := min(per*n, maxTimeoutMs)
	delay := s.OnFail.backoff()
	for i := 1; i < int(n) && budget < maxTimeoutMs; i++ {
		budget += delay
		delay = min(delay*2, maxTimeoutMs)
	}
	return min(budget, maxTimeoutMs)
}

func inputOrEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return json.RawMessage(`{}`)
	}
	return in
}

// checkPlan makes sure the template, placeholders left as they are, is a
// valid plan, and that each fallback step's input references only what the
// step it replaces may reference.
func (t *Template) checkPlan() error {
	// Fallback steps first, so their errors name them.
	for i, s := range t.Steps {
		if s.OnFail.Step == "" {
			continue
		}
		fb := t.Fallbacks[t.fallback[s.OnFail.Step]]
		type bareTool struct {
			ToolID       string          `json:"toolId"`
			Skill        string          `json:"skill"`
			Input        json.RawMessage `json:"input"`
			Dependencies []string        `json:"dependencies"`
		}
		tools := make([]bareTool, len(t.Steps))
		for j, o := range t.Steps {
			tools[j] = bareTool{o.ID, o.planSkill(), inputOrEmpty(o.Input), t.deps[j]}
		}
		tools[i].Skill, tools[i].Input = fb.Skill, inputOrEmpty(fb.Input)
		doc, err := json.Marshal(map[string]any{"tools": tools})
		if err == nil {
			_, err = plan.Decode(doc)
		}
		if err != nil {
			return t.stepErr(stepAt{&t.Fallbacks[t.fallback[fb.ID]], true}, "input", err,
				fmt.Sprintf("in place of step %q: %s", s.ID, planMessage(err)))
		}
	}
	in := &Instance{Template: t, Steps: t.Steps, Fallbacks: t.Fallbacks}
	doc, err := in.planDoc()
	if err != nil {
		return t.err("", err, err.Error())
	}
	if _, err := plan.Decode(doc); err != nil {
		return t.err("", err, "as a plan: "+planMessage(err))
	}
	return nil
}

func planMessage(err error) string {
	var pe *plan.Error
	if errors.As(err, &pe) {
		return pe.Msg
	}
	return err.Error()
}

// FallbackPlan returns the template a failed templated plan falls back to:
// the onFail plan of the first of failedTools (an execution result's
// failedTools) that names one, directly or through its fallback step. The
// planner uses it to choose the template of its next attempt.
func FallbackPlan(p *plan.Plan, failedTools []string) (string, bool) {
	for _, id := range failedTools {
		for _, t := range p.Tools {
			if t.ToolID != id {
				continue
			}
			m, err := ParseToolMeta(t.Metadata)
			if err != nil || m == nil {
				continue
			}
			if m.OnFail.Plan != "" {
				return m.OnFail.Plan, true
			}
			if m.Fallback != nil && m.Fallback.OnFail.Plan != "" {
				return m.Fallback.OnFail.Plan, true
			}
		}
	}
	return "", false
}

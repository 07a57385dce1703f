package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/planbus/planbus/internal/dag"
	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/templates/placeholder"
	"github.com/planbus/planbus/schemas"
)

// SchemaName is the library's JSON Schema in package schemas.
const SchemaName = "template-library.schema.json"

// DefaultMaxTurns is a template's staleness.maxTurns when it gives none:
// an instance expires once it has gone more than ten turns without
// progress.
const DefaultMaxTurns = 10

// DefaultTriggerThreshold is how many different triggers a template needs
// when it does not say: two, so that one common word does not start a
// plan. A template that can start on one trigger says triggerThreshold 1.
const DefaultTriggerThreshold = 2

// InputVar is the variable that holds the request's text. Every template
// has it; its default is "".
const InputVar = "input"

// ErrInvalid is matched by every error Decode returns.
var ErrInvalid = errors.New("templates: invalid library")

// Error says what is wrong with a library and where: the template, the
// step and the field.
type Error struct {
	Template string // the template's id, if known
	Step     string // the step's id, if the problem is in a step
	Fallback bool   // Step is one of the template's fallbacks
	Field    string // e.g. "onFail.step", "verify.pattern", "input/argv/1"
	Msg      string
	Err      error // the underlying *schemas.Error, gate error, ... if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("templates: ")
	if e.Template != "" {
		fmt.Fprintf(&b, "template %q: ", e.Template)
	}
	if e.Step != "" {
		if e.Fallback {
			b.WriteString("fallback ")
		}
		fmt.Fprintf(&b, "step %q: ", e.Step)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func (e *Error) Unwrap() error { return e.Err }

// Library is a decoded, checked plan library. It is immutable after
// Decode and safe for concurrent use.
type Library struct {
	Version     string      `json:"version"`
	Description string      `json:"description,omitempty"`
	Plans       []*Template `json:"plans"`

	byID  map[string]*Template
	keyed bool // read from the keyed format
}

// Keyed reports whether the library was written in the keyed format.
func (l *Library) Keyed() bool { return l.keyed }

// Template returns the template with the given id.
func (l *Library) Template(id string) (*Template, bool) {
	t, ok := l.byID[id]
	return t, ok
}

// Template is one plan of the library: how to recognise a request for it
// (domains, triggers), the variables its steps use, and the steps.
type Template struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"` // default: the library's version
	Name    string `json:"name"`
	// Description says what the plan does and what it needs, e.g. the
	// programs its shell steps run.
	Description string `json:"description,omitempty"`
	// Domains the template serves. A request matches a template that
	// lists domains only if its domain is one of them; a template that
	// lists none serves every request, with a domain or without.
	Domains []string `json:"domains,omitempty"`
	// Triggers are phrases matched against the request's text, whole
	// words, any case; a word ending in '*' matches any word it begins.
	Triggers []string `json:"triggers,omitempty"`
	// TriggerThreshold is how many different triggers must match; default
	// DefaultTriggerThreshold (2).
	TriggerThreshold int `json:"triggerThreshold,omitempty"`
	// Captures are RE2 patterns whose named groups, matched against the
	// request's text, give values to variables.
	Captures []string `json:"captures,omitempty"`
	// Vars declares the variables the steps use, besides input.
	Vars map[string]Var `json:"vars,omitempty"`
	// Staleness says when an instance that makes no progress expires.
	Staleness Staleness `json:"staleness"`
	// TimeoutMs is the plan's timeout; default: the sum of its steps'
	// timeouts over all their attempts, at least a minute.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Steps run in order, each after the one before it unless it lists
	// its own After.
	Steps []Step `json:"steps"`
	// Fallbacks are steps that run only in place of a failed step whose
	// onFail names them.
	Fallbacks []Step `json:"fallbacks,omitempty"`

	keyed    bool // read from the keyed format: field names in errors
	triggers [][]token
	captures []*regexp.Regexp
	deps     [][]string // per step, the steps it runs after
	steps    map[string]int
	fallback map[string]int
}

// UnmarshalJSON fills the defaults of absent fields.
func (t *Template) UnmarshalJSON(b []byte) error {
	type plain Template
	p := plain{Staleness: Staleness{MaxTurns: DefaultMaxTurns}}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = Template(p)
	return nil
}

// Var is a variable a template's steps use as {name}.
type Var struct {
	Description string `json:"description,omitempty"`
	// Default is the value when neither the request nor a capture gives
	// one; without it the variable is required.
	Default *string `json:"default,omitempty"`
	// Pattern is an RE2 pattern the whole value must match. Give one for
	// every variable that reaches a program's argv.
	Pattern string `json:"pattern,omitempty"`

	re *regexp.Regexp
}

// Step is one tool call of a template.
type Step struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Action string `json:"action,omitempty"` // what the step does, for people
	// Skill runs the step; "" for a manual step (keyed format, no tool).
	Skill string `json:"skill"`
	// Hint is the command hint a guided session shows the agent for the
	// step, with {var} placeholders; default: the shell skill's argv, or
	// the skill and its input.
	Hint string `json:"hint,omitempty"`
	// Input is the tool's input: a JSON object whose strings (and keys)
	// may hold {var} placeholders and which may hold {"$ref": "step#/ptr"}
	// references to earlier steps' outputs.
	Input json.RawMessage `json:"input,omitempty"`
	// After lists the steps this one runs after. nil means the step
	// before it (none for the first); an empty list makes it a root.
	After     []string   `json:"after,omitempty"`
	TimeoutMs int64      `json:"timeoutMs,omitempty"`
	Verify    *gate.Gate `json:"verify,omitempty"`
	OnFail    OnFail     `json:"onFail"`
	// Check is the step's verification in the keyed format, which a
	// guided session checks instead of Verify (its gate in a plan).
	Check *Check `json:"-"`
	// Approval makes the step's tool wait for a person before it runs;
	// its prompt may hold {var} placeholders.
	Approval *plan.Approval `json:"approval,omitempty"`
}

// UnmarshalJSON gives a step without onFail DefaultOnFail.
func (s *Step) UnmarshalJSON(b []byte) error {
	type plain Step
	p := plain{OnFail: DefaultOnFail()}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = Step(p)
	return nil
}

// ManualSkill is the skill an executed plan runs for a manual step (one
// that names no tool; see Step.Manual), once a person approves it: echo,
// which records the step's input as its output.
const ManualSkill = "echo"

// Manual reports whether the step names no tool, which the keyed format
// allows: in a guided session the agent is told what to do, with no Tool
// line, and its next result is checked as for any step; in an executed
// plan the step's tool waits for a person's approval (Approval) and runs
// ManualSkill.
func (s *Step) Manual() bool { return s.Skill == "" }

// planSkill is the skill that runs the step in a plan.
func (s *Step) planSkill() string {
	if s.Manual() {
		return ManualSkill
	}
	return s.Skill
}

// Title is the step's name, or its id.
func (s *Step) Title() string {
	if s.Name != "" {
		return s.Name
	}
	return s.ID
}

// Decode parses and checks a plan library: the schema, then unique ids,
// step order (after lists, no cycles), onFail targets, regular
// expressions, gate expressions, variables and their placeholders, and
// that each template makes a valid plan. Every error is an *Error matching
// ErrInvalid.
//
// ReadFile reads the library in the file at path (Decode); an error names
// the file.
func ReadFile(path string) (*Library, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l, err := Decode(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// A library is in one of two formats: the list format (schema SchemaName:
// version, plans an array of templates with ids, camelCase fields) or the
// keyed format (schema KeyedSchemaName: _meta, plans an object keyed by
// plan id, snake_case fields, steps for an agent that runs its tools). A
// document whose plans are an object is read in the keyed format.
func Decode(doc []byte) (*Library, error) {
	var l *Library
	if isKeyed(doc) {
		var err error
		if l, err = decodeKeyed(doc); err != nil {
			return nil, err
		}
	} else {
		if err := schemas.Validate(SchemaName, doc); err != nil {
			return nil, schemaError(doc, err)
		}
		l = &Library{}
		if err := json.Unmarshal(doc, l); err != nil {
			return nil, &Error{Msg: err.Error(), Err: err}
		}
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return l, nil
}

// schemaError names the template of the first issue when it is in one.
func schemaError(doc []byte, err error) error {
	e := &Error{Msg: err.Error(), Err: err}
	var se *schemas.Error
	if !errors.As(err, &se) || len(se.Issues) == 0 {
		return e
	}
	rest, ok := strings.CutPrefix(se.Issues[0], "at /plans/")
	if !ok {
		return e
	}
	n, _, _ := strings.Cut(rest, "/")
	n, _, _ = strings.Cut(n, ":")
	if se.Schema == KeyedSchemaName {
		if validTemplateID(n) {
			e.Template = n
		}
		return e
	}
	i, convErr := strconv.Atoi(n)
	var ids struct {
		Plans []struct {
			ID string `json:"id"`
		} `json:"plans"`
	}
	if convErr == nil && json.Unmarshal(doc, &ids) == nil && i < len(ids.Plans) && validTemplateID(ids.Plans[i].ID) {
		e.Template = ids.Plans[i].ID
	}
	return e
}

func validTemplateID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (l *Library) check() error {
	l.byID = make(map[string]*Template, len(l.Plans))
	for i, t := range l.Plans {
		if t == nil {
			return &Error{Field: fmt.Sprintf("plans/%d", i), Msg: "null instead of a plan"}
		}
		if _, dup := l.byID[t.ID]; dup {
			return &Error{Template: t.ID, Field: "id", Msg: fmt.Sprintf("plan #%d repeats the id of an earlier plan", i)}
		}
		l.byID[t.ID] = t
		if t.Version == "" {
			t.Version = l.Version
		}
		if err := t.prepare(); err != nil {
			return err
		}
	}
	for _, t := range l.Plans {
		for _, s := range t.allSteps() {
			if p := s.step.OnFail.Plan; p != "" {
				if p == t.ID {
					return t.stepErr(s, "onFail.plan", nil, "a template cannot fall back to itself")
				}
				if _, ok := l.byID[p]; !ok {
					return t.stepErr(s, "onFail.plan", nil, fmt.Sprintf("no plan %q in the library", p))
				}
			}
		}
		if err := t.checkPlan(); err != nil {
			return err
		}
	}
	return nil
}

// stepAt is a step with where it is.
type stepAt struct {
	step     *Step
	fallback bool
}

func (t *Template) allSteps() []stepAt {
	out := make([]stepAt, 0, len(t.Steps)+len(t.Fallbacks))
	for i := range t.Steps {
		out = append(out, stepAt{&t.Steps[i], false})
	}
	for i := range t.Fallbacks {
		out = append(out, stepAt{&t.Fallbacks[i], true})
	}
	return out
}

func (t *Template) err(field string, err error, msg string) *Error {
	return &Error{Template: t.ID, Field: field, Msg: msg, Err: err}
}

func (t *Template) stepErr(s stepAt, field string, err error, msg string) *Error {
	return &Error{Template: t.ID, Step: s.step.ID, Fallback: s.fallback, Field: field, Msg: msg, Err: err}
}

// prepare checks one template on its own and compiles what it needs, in
// the order a reader of the template meets its parts: the trigger
// threshold, triggers, variables, captures, steps, and the steps' order.
// It returns the first *Error found.
func (t *Template) prepare() error {
	for _, step := range []func() error{t.prepareThreshold, t.prepareTriggers, t.prepareVars, t.prepareCaptures,
		t.indexSteps, t.checkSteps, t.prepareDeps} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// prepareThreshold fills in the default trigger threshold and checks that
// the triggers can reach it: a threshold above the number of triggers
// would never match a request.
func (t *Template) prepareThreshold() error {
	field := "triggerThreshold"
	if t.keyed {
		field = "trigger_threshold"
	}
	if t.TriggerThreshold == 0 {
		t.TriggerThreshold = DefaultTriggerThreshold
		if n := len(t.Triggers); n > 0 && n < t.TriggerThreshold {
			return t.err(field, nil, fmt.Sprintf("the default is %d, but the plan has only %d trigger%s, so no text would ever match it: give %s %d or more triggers",
				t.TriggerThreshold, n, plural(n), field, n))
		}
	}
	if len(t.Triggers) > 0 && t.TriggerThreshold > len(t.Triggers) {
		return t.err(field, nil, fmt.Sprintf("%d, but the plan has only %d triggers", t.TriggerThreshold, len(t.Triggers)))
	}
	return nil
}

// prepareTriggers tokenizes the triggers. A trigger with no words, or one
// that is another's phrase again, would count twice or never, so each is
// an error.
func (t *Template) prepareTriggers() error {
	t.triggers = make([][]token, len(t.Triggers))
	seen := map[string]int{}
	for i, tr := range t.Triggers {
		toks := tokenizeTrigger(tr)
		if len(toks) == 0 {
			return t.err(fmt.Sprintf("triggers/%d", i), nil, fmt.Sprintf("%q has no words", tr))
		}
		key := tokensKey(toks)
		if j, dup := seen[key]; dup {
			return t.err(fmt.Sprintf("triggers/%d", i), nil, fmt.Sprintf("%q is the same phrase as trigger %q", tr, t.Triggers[j]))
		}
		seen[key] = i
		t.triggers[i] = toks
	}
	return nil
}

// prepareVars compiles the variables' patterns, anchored to the whole
// value, and checks their defaults, in the variables' name order so that
// the error reported is always the same one. input cannot be declared:
// it is the request's text.
func (t *Template) prepareVars() error {
	for _, name := range slices.Sorted(maps.Keys(t.Vars)) {
		v := t.Vars[name]
		field := "vars/" + name
		if name == InputVar {
			return t.err(field, nil, "input is the request's text and cannot be declared")
		}
		if v.Pattern != "" {
			re, err := regexp.Compile(`^(?:` + v.Pattern + `)$`)
			if err != nil {
				return t.err(field+"/pattern", err, err.Error())
			}
			v.re = re
		}
		if v.Default != nil {
			if v.re != nil && !v.re.MatchString(*v.Default) {
				return t.err(field+"/default", nil, fmt.Sprintf("%q does not match the pattern %s", *v.Default, v.Pattern))
			}
			if ph := placeholder.Names(*v.Default); len(ph) > 0 {
				return t.err(field+"/default", nil, fmt.Sprintf("a default cannot use placeholders ({%s})", ph[0]))
			}
		}
		t.Vars[name] = v
	}
	return nil
}

// prepareCaptures compiles the captures. Each must capture something, so
// it needs a named group, and every group must name a declared variable.
func (t *Template) prepareCaptures() error {
	t.captures = make([]*regexp.Regexp, len(t.Captures))
	for i, c := range t.Captures {
		field := fmt.Sprintf("captures/%d", i)
		re, err := regexp.Compile(c)
		if err != nil {
			return t.err(field, err, err.Error())
		}
		named := 0
		for _, g := range re.SubexpNames() {
			if g == "" {
				continue
			}
			if _, ok := t.Vars[g]; !ok {
				return t.err(field, nil, fmt.Sprintf("group %q is not a declared variable", g))
			}
			named++
		}
		if named == 0 {
			return t.err(field, nil, "no named group (?P<var>...) to capture a variable")
		}
		t.captures[i] = re
	}
	return nil
}

// indexSteps numbers the steps and the fallbacks, each in its own list;
// an id may appear once across both, since onFail and after name steps
// by id alone.
func (t *Template) indexSteps() error {
	t.steps = make(map[string]int, len(t.Steps))
	t.fallback = make(map[string]int, len(t.Fallbacks))
	for _, s := range t.allSteps() {
		_, a := t.steps[s.step.ID]
		_, b := t.fallback[s.step.ID]
		if a || b {
			return t.stepErr(s, "id", nil, "repeats the id of an earlier step")
		}
		if s.fallback {
			t.fallback[s.step.ID] = len(t.fallback)
		} else {
			t.steps[s.step.ID] = len(t.steps)
		}
	}
	return nil
}

// checkSteps checks each step and fallback (checkStep), then that every
// fallback is one some step's onFail names: one that is not would never
// run.
func (t *Template) checkSteps() error {
	used := map[string]bool{}
	for _, s := range t.allSteps() {
		if err := t.checkStep(s); err != nil {
			return err
		}
		if !s.fallback && s.step.OnFail.Step != "" {
			used[s.step.OnFail.Step] = true
		}
	}
	for _, f := range t.Fallbacks {
		if !used[f.ID] {
			return t.stepErr(stepAt{&f, true}, "", nil, "no step's onFail falls back to it")
		}
	}
	return nil
}

// prepareDeps works out what each step runs after, its own after or else
// the step before it, and checks that this order has no cycle.
func (t *Template) prepareDeps() error {
	t.deps = make([][]string, len(t.Steps))
	nodes := make([]dag.Node, len(t.Steps))
	for i, s := range t.Steps {
		switch {
		case s.After != nil:
			t.deps[i] = s.After
		case i > 0:
			t.deps[i] = []string{t.Steps[i-1].ID}
		default:
			t.deps[i] = []string{}
		}
		nodes[i] = dag.Node{ID: s.ID, Deps: t.deps[i]}
	}
	if _, err := dag.New(nodes); err != nil {
		return t.err("steps", err, "after: "+err.Error()+" (each step runs after the next)")
	}
	return nil
}

// checkStep checks a step's placeholders, after list, gate and onFail.
func (t *Template) checkStep(s stepAt) error {
	st := s.step
	declared := func(field, text string) error {
		for _, name := range placeholder.Names(text) {
			if _, ok := t.Vars[name]; !ok && name != InputVar {
				return t.stepErr(s, field, nil, fmt.Sprintf("{%s} is not a declared variable (declare it in vars; {{ and }} write literal braces)", name))
			}
		}
		return nil
	}
	if err := declared("name", st.Name); err != nil {
		return err
	}
	if err := declared("action", st.Action); err != nil {
		return err
	}
	if err := declared("hint", st.Hint); err != nil {
		return err
	}
	if st.Approval != nil {
		if err := declared("approval.prompt", st.Approval.Prompt); err != nil {
			return err
		}
	}
	if len(st.Input) > 0 {
		in, err := decodeJSON(st.Input)
		if err != nil {
			return t.stepErr(s, "input", err, err.Error())
		}
		var first error
		placeholder.Strings(in, func(at, text string) {
			if first == nil {
				first = declared("input"+at, text)
			}
		})
		if first != nil {
			return first
		}
	}
	if st.Verify != nil {
		if err := st.Verify.Compile(); err != nil {
			return t.stepErr(s, "verify", err, strings.TrimPrefix(err.Error(), gate.ErrInvalid.Error()+": "))
		}
		var first error
		walkGates(st.Verify, "verify", func(field string, g *gate.Gate) {
			if v, ok := g.Value.(string); ok && first == nil {
				first = declared(field+".value", v)
			}
		})
		if first != nil {
			return first
		}
	}
	if err := st.OnFail.check(); err != nil {
		return t.stepErr(s, "onFail", err, err.Error())
	}
	if st.OnFail.Step != "" {
		if s.fallback {
			return t.stepErr(s, "onFail.step", nil, "a fallback step cannot fall back to another step (it may fall back to a plan)")
		}
		if _, ok := t.fallback[st.OnFail.Step]; !ok {
			msg := fmt.Sprintf("no fallback step %q (list it under the template's fallbacks)", st.OnFail.Step)
			if _, isMain := t.steps[st.OnFail.Step]; isMain {
				msg = fmt.Sprintf("%q is a main step; a fallback step must be listed under the template's fallbacks", st.OnFail.Step)
			}
			return t.stepErr(s, "onFail.step", nil, msg)
		}
	}
	if s.fallback && st.After != nil {
		return t.stepErr(s, "after", nil, "a fallback step runs after what the step it replaces runs after; it takes no after list")
	}
	for i, a := range st.After {
		field := fmt.Sprintf("after/%d", i)
		switch _, ok := t.steps[a]; {
		case a == st.ID:
			return t.stepErr(s, field, nil, "a step cannot run after itself")
		case !ok:
			if _, fb := t.fallback[a]; fb {
				return t.stepErr(s, field, nil, fmt.Sprintf("%q is a fallback step; run after the step it replaces", a))
			}
			return t.stepErr(s, field, nil, fmt.Sprintf("no step %q", a))
		case slices.Index(st.After, a) < i:
			return t.stepErr(s, field, nil, fmt.Sprintf("%q is listed twice", a))
		}
	}
	return nil
}

// walkGates calls f on g and every gate nested in it.
func walkGates(g *gate.Gate, field string, f func(field string, g *gate.Gate)) {
	if g == nil {
		return
	}
	f(field, g)
	for i, sub := range g.Gates {
		walkGates(sub, fmt.Sprintf("%s.gates/%d", field, i), f)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

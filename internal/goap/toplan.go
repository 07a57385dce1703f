package goap

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/wire"
)

// Metadata is what ToPlan records under the plan's metadata key "goap".
type Metadata struct {
	Domain string         `json:"domain"`
	Goal   string         `json:"goal"`
	Cost   float64        `json:"cost"`
	Start  State          `json:"start"`
	Steps  []StepMetadata `json:"steps"`
}

// StepMetadata is one step of Metadata.
type StepMetadata struct {
	Tool   string  `json:"tool"`
	Action string  `json:"action"`
	Cost   float64 `json:"cost"`
	// State is the predicted state after the step.
	State State `json:"state"`
}

// ToolID is the toolId ToPlan gives step i (0-based) of a plan: "1-chop".
func ToolID(i int, action string) string { return strconv.Itoa(i+1) + "-" + action }

// ToPlan turns a plan result into Plan JSON: one tool per step, each
// depending on the one before (the steps' predicted states follow each
// other), with the action's skill, its expanded input and, as
// description, the action's description or name. The plan's metadata
// holds a Metadata under "goap". The plan is checked (plan.Plan.Check)
// and is the one plan.Decode gives of its JSON, metadata byte for byte;
// an error (*PlanJSONError) means a result that did not come from Plan.
//
// It builds the plan's values directly: writing the document and decoding
// it back cost 40 µs for a plan of 4 steps. A result it cannot vouch for
// that way (an input that is not compact JSON, a state value of a type
// other than bool, float64 and string, a name a plan does not take) goes
// through the JSON, which says what is wrong.
func ToPlan(r *Result) (*plan.Plan, error) {
	p, ok := toPlanDirect(r)
	if !ok {
		return toPlanJSON(r)
	}
	return checked(p, r.Goal)
}

// ToPlan is ToPlan(s.Result()) without building the Result: the steps'
// inputs and predicted states go straight into the plan, the states
// written from the state vectors rather than maps.
func (s *Solution) ToPlan() (*plan.Plan, error) {
	p, ok := s.toPlanDirect()
	if !ok {
		return toPlanJSON(s.Result())
	}
	return checked(p, s.prob.goal.Name)
}

// PlanJSON is ToPlan(Plan(ctx, d, s, goal, opts)) without the Result in
// between, what the planner service does per request. Errors are Plan's,
// or a *PlanJSONError as ToPlan's.
func PlanJSON(ctx context.Context, d *Domain, s State, goal string, opts Options) (*plan.Plan, error) {
	var out *plan.Plan
	err := d.withPlanner(func(p *Planner) error {
		sol, err := p.Search(ctx, s, goal, opts)
		if err != nil {
			return err
		}
		out, err = sol.ToPlan()
		return err
	})
	return out, err
}

// toPlanJSON is ToPlan by way of the document: it is written with
// encoding/json and decoded with plan.Decode.
func toPlanJSON(r *Result) (*plan.Plan, error) {
	type tool struct {
		ToolID       string          `json:"toolId"`
		Skill        string          `json:"skill"`
		Description  string          `json:"description"`
		Input        json.RawMessage `json:"input"`
		Dependencies []string        `json:"dependencies"`
	}
	meta := Metadata{Domain: r.Domain, Goal: r.Goal, Cost: r.Cost, Start: r.Start, Steps: []StepMetadata{}}
	tools := []tool{}
	prev := ""
	for i, s := range r.Steps {
		id := ToolID(i, s.Action)
		deps := []string{}
		if prev != "" {
			deps = append(deps, prev)
		}
		input := s.Input
		if input == nil {
			input = json.RawMessage(`{}`)
		}
		tools = append(tools, tool{ToolID: id, Skill: s.Skill, Description: s.Description, Input: input, Dependencies: deps})
		meta.Steps = append(meta.Steps, StepMetadata{Tool: id, Action: s.Action, Cost: s.Cost, State: s.State})
		prev = id
	}
	doc, err := json.Marshal(map[string]any{
		"description": planDescription(r.Domain, r.Goal),
		"tools":       tools,
		"metadata":    map[string]any{"goap": meta},
	})
	if err != nil {
		return nil, &PlanJSONError{Goal: r.Goal, Err: err}
	}
	p, err := plan.Decode(doc)
	if err != nil {
		return nil, &PlanJSONError{Goal: r.Goal, Err: err}
	}
	return p, nil
}

func planDescription(domain, goal string) string { return "goap " + domain + ": goal " + goal }

func checked(p *plan.Plan, goal string) (*plan.Plan, error) {
	if err := p.Check(); err != nil {
		return nil, &PlanJSONError{Goal: goal, Err: err}
	}
	return p, nil
}

// The direct way. The plan is the one plan.Decode gives of the document
// toPlanJSON writes: the defaults of what the document leaves out, every
// string as it was (they are valid UTF-8, which the JSON keeps), each
// input byte for byte (it is compact JSON with <, >, & and U+2028/9
// escaped, as encoding/json writes a json.RawMessage) and the metadata as
// encoding/json writes it: struct fields in order, map members sorted by
// name, numbers in its format, strings with its escapes. Anything else
// declines (ok false), for toPlanJSON to handle or refuse.

// planBuilder collects the tools and the metadata document of a plan.
// It writes the metadata in scratch space and copies the inputs the plan
// takes a copy of last, so that plan() allocates their bytes once, to
// the byte: a plan is few allocations (the description and the toolIds
// share a string too) and none larger than it needs.
type planBuilder struct {
	desc  string // the plan's description
	ids   []string
	tools []plan.Tool
	// copies is how many bytes of inputs plan() copies: those of the tools
	// copy marks, whose Input is until then the one to copy.
	copies int
	buffers
}

// buffers is a planBuilder's scratch space, which a Planner keeps for its
// next plan.
type buffers struct {
	copy []bool
	meta []byte
}

// newPlanBuilder starts the plan of a result with n steps, named by
// action(i), in the scratch space bufs, and writes the metadata up to the
// start state.
func newPlanBuilder(n int, action func(i int) string, domain, goal string, cost float64, bufs buffers) (planBuilder, bool) {
	if n > plan.MaxTools || !utf8.ValidString(domain) || !utf8.ValidString(goal) || !finite(cost) {
		return planBuilder{}, false
	}
	b := planBuilder{ids: make([]string, n), tools: make([]plan.Tool, n), buffers: bufs}
	b.copy = slices.Grow(b.copy[:0], n)[:n]
	desc := planDescription(domain, goal)
	textBytes := len(desc)
	for i := range n {
		textBytes += len(action(i)) + 7
	}
	var all strings.Builder
	all.Grow(textBytes)
	all.WriteString(desc)
	var num [20]byte
	for i := range n {
		all.Write(strconv.AppendInt(num[:0], int64(i+1), 10))
		all.WriteByte('-')
		all.WriteString(action(i))
	}
	text := all.String() // one string for the description and every toolId
	b.desc, text = text[:len(desc)], text[len(desc):]
	for i := range n {
		end := len(strconv.Itoa(i+1)) + 1 + len(action(i))
		b.ids[i], text = text[:end], text[end:]
	}
	m := append(b.meta[:0], `{"goap":{"domain":`...)
	m = wire.AppendString(m, domain)
	m = append(m, `,"goal":`...)
	m = wire.AppendString(m, goal)
	m = append(m, `,"cost":`...)
	m = appendFloat(m, cost)
	m = append(m, `,"start":`...)
	b.meta = m
	return b, true
}

// The inputs tool takes.
const (
	foreign  = iota // from a Result: held to what encoding/json would write
	rendered        // Action.render's, the plan's own
	static          // an Action's static input: the plan takes a copy
)

// tool sets tool i, depending on tool i-1, and writes the head of its
// step's metadata, up to its state.
func (b *planBuilder) tool(i int, action, skill, desc string, input json.RawMessage, from int, cost float64) bool {
	id := b.ids[i]
	if !wire.IsToolID(id) || !wire.IsSkill(skill) || !utf8.ValidString(desc) || !finite(cost) {
		return false
	}
	b.copy[i] = false
	switch {
	case input == nil:
		input = json.RawMessage(`{}`)
	case from == foreign && !compactObject(input):
		return false
	case from != rendered:
		b.copy[i] = true
		b.copies += len(input)
	}
	deps := b.ids[:0:0]
	if i > 0 {
		deps = b.ids[i-1 : i : i]
	}
	// Field by field: the Tool is zero, and a composite literal is
	// copied in whole, with a write barrier for every word while the
	// collector runs.
	t := &b.tools[i]
	t.ToolID, t.Skill, t.Description, t.Input, t.Dependencies = id, skill, desc, input, deps
	t.Required, t.Async, t.TimeoutMs = true, true, plan.DefaultToolTimeoutMs
	t.RetryPolicy = plan.RetryPolicy{MaxAttempts: plan.DefaultMaxAttempts, BackoffMs: plan.DefaultBackoffMs}
	m := b.meta
	if i == 0 {
		m = append(m, `,"steps":[`...)
	} else {
		m = append(m, ',')
	}
	m = append(m, `{"tool":`...)
	m = wire.AppendString(m, id)
	m = append(m, `,"action":`...)
	m = wire.AppendString(m, action)
	m = append(m, `,"cost":`...)
	m = appendFloat(m, cost)
	b.meta = append(m, `,"state":`...)
	return true
}

// plan finishes the metadata and returns the plan, unchecked: the
// metadata and the inputs copied are one array. The scratch space is in
// b.buffers again.
func (b *planBuilder) plan() *plan.Plan {
	if len(b.tools) == 0 {
		b.meta = append(b.meta, `,"steps":[`...)
	}
	b.meta = append(b.meta, "]}}"...)
	all := make([]byte, len(b.meta)+b.copies)
	n := copy(all, b.meta)
	meta := all[:n:n]
	for i := range b.tools {
		if b.copy[i] {
			t := &b.tools[i]
			at := n
			n += copy(all[n:], t.Input)
			t.Input = all[at:n:n]
		}
	}
	if cap(b.meta) > keepBytes { // a plan of very many steps: not kept
		b.meta = nil
	}
	return &plan.Plan{Description: b.desc, Parallel: true, TimeoutMs: plan.DefaultPlanTimeoutMs,
		Tools: b.tools, Metadata: meta}
}

func toPlanDirect(r *Result) (*plan.Plan, bool) {
	b, ok := newPlanBuilder(len(r.Steps), func(i int) string { return r.Steps[i].Action }, r.Domain, r.Goal, r.Cost, buffers{})
	if !ok {
		return nil, false
	}
	var names []string
	if b.meta, ok = appendState(b.meta, r.Start, &names); !ok {
		return nil, false
	}
	for i := range r.Steps {
		s := &r.Steps[i]
		if !b.tool(i, s.Action, s.Skill, s.Description, s.Input, foreign, s.Cost) {
			return nil, false
		}
		if b.meta, ok = appendState(b.meta, s.State, &names); !ok {
			return nil, false
		}
		b.meta = append(b.meta, '}')
	}
	return b.plan(), true
}

// toPlanDirect replays the solution as Result does: each step's input is
// rendered in the state before it, its effects then applied; the state
// after it holds the facts present at the start and those an effect set
// so far, as the Result's maps do.
//
// A state is written from the one before it: a step changes the facts of
// its effects and no other, so the state after it is the state before
// with those facts' members written anew and the runs of members between
// them copied (p.memb holds each fact's member length in the state
// before). A maze plan of 26 states of 35 facts was 910 members written
// one by one.
func (s *Solution) toPlanDirect() (*plan.Plan, bool) {
	p, d := s.p, s.p.d
	n := len(d.Facts)
	facts := d.statesJSON()
	p.replay = append(p.replay[:0], p.start[:n]...)
	p.memb = slices.Grow(p.memb[:0], n)[:n]
	v, memb := p.replay, p.memb
	b, ok := newPlanBuilder(s.Len(), func(i int) string { return s.Action(i).Name }, d.Name, s.prob.goal.Name, s.cost, p.bufs)
	if !ok {
		return nil, false
	}
	prev := len(b.meta)
	if b.meta, ok = appendVector(b.meta, facts, v, memb); !ok {
		return nil, false
	}
	for i := range s.Len() {
		a := s.Action(i)
		desc := a.Description
		if desc == "" {
			desc = a.Name
		}
		input, from := a.static, static
		if input == nil {
			input, from = a.render(d, v), rendered
		}
		if !b.tool(i, a.Name, a.Skill, desc, input, from, s.StepCost(i)) {
			return nil, false
		}
		changed := p.changed[:0]
		for k := range a.Effects {
			e := &a.Effects[k]
			e.apply(v)
			changed = append(changed, int32(e.fact))
		}
		slices.Sort(changed)
		p.changed = slices.Compact(changed)
		at := len(b.meta)
		if b.meta, ok = appendNext(b.meta, prev, facts, v, memb, p.changed); !ok {
			return nil, false
		}
		prev = at
		b.meta = append(b.meta, '}')
	}
	pl := b.plan()
	p.bufs = b.buffers
	return pl, true
}

// factJSON is a fact as a member of a state object, after the comma
// before it: `,"wood":`, and with a bool's two values.
type factJSON struct{ name, yes, no []byte }

// statesJSON returns the domain's facts as members of state objects.
func (d *Domain) statesJSON() []factJSON {
	d.factsJSONOnce.Do(func() {
		d.factsJSON = make([]factJSON, len(d.Facts))
		for i := range d.Facts {
			name := wire.AppendString([]byte{','}, d.Facts[i].Name)
			name = append(name, ':')
			yes, no := append(name, "true"...), append(slices.Clip(name), "false"...)
			d.factsJSON[i] = factJSON{name: slices.Clip(name), yes: yes, no: no}
		}
	})
	return d.factsJSON
}

// appendMember writes fact f's member of a state object, with the comma
// before it, as encoding/json writes it. It declines a number that is not
// finite.
func appendMember(b []byte, f *factJSON, x *value) ([]byte, bool) {
	switch x.k {
	case kBool:
		if x.num != 0 {
			return append(b, f.yes...), true
		}
		return append(b, f.no...), true
	case kNumber:
		if !finite(x.num) {
			return b, false
		}
		return appendFloat(append(b, f.name...), x.num), true
	case kString:
		return wire.AppendString(append(b, f.name...), x.str), true
	}
	return append(append(b, f.name...), "null"...), true
}

// appendVector writes the facts present in v (those not absent) as a JSON
// object, as encoding/json writes the State the vector stands for (Facts
// are sorted by name), and sets memb[i] to the length of fact i's member,
// its comma included (0 for a fact not written). It declines a number
// that is not finite.
func appendVector(b []byte, facts []factJSON, v []value, memb []int32) ([]byte, bool) {
	at := len(b)
	for i := range facts {
		if v[i].k == absent {
			memb[i] = 0
			continue
		}
		m := len(b)
		var ok bool
		if b, ok = appendMember(b, &facts[i], &v[i]); !ok {
			return b, false
		}
		memb[i] = int32(len(b) - m)
	}
	return closeObject(b, at), true
}

// closeObject ends the state object whose members (each with a comma
// before it) start at b[at:].
func closeObject(b []byte, at int) []byte {
	if len(b) == at {
		return append(b, "{}"...)
	}
	b[at] = '{' // the first member's comma
	return append(b, '}')
}

// appendNext writes the state after a step, from the state before it,
// written at b[prev:] by appendVector or appendNext with memb its
// members' lengths: the facts in changed (ascending), which the step's
// effects set in v, are written anew and memb updated, the members
// between them copied. A fact an effect set is present from then on, as
// in the Result's maps.
func appendNext(b []byte, prev int, facts []factJSON, v []value, memb []int32, changed []int32) ([]byte, bool) {
	at := len(b)
	from, fact := prev, 0 // the next member of the state before to copy, and its fact
	run := func(to int) {
		if to > from {
			b = append(b, b[from:to]...)
			if from == prev { // the first member, whose comma is the object's '{'
				b[len(b)-(to-from)] = ','
			}
		}
	}
	for _, c := range changed {
		to := from
		for ; fact < int(c); fact++ {
			to += int(memb[fact])
		}
		run(to)
		fact, from = int(c)+1, to+int(memb[c]) // past c's member before, if it had one
		m := len(b)
		var ok bool
		if b, ok = appendMember(b, &facts[c], &v[c]); !ok {
			return b, false
		}
		memb[c] = int32(len(b) - m)
	}
	to := from
	for ; fact < len(facts); fact++ {
		to += int(memb[fact])
	}
	run(to)
	return closeObject(b, at), true
}

// appendState writes s as encoding/json does; names is scratch space. It
// declines a value it cannot write.
func appendState(b []byte, s State, names *[]string) ([]byte, bool) {
	if s == nil {
		return append(b, "null"...), true
	}
	ns := (*names)[:0]
	for n := range s {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	*names = ns
	b = append(b, '{')
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendString(b, n)
		b = append(b, ':')
		switch x := s[n].(type) {
		case bool:
			b = strconv.AppendBool(b, x)
		case float64:
			if !finite(x) {
				return b, false
			}
			b = appendFloat(b, x)
		case string:
			b = wire.AppendString(b, x)
		default:
			j, err := json.Marshal(x)
			if err != nil {
				return b, false
			}
			b = append(b, j...)
		}
	}
	return append(b, '}'), true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendFloat writes a finite f as encoding/json does.
func appendFloat(b []byte, f float64) []byte {
	if i := int64(f); float64(i) == f && i > -1<<53 && i < 1<<53 && (i != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, i, 10) // a whole number, as 'f' writes it
	}
	b, _ = wire.AppendFloat(b, f) // finite: no error
	return b
}

// compactObject reports whether raw is a JSON object as encoding/json
// writes a json.RawMessage, so that the document keeps it byte for byte:
// valid UTF-8, no space between tokens, and <, >, &, U+2028 and U+2029
// escaped.
func compactObject(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '{' || !utf8.Valid(raw) || !json.Valid(raw) {
		return false
	}
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
			return false
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

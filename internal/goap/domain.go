package goap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/expr-lang/expr"

	"github.com/planbus/planbus/internal/safeexpr"
	"github.com/planbus/planbus/schemas"
)

// SchemaName is the domain format's schema in package schemas.
const SchemaName = "goap-domain.schema.json"

// isFactName reports whether s is what a fact may be called, an
// expression variable: a letter or _ followed by up to 127 letters, digits
// or _ (ASCII), as `^[A-Za-z_][A-Za-z0-9_]{0,127}$` says. A loop rather
// than that regexp, whose compiled program (the repetition unrolled 127
// times) cost every command of the binary 1,400 allocations and 100 KB at
// start.
func isFactName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && (i == 0 || !('0' <= c && c <= '9')) {
			return false
		}
	}
	return true
}

// DefaultCooldown is a goal's cooldown when its document gives none.
const DefaultCooldown = 5 * time.Second

// Domain is a decoded, checked GOAP domain. Build one with Decode. A
// Domain is immutable (but for a pool of Planners that Plan borrows and
// gives back) and safe for concurrent use by any number of searches,
// arbiters and trackers.
type Domain struct {
	Name        string
	Description string
	Facts       []Fact    // sorted by name
	Derived     []Derived // sorted by name
	Actions     []*Action // in document order, which breaks ties between plans
	Goals       []*Goal   // in document order, which breaks ties between utilities

	// facts maps a name to its slot: an index in Facts, or len(Facts) + an
	// index in Derived. A state vector holds one value per slot.
	facts   map[string]int
	actions map[string]*Action
	goals   map[string]*Goal
	env     map[string]any // the facts' types, for compiling expressions

	// The string constants of the document (defaults, conditions, effects)
	// by number (from 1), so the search compares strings as numbers.
	strID map[string]uint64
	strs  []string
	defs  []value // the facts' defaults

	planners sync.Pool // of *Planner, for Plan

	// The facts as Solution.ToPlan writes them in states, made once.
	factsJSON     []factJSON
	factsJSONOnce sync.Once
}

// Fact is a declared fact.
type Fact struct {
	Name        string
	Type        Type
	Default     any // bool, float64 or string; nil: none, the fact may be absent
	Description string

	def value
}

// Derived is a derived fact: a named expression over the facts, which
// conditions, costs, utilities and validity tests read like a fact. No
// action sets it; it follows the facts it reads.
type Derived struct {
	Name        string
	Type        Type
	Expr        string
	Description string

	x *expression
}

// Action is something the planner may do: a tool call of Skill with Input.
type Action struct {
	Name          string
	Skill         string
	Description   string
	Input         json.RawMessage // as written, templates unexpanded; {} if none
	Preconditions []Condition     // sorted by fact, then comparison
	// Requires, if set, is a boolean expression that must hold too: the
	// form for preconditions with "or", such as "logs >= 2 || planks >= 4".
	Requires string
	Effects  []Effect // sorted by fact
	// Cost is the action's constant cost, or 0 when CostExpr is set.
	Cost float64
	// CostExpr is an expression cost, evaluated in the state the action
	// starts from.
	CostExpr string
	// MinCost is a lower bound of the cost: Cost itself, or the document's
	// minCost for an expression cost. The heuristic relies on it; a cost
	// expression that gives less is an error.
	MinCost float64

	cost     *expression
	requires *expression
	input    any             // Input decoded with json.Number
	static   json.RawMessage // the rendered input when it has no templates
}

// Goal is a world state worth reaching.
type Goal struct {
	Name        string
	Description string
	// Conditions are sorted by fact, then comparison. A goal without
	// conditions is never satisfied (an always applicable goal such as
	// explore): it stays eligible while valid, and its plan is the cheapest
	// single action that applies.
	Conditions []Condition
	// Utility is the goal's constant utility, or 0 when UtilityExpr is set.
	Utility     float64
	UtilityExpr string
	// Valid, if set, is a boolean expression; a goal is selected only
	// while it is true.
	Valid    string
	Cooldown time.Duration

	utility *expression
	valid   *expression
}

// Fact returns the declared fact with the given name; derived facts are
// in Derived.
func (d *Domain) Fact(name string) (Fact, bool) {
	i, ok := d.facts[name]
	if !ok || i >= len(d.Facts) {
		return Fact{}, false
	}
	return d.Facts[i], true
}

// slots is the length of a state vector: facts, then derived facts.
func (d *Domain) slots() int { return len(d.Facts) + len(d.Derived) }

// slotName names a slot of a state vector.
func (d *Domain) slotName(i int) string {
	if i < len(d.Facts) {
		return d.Facts[i].Name
	}
	return d.Derived[i-len(d.Facts)].Name
}

// slotType is the type of a slot's values.
func (d *Domain) slotType(i int) Type {
	if i < len(d.Facts) {
		return d.Facts[i].Type
	}
	return d.Derived[i-len(d.Facts)].Type
}

// intern numbers a string constant of the document.
func (d *Domain) intern(s string) {
	if _, ok := d.strID[s]; !ok {
		d.strID[s] = uint64(len(d.strs))
		d.strs = append(d.strs, s)
	}
}

// Action returns the action with the given name, or nil.
func (d *Domain) Action(name string) *Action { return d.actions[name] }

// Goal returns the goal with the given name, or nil.
func (d *Domain) Goal(name string) *Goal { return d.goals[name] }

type rawDomain struct {
	Name        string                     `json:"name"`
	Description string                     `json:"description"`
	Facts       map[string]json.RawMessage `json:"facts"`
	Derived     map[string]json.RawMessage `json:"derived"`
	Actions     []rawAction                `json:"actions"`
	Goals       []rawGoal                  `json:"goals"`
}

type rawAction struct {
	Name          string                     `json:"name"`
	Skill         string                     `json:"skill"`
	Description   string                     `json:"description"`
	Input         json.RawMessage            `json:"input"`
	Preconditions map[string]json.RawMessage `json:"preconditions"`
	Requires      string                     `json:"requires"`
	Effects       map[string]json.RawMessage `json:"effects"`
	Cost          json.RawMessage            `json:"cost"`
	MinCost       *float64                   `json:"minCost"`
}

type rawGoal struct {
	Name        string                     `json:"name"`
	Description string                     `json:"description"`
	Conditions  map[string]json.RawMessage `json:"conditions"`
	Utility     json.RawMessage            `json:"utility"`
	Valid       string                     `json:"valid"`
	CooldownMs  *int64                     `json:"cooldownMs"`
}

// Decode parses and checks a domain document: the schema
// (schemas/goap-domain.schema.json), then every fact reference, value
// type, expression and input template. Every error is a *DomainError
// (errors.Is ErrInvalidDomain) whose Path points at the offending member
// and whose message names the action or goal and the field, with the
// expression compiler's own message where there is one.
func Decode(doc []byte) (*Domain, error) {
	if err := schemas.Validate(SchemaName, doc); err != nil {
		return nil, &DomainError{Msg: err.Error(), Err: err}
	}
	var raw rawDomain
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, &DomainError{Msg: err.Error(), Err: err}
	}
	d := &Domain{Name: raw.Name, Description: raw.Description,
		facts: map[string]int{}, actions: map[string]*Action{}, goals: map[string]*Goal{}, env: map[string]any{},
		strID: map[string]uint64{}, strs: []string{""}}
	if err := d.decodeFacts(raw.Facts); err != nil {
		return nil, err
	}
	if err := d.decodeDerived(raw.Derived); err != nil {
		return nil, err
	}
	for i := range raw.Actions {
		a, err := d.decodeAction(i, &raw.Actions[i])
		if err != nil {
			return nil, err
		}
		d.Actions = append(d.Actions, a)
		d.actions[a.Name] = a
	}
	for i := range raw.Goals {
		g, err := d.decodeGoal(i, &raw.Goals[i])
		if err != nil {
			return nil, err
		}
		d.Goals = append(d.Goals, g)
		d.goals[g.Name] = g
	}
	return d, nil
}

// scalar decodes a JSON bool, number or string.
func scalar(raw json.RawMessage) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return value{}, err
	}
	return valueOf(x)
}

// isObject reports whether a raw JSON value is an object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

func (d *Domain) decodeFacts(raw map[string]json.RawMessage) error {
	names := slices.Sorted(maps.Keys(raw))
	for _, n := range names {
		path := "/facts/" + pointerToken(n)
		f := Fact{Name: n}
		if isObject(raw[n]) {
			var decl struct {
				Type        Type            `json:"type"`
				Default     json.RawMessage `json:"default"`
				Description string          `json:"description"`
			}
			if err := json.Unmarshal(raw[n], &decl); err != nil {
				return &DomainError{Path: path, Msg: err.Error(), Err: err}
			}
			f.Type, f.Description = decl.Type, decl.Description
			if decl.Default != nil {
				v, err := scalar(decl.Default)
				if err != nil {
					return &DomainError{Path: path + "/default", Msg: fmt.Sprintf("fact %s: %v", n, err)}
				}
				if v.typ() != f.Type {
					return &DomainError{Path: path + "/default", Msg: fmt.Sprintf("fact %s is a %s, but its default %s is a %s", n, f.Type, v, v.typ())}
				}
				f.def = v
			}
		} else {
			v, err := scalar(raw[n])
			if err != nil {
				return &DomainError{Path: path, Msg: fmt.Sprintf("fact %s: %v", n, err)}
			}
			f.Type, f.def = v.typ(), v
		}
		f.Default = f.def.any()
		if f.def.k == kString {
			d.intern(f.def.str)
		}
		d.facts[n] = len(d.Facts)
		d.Facts = append(d.Facts, f)
		d.defs = append(d.defs, f.def)
		d.env[n] = value{k: f.Type.kind()}.any()
	}
	for _, f := range d.Facts {
		if !isFactName(f.Name) {
			return &DomainError{Path: "/facts/" + pointerToken(f.Name), Msg: fmt.Sprintf("fact name %q: want a letter or _ followed by up to 127 letters, digits or _", f.Name)}
		}
		if !isIdentifier(f.Name) {
			return &DomainError{Path: "/facts/" + f.Name, Msg: fmt.Sprintf("fact name %q is an expression keyword; choose another name", f.Name)}
		}
		if safeexpr.Reserved(f.Name) {
			return &DomainError{Path: "/facts/" + f.Name, Msg: fmt.Sprintf("fact name %q: names beginning with __ are planbus's own; choose another name", f.Name)}
		}
	}
	return nil
}

// decodeDerived reads the derived facts: each an expression over the
// declared facts (not over other derived facts), written as a string, or
// an object with the expression, an optional type and a description.
// Without a type the expression's own decides; it must be a bool, a
// number or a string.
func (d *Domain) decodeDerived(raw map[string]json.RawMessage) error {
	names := slices.Sorted(maps.Keys(raw))
	for _, n := range names {
		path := "/derived/" + pointerToken(n)
		if !isFactName(n) {
			return &DomainError{Path: path, Msg: fmt.Sprintf("derived fact name %q: want a letter or _ followed by up to 127 letters, digits or _", n)}
		}
		if !isIdentifier(n) {
			return &DomainError{Path: path, Msg: fmt.Sprintf("derived fact name %q is an expression keyword; choose another name", n)}
		}
		if safeexpr.Reserved(n) {
			return &DomainError{Path: path, Msg: fmt.Sprintf("derived fact name %q: names beginning with __ are planbus's own; choose another name", n)}
		}
		if _, ok := d.facts[n]; ok {
			return &DomainError{Path: path, Msg: fmt.Sprintf("derived fact %s has the name of a fact", n)}
		}
		df := Derived{Name: n}
		if isObject(raw[n]) {
			var decl struct {
				Expr        string `json:"expr"`
				Type        Type   `json:"type"`
				Description string `json:"description"`
			}
			if err := json.Unmarshal(raw[n], &decl); err != nil {
				return &DomainError{Path: path, Msg: err.Error(), Err: err}
			}
			df.Expr, df.Type, df.Description = decl.Expr, decl.Type, decl.Description
		} else if err := json.Unmarshal(raw[n], &df.Expr); err != nil {
			return &DomainError{Path: path, Msg: err.Error(), Err: err}
		}
		x, typ, err := d.compileDerived(df.Expr, df.Type)
		if err != nil {
			return &DomainError{Path: path, Msg: fmt.Sprintf("derived fact %s: %v", n, err), Err: err}
		}
		df.x, df.Type = x, typ
		d.Derived = append(d.Derived, df)
	}
	for i, df := range d.Derived {
		d.facts[df.Name] = len(d.Facts) + i
	}
	for _, df := range d.Derived {
		d.env[df.Name] = value{k: df.Type.kind()}.any()
	}
	return nil
}

// decodeConditions reads a conditions object; owner names the action or
// goal for messages.
func (d *Domain) decodeConditions(raw map[string]json.RawMessage, path, owner string) ([]Condition, error) {
	names := slices.Sorted(maps.Keys(raw))
	var out []Condition
	for _, n := range names {
		at := path + "/" + pointerToken(n)
		fi, ok := d.facts[n]
		if !ok {
			return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: unknown fact %q; declare it under facts", owner, n)}
		}
		typ, hasDefault := d.slotType(fi), fi >= len(d.Facts) || d.Facts[fi].Default != nil
		tests := map[Op]json.RawMessage{}
		if isObject(raw[n]) {
			if err := json.Unmarshal(raw[n], &tests); err != nil {
				return nil, &DomainError{Path: at, Msg: err.Error(), Err: err}
			}
		} else {
			tests[Equals] = raw[n]
		}
		for _, op := range ops {
			rv, ok := tests[op]
			if !ok {
				continue
			}
			v, err := scalar(rv)
			if err != nil {
				return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s %s: %v", owner, n, op, err)}
			}
			switch op {
			case Equals, NotEquals:
				if v.typ() != typ {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s %s %s: the fact is a %s", owner, n, op, v, typ)}
				}
			case Exists:
				if v.k != kBool {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s exists %s: want true or false", owner, n, v)}
				}
				if fi >= len(d.Facts) {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s is a derived fact, which always exists", owner, n)}
				}
				if v.num == 0 && hasDefault {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s exists false never holds: the fact has a default", owner, n)}
				}
			default:
				if typ != Number || v.k != kNumber {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s %s %s: %s compares numbers and the fact is a %s", owner, n, op, v, op, typ)}
				}
			}
			if v.k == kString {
				d.intern(v.str)
			}
			out = append(out, Condition{Fact: n, Op: op, Value: v.any(), fact: fi, val: v})
		}
	}
	return out, nil
}

func (d *Domain) decodeEffects(raw map[string]json.RawMessage, path, owner string) ([]Effect, error) {
	names := slices.Sorted(maps.Keys(raw))
	var out []Effect
	for _, n := range names {
		at := path + "/" + pointerToken(n)
		fi, ok := d.facts[n]
		if !ok {
			return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: unknown fact %q; declare it under facts", owner, n)}
		}
		if fi >= len(d.Facts) {
			return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s is a derived fact; change the facts it reads instead", owner, n)}
		}
		f := &d.Facts[fi]
		op, rv := Set, raw[n]
		if isObject(rv) {
			var m map[EffectOp]json.RawMessage
			if err := json.Unmarshal(rv, &m); err != nil || len(m) != 1 {
				return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: effect on %s: want one of set, inc, dec", owner, n), Err: err}
			}
			for k, v := range m {
				op, rv = k, v
			}
		}
		v, err := scalar(rv)
		if err != nil {
			return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: effect on %s: %v", owner, n, err)}
		}
		switch op {
		case Set:
			if v.typ() != f.Type {
				return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: sets %s to %s, but the fact is a %s", owner, n, v, f.Type)}
			}
		case Inc, Dec:
			if f.Type != Number || v.k != kNumber {
				return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s on %s: the fact is a %s, not a number", owner, op, n, f.Type)}
			}
		default:
			return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: effect on %s: unknown operation %q", owner, n, op)}
		}
		if v.k == kString {
			d.intern(v.str)
		}
		out = append(out, Effect{Fact: n, Op: op, Value: v.any(), fact: fi, val: v})
	}
	return out, nil
}

func (d *Domain) decodeAction(i int, r *rawAction) (*Action, error) {
	path := fmt.Sprintf("/actions/%d", i)
	owner := fmt.Sprintf("action %s", r.Name)
	if d.actions[r.Name] != nil {
		return nil, &DomainError{Path: path + "/name", Msg: fmt.Sprintf("duplicate action name %q", r.Name)}
	}
	a := &Action{Name: r.Name, Skill: r.Skill, Description: r.Description, Input: r.Input, Cost: 1, MinCost: 1}
	if a.Skill == "" {
		a.Skill = a.Name
	}
	var err error
	if a.Preconditions, err = d.decodeConditions(r.Preconditions, path+"/preconditions", owner); err != nil {
		return nil, err
	}
	if a.Effects, err = d.decodeEffects(r.Effects, path+"/effects", owner); err != nil {
		return nil, err
	}
	if r.Requires != "" {
		a.Requires = r.Requires
		if a.requires, err = d.compileExpr(a.Requires, expr.AsBool()); err != nil {
			return nil, &DomainError{Path: path + "/requires", Msg: fmt.Sprintf("%s: requires: %v", owner, err), Err: err}
		}
	}
	if r.Cost != nil {
		if isString(r.Cost) {
			if err := json.Unmarshal(r.Cost, &a.CostExpr); err != nil {
				return nil, &DomainError{Path: path + "/cost", Msg: err.Error(), Err: err}
			}
			a.cost, err = d.compileExpr(a.CostExpr, expr.AsFloat64())
			if err != nil {
				return nil, &DomainError{Path: path + "/cost", Msg: fmt.Sprintf("%s: cost: %v", owner, err), Err: err}
			}
			a.Cost, a.MinCost = 0, 0
		} else {
			v, err := scalar(r.Cost)
			if err != nil || v.k != kNumber || v.num < 0 {
				return nil, &DomainError{Path: path + "/cost", Msg: fmt.Sprintf("%s: cost must be a number >= 0 or an expression", owner)}
			}
			a.Cost, a.MinCost = v.num, v.num
		}
	}
	if r.MinCost != nil {
		if a.cost == nil {
			return nil, &DomainError{Path: path + "/minCost", Msg: fmt.Sprintf("%s: minCost applies only to an expression cost", owner)}
		}
		a.MinCost = *r.MinCost
	}
	if a.Input == nil {
		a.Input = json.RawMessage(`{}`)
	}
	if a.input, err = d.checkInput(a.Input, path+"/input", owner); err != nil {
		return nil, err
	}
	if !hasTemplates(a.input) {
		a.static = a.render(d, nil)
	}
	return a, nil
}

func isString(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '"'
}

func (d *Domain) decodeGoal(i int, r *rawGoal) (*Goal, error) {
	path := fmt.Sprintf("/goals/%d", i)
	owner := fmt.Sprintf("goal %s", r.Name)
	if d.goals[r.Name] != nil {
		return nil, &DomainError{Path: path + "/name", Msg: fmt.Sprintf("duplicate goal name %q", r.Name)}
	}
	g := &Goal{Name: r.Name, Description: r.Description, Utility: 1, Valid: r.Valid, Cooldown: DefaultCooldown}
	var err error
	if g.Conditions, err = d.decodeConditions(r.Conditions, path+"/conditions", owner); err != nil {
		return nil, err
	}
	if r.Utility != nil {
		if isString(r.Utility) {
			if err := json.Unmarshal(r.Utility, &g.UtilityExpr); err != nil {
				return nil, &DomainError{Path: path + "/utility", Msg: err.Error(), Err: err}
			}
			if g.utility, err = d.compileExpr(g.UtilityExpr, expr.AsFloat64()); err != nil {
				return nil, &DomainError{Path: path + "/utility", Msg: fmt.Sprintf("%s: utility: %v", owner, err), Err: err}
			}
			g.Utility = 0
		} else {
			v, err := scalar(r.Utility)
			if err != nil || v.k != kNumber {
				return nil, &DomainError{Path: path + "/utility", Msg: fmt.Sprintf("%s: utility must be a number or an expression", owner)}
			}
			g.Utility = v.num
		}
	}
	if g.Valid != "" {
		if g.valid, err = d.compileExpr(g.Valid, expr.AsBool()); err != nil {
			return nil, &DomainError{Path: path + "/valid", Msg: fmt.Sprintf("%s: valid: %v", owner, err), Err: err}
		}
	}
	if r.CooldownMs != nil {
		g.Cooldown = time.Duration(*r.CooldownMs) * time.Millisecond
	}
	return g, nil
}

package goap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/expr-lang/expr"

	"github.com/planbus/planbus/schemas"
)

// SchemaName is the domain format's schema in package schemas.
const SchemaName = "goap-domain.schema.json"

// factName is what a fact may be called: an expression variable.
var factName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// DefaultCooldown is a goal's cooldown when its document gives none.
const DefaultCooldown = 5 * time.Second

// Domain is a decoded, checked GOAP domain. Build one with Decode. A
// Domain is immutable and safe for concurrent use by any number of
// searches, arbiters and trackers.
type Domain struct {
	Name        string
	Description string
	Facts       []Fact    // sorted by name
	Actions     []*Action // in document order, which breaks ties between plans
	Goals       []*Goal   // in document order, which breaks ties between utilities

	facts   map[string]int // name → index in Facts
	actions map[string]*Action
	goals   map[string]*Goal
	env     map[string]any // the facts' types, for compiling expressions
}

// Fact is a declared fact.
type Fact struct {
	Name        string
	Type        Type
	Default     any // bool, float64 or string; nil: none, the fact may be absent
	Description string

	def value
}

// Action is something the planner may do: a tool call of Skill with Input.
type Action struct {
	Name          string
	Skill         string
	Description   string
	Input         json.RawMessage // as written, templates unexpanded; {} if none
	Preconditions []Condition     // sorted by fact, then comparison
	Effects       []Effect        // sorted by fact
	// Cost is the action's constant cost, or 0 when CostExpr is set.
	Cost float64
	// CostExpr is an expression cost, evaluated in the state the action
	// starts from.
	CostExpr string
	// MinCost is a lower bound of the cost: Cost itself, or the document's
	// minCost for an expression cost. The heuristic relies on it; a cost
	// expression that gives less is an error.
	MinCost float64

	cost  *expression
	input any // Input decoded with json.Number
}

// Goal is a world state worth reaching.
type Goal struct {
	Name        string
	Description string
	Conditions  []Condition // sorted by fact, then comparison
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

// Fact returns the declared fact with the given name.
func (d *Domain) Fact(name string) (Fact, bool) {
	i, ok := d.facts[name]
	if !ok {
		return Fact{}, false
	}
	return d.Facts[i], true
}

// Action returns the action with the given name, or nil.
func (d *Domain) Action(name string) *Action { return d.actions[name] }

// Goal returns the goal with the given name, or nil.
func (d *Domain) Goal(name string) *Goal { return d.goals[name] }

type rawDomain struct {
	Name        string                     `json:"name"`
	Description string                     `json:"description"`
	Facts       map[string]json.RawMessage `json:"facts"`
	Actions     []rawAction                `json:"actions"`
	Goals       []rawGoal                  `json:"goals"`
}

type rawAction struct {
	Name          string                     `json:"name"`
	Skill         string                     `json:"skill"`
	Description   string                     `json:"description"`
	Input         json.RawMessage            `json:"input"`
	Preconditions map[string]json.RawMessage `json:"preconditions"`
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
		facts: map[string]int{}, actions: map[string]*Action{}, goals: map[string]*Goal{}, env: map[string]any{}}
	if err := d.decodeFacts(raw.Facts); err != nil {
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
		d.facts[n] = len(d.Facts)
		d.Facts = append(d.Facts, f)
		d.env[n] = value{k: f.Type.kind()}.any()
	}
	for _, f := range d.Facts {
		if !factName.MatchString(f.Name) {
			return &DomainError{Path: "/facts/" + pointerToken(f.Name), Msg: fmt.Sprintf("fact name %q: want a letter or _ followed by up to 127 letters, digits or _", f.Name)}
		}
		if !isIdentifier(f.Name) {
			return &DomainError{Path: "/facts/" + f.Name, Msg: fmt.Sprintf("fact name %q is an expression keyword; choose another name", f.Name)}
		}
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
		f := &d.Facts[fi]
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
				if v.typ() != f.Type {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s %s %s: the fact is a %s", owner, n, op, v, f.Type)}
				}
			case Exists:
				if v.k != kBool {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s exists %s: want true or false", owner, n, v)}
				}
				if v.num == 0 && f.Default != nil {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s exists false never holds: the fact has a default", owner, n)}
				}
			default:
				if f.Type != Number || v.k != kNumber {
					return nil, &DomainError{Path: at, Msg: fmt.Sprintf("%s: %s %s %s: %s compares numbers and the fact is a %s", owner, n, op, v, op, f.Type)}
				}
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

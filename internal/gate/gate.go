package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/planbus/planbus/internal/safeexpr"
	"github.com/planbus/planbus/internal/text"
	"github.com/planbus/planbus/internal/wire"
)

// Gate types: what a verification gate checks in a tool's output.
const (
	NonEmpty    = "nonEmpty"    // the subject is not null, "", blank, [] or {}
	Contains    = "contains"    // the subject's text contains value
	NotContains = "notContains" // the subject's text does not contain value
	Matches     = "matches"     // the subject's text matches the RE2 pattern
	Equals      = "equals"      // the subject equals the JSON value
	Exists      = "exists"      // something is at path (null counts)
	ExitCode    = "exitCode"    // /exitCode (the shell skill's) equals value, default 0
	HTTPStatus  = "httpStatus"  // /status (the http skill's) is value: 404 or a class "2xx"
	Expr        = "expr"        // an expr-lang expression over output and text is true
	All         = "all"         // every gate of gates passes
)

// ErrInvalid is matched by the errors of Parse and Gate.Compile.
var ErrInvalid = errors.New("gate: invalid")

// Gate is a verification gate: a check of one tool output, serialisable as
// JSON so it can ride in a plan tool ("verify") and be checked by whoever
// receives the tool's result.
//
// The subject of a gate is the value at Path (a JSON pointer, RFC 6901)
// in the output, or the whole output when Path is empty; exitCode and
// httpStatus default Path to /exitCode and /status. The text of a subject
// is the string itself, or its compact JSON for other values. Text
// comparisons ignore case unless CaseSensitive.
//
// A Gate built in Go is checked as it is; Compile it once (Parse does)
// so that Check does not compile its pattern or expression on every call.
// A compiled Gate is immutable and safe for concurrent use.
type Gate struct {
	Type          string  `json:"type"`
	Path          string  `json:"path,omitempty"`
	Value         any     `json:"value,omitempty"`
	Pattern       string  `json:"pattern,omitempty"`
	Expr          string  `json:"expr,omitempty"`
	CaseSensitive bool    `json:"caseSensitive,omitempty"`
	Gates         []*Gate `json:"gates,omitempty"`

	c *compiledGate
}

type compiledGate struct {
	path   string
	text   string // contains, notContains: the value, lowered unless case-sensitive
	value  any    // equals: the value as encoding/json decodes it
	code   int    // exitCode; httpStatus: the status, or its class 1..5 when class
	class  bool
	re     *regexp.Regexp
	prog   *vm.Program
	gates  []*compiledGate
	source *Gate
	size   int64 // equals: the steps comparing with value costs at most
}

// exprEnv is what an expression sees: output, the whole output decoded
// from JSON, and text, the subject's text.
type exprEnv struct {
	Output any             `expr:"output"`
	Text   string          `expr:"text"`
	Meter  *safeexpr.Meter `expr:"__meter"`
}

// exprBuiltins are the builtins an expression may call (package
// safeexpr): those that compute a scalar, or find or test elements of
// the output without copying it. A gate comes with a plan, from whoever
// may submit one, and runs on a dispatcher: builtins that build strings
// or collections as large as the output, or larger (string, upper,
// split, filter, sort, map, join, repeat, toJSON, fromJSON, ...), are not
// available, since an expression of many such calls would hold as many
// copies; nor those that read the clock or the time zone database, or
// expose map iteration order. Expressions are flat (safeexpr.Rules.Flat:
// no predicate in a predicate, no range), so their work is about their
// size times the output's, and metered (safeexpr.Rules.Metered), so a
// check stops at its budget (CheckWithin).
var exprRules = safeexpr.Rules{Builtins: exprBuiltins, Flat: true, Metered: true, Where: "gate expressions"}

var exprBuiltins = map[string]bool{
	"len": true, "type": true, "abs": true, "ceil": true, "floor": true, "round": true, "int": true, "float": true,
	"indexOf": true, "lastIndexOf": true, "hasPrefix": true, "hasSuffix": true, "max": true, "min": true,
	"get": true, "first": true, "last": true,
	"all": true, "any": true, "none": true, "one": true, "count": true, "sum": true, "mean": true, "median": true,
	"find": true, "findIndex": true, "findLast": true, "findLastIndex": true,
	"bitand": true, "bitor": true, "bitxor": true, "bitnand": true, "bitnot": true, "bitshl": true, "bitshr": true, "bitushr": true,
}

// Parse decodes and compiles a gate from JSON. Unknown fields are an
// error. Errors match ErrInvalid.
func Parse(raw []byte) (*Gate, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var g Gate
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := g.Compile(); err != nil {
		return nil, err
	}
	return &g, nil
}

// Compile checks the gate's fields for its type and compiles its pattern
// and expression, and those of the gates nested in it. It returns an error
// matching ErrInvalid that names the field at fault, and then leaves the
// gate as it was. Compile is not safe to call while the gate is being
// checked by other goroutines.
func (g *Gate) Compile() error {
	c, err := compileGate(g, 0)
	if err != nil {
		return err
	}
	c.attach()
	return nil
}

// attach hands each gate of the tree its compiled form, so that a nested
// gate checked on its own is compiled too.
func (c *compiledGate) attach() {
	c.source.c = c
	for _, sub := range c.gates {
		sub.attach()
	}
}

// maxGateDepth bounds the nesting of all gates.
const maxGateDepth = 16

func gateErr(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return fmt.Errorf("%w: %s", ErrInvalid, msg)
}

func compileGate(g *Gate, depth int) (*compiledGate, error) {
	if g == nil {
		return nil, gateErr("", "missing")
	}
	if depth > maxGateDepth {
		return nil, gateErr("gates", "nested deeper than %d", maxGateDepth)
	}
	c := &compiledGate{path: g.Path, source: g}
	switch g.Type {
	case ExitCode:
		if c.path == "" {
			c.path = "/exitCode"
		}
	case HTTPStatus:
		if c.path == "" {
			c.path = "/status"
		}
	}
	if err := checkPointer(c.path); err != nil {
		return nil, gateErr("path", "%v", err)
	}
	if g.Type == Exists && g.Path == "" {
		return nil, gateErr("path", "exists needs a path")
	}
	// Fields that the type does not use are an error, not a silent no-op.
	uses := map[string][]string{
		NonEmpty: {}, Exists: {},
		Contains: {"value", "caseSensitive"}, NotContains: {"value", "caseSensitive"},
		Matches: {"pattern"}, Equals: {"value"}, ExitCode: {"value"}, HTTPStatus: {"value"},
		Expr: {"expr"}, All: {"gates"},
	}
	used, known := uses[g.Type]
	if !known {
		return nil, gateErr("type", "unknown gate type %q (want one of nonEmpty, contains, notContains, matches, equals, exists, exitCode, httpStatus, expr, all)", g.Type)
	}
	set := map[string]bool{"value": g.Value != nil, "pattern": g.Pattern != "", "expr": g.Expr != "",
		"caseSensitive": g.CaseSensitive, "gates": g.Gates != nil}
	for _, f := range []string{"value", "pattern", "expr", "caseSensitive", "gates"} {
		if set[f] && !contains(used, f) {
			return nil, gateErr(f, "not used by a %s gate", g.Type)
		}
	}
	if g.Type == All && g.Path != "" {
		return nil, gateErr("path", "not used by an all gate")
	}
	switch g.Type {
	case Contains, NotContains:
		s, ok := g.Value.(string)
		if !ok || s == "" {
			return nil, gateErr("value", "a %s gate needs a non-empty string value", g.Type)
		}
		c.text = s
		if !g.CaseSensitive {
			c.text = strings.ToLower(s)
		}
	case Matches:
		if g.Pattern == "" {
			return nil, gateErr("pattern", "a matches gate needs a pattern")
		}
		re, err := regexp.Compile(g.Pattern)
		if err != nil {
			return nil, gateErr("pattern", "%v", err)
		}
		c.re = re
	case Equals:
		if g.Value == nil {
			return nil, gateErr("value", "an equals gate needs a value (use an expr gate to compare with null)")
		}
		v, err := normalize(g.Value)
		if err != nil {
			return nil, gateErr("value", "%v", err)
		}
		c.value = v
		c.size = deepSize(v)
	case ExitCode:
		c.code = 0
		if g.Value != nil {
			n, ok := integer(g.Value)
			if !ok || n < -1<<31 || n > 1<<31-1 {
				return nil, gateErr("value", "an exitCode gate needs an integer value, got %s", jsonText(g.Value))
			}
			c.code = int(n)
		}
	case HTTPStatus:
		c.code, c.class = 2, true
		if g.Value != nil {
			if n, ok := integer(g.Value); ok && n >= 100 && n <= 599 {
				c.code, c.class = int(n), false
			} else if s, ok := g.Value.(string); ok && len(s) == 3 && s[0] >= '1' && s[0] <= '5' && strings.EqualFold(s[1:], "xx") {
				c.code = int(s[0] - '0')
			} else {
				return nil, gateErr("value", "an httpStatus gate needs a status 100..599 or a class \"1xx\"..\"5xx\", got %s", jsonText(g.Value))
			}
		}
	case Expr:
		if g.Expr == "" {
			return nil, gateErr("expr", "an expr gate needs an expression")
		}
		if why := safeexpr.Refused(g.Expr, exprRules); why != "" {
			return nil, gateErr("expr", "%s", why)
		}
		prog, err := expr.Compile(g.Expr, append([]expr.Option{expr.Env(exprEnv{}), expr.AsBool()}, safeexpr.Options(exprRules)...)...)
		if err != nil {
			return nil, gateErr("expr", "%v", err)
		}
		c.prog = prog
	case All:
		if len(g.Gates) == 0 {
			return nil, gateErr("gates", "an all gate needs at least one gate")
		}
		for i, sub := range g.Gates {
			sc, err := compileGate(sub, depth+1)
			if err != nil {
				return nil, fmt.Errorf("gates/%d: %w", i, err)
			}
			c.gates = append(c.gates, sc)
		}
	}
	return c, nil
}

// DefaultSteps is the budget of a Check, in steps (see CheckWithin): about
// a quarter of a second of work, enough for dozens of passes of its gates
// over the largest output a tool may return.
const DefaultSteps = 4_000_000

// ErrBudget is matched by the error of a check that used up its budget.
var ErrBudget = safeexpr.ErrBudget

// Check reports whether output passes the gate and, either way, why,
// within DefaultSteps (a check that uses them up fails; see CheckWithin).
// A nil gate passes every output. An output that is not JSON fails every
// gate; an empty output counts as null.
func (g *Gate) Check(output json.RawMessage) (ok bool, reason string) {
	ok, reason, _ = g.CheckWithin(output, DefaultSteps)
	return ok, reason
}

// CheckWithin is Check within a budget of steps. Each gate checked is
// charged for its subject before it looks at it (a step per element of an
// array or a map, per 16 bytes of text, of the whole output for a subject
// turned into text), and an expression for its work as it runs (see
// safeexpr.Meter). The charges depend on the gate and the output alone,
// so a check gives the same verdict wherever and whenever it runs. A
// check that uses up the budget fails with an error matching ErrBudget,
// and its reason names the gate, by its place in the tree (gates/2/gates/0),
// at which it stopped.
func (g *Gate) CheckWithin(output json.RawMessage, steps int64) (ok bool, reason string, err error) {
	_, ok, reason, err = g.checkWithin(output, steps)
	return ok, reason, err
}

// checkWithin is CheckWithin, with the checker that counted the steps
// (nil when no gate was checked).
func (g *Gate) checkWithin(output json.RawMessage, steps int64) (ck *checker, ok bool, reason string, err error) {
	if g == nil {
		return nil, true, "no gate", nil
	}
	c := g.c
	if c == nil {
		var err error
		if c, err = compileGate(g, 0); err != nil {
			return nil, false, err.Error(), nil
		}
	}
	ck = &checker{meter: safeexpr.NewMeter(steps), outputSize: len(output)}
	if steps <= 0 {
		ck.stopped(c, "")
		return ck, false, ck.over, fmt.Errorf("%w: %s", ErrBudget, ck.over)
	}
	var v any
	if len(bytes.TrimSpace(output)) > 0 {
		if err := json.Unmarshal(output, &v); err != nil {
			return ck, false, "output is not JSON: " + err.Error(), nil
		}
	}
	ok, reason = c.check(ck, v, "")
	if ck.over != "" {
		return ck, false, ck.over, fmt.Errorf("%w: %s", ErrBudget, ck.over)
	}
	return ck, ok, reason, nil
}

// checker is one check's budget and, once it is used up, where.
type checker struct {
	meter      *safeexpr.Meter
	outputSize int    // bytes of the output's JSON
	over       string // the reason the budget stopped the check, or ""
}

// charge takes n steps for the gate at where; false when the budget is
// used up.
func (ck *checker) charge(c *compiledGate, where string, n int64) bool {
	if ck.over != "" {
		return false
	}
	if err := ck.meter.Charge(n); err != nil {
		ck.stopped(c, where)
		return false
	}
	return true
}

func (ck *checker) stopped(c *compiledGate, where string) {
	if where == "" {
		where = "the gate"
	} else {
		where = "gate " + where
	}
	ck.over = fmt.Sprintf("verification stopped at %s (%s): it used up the budget of %s steps for checking one output",
		where, clip(c.describe()), wire.Grouped(ck.meter.Limit()))
}

// textCost is the charge for the text of subject: its length for a
// string, the whole output's for a value turned into JSON (an upper bound
// known before the work).
func (ck *checker) textCost(subject any) int64 {
	if s, ok := subject.(string); ok {
		return safeexpr.Size(s)
	}
	return 1 + int64(ck.outputSize)/16
}

func (c *compiledGate) check(ck *checker, out any, where string) (bool, string) {
	g := c.source
	if g.Type == All {
		for i, sub := range c.gates {
			at := "gates/" + strconv.Itoa(i)
			if where != "" {
				at = where + "/" + at
			}
			if ok, why := sub.check(ck, out, at); !ok {
				return false, why
			}
		}
		return true, c.describe()
	}
	if !ck.charge(c, where, 1+int64(strings.Count(c.path, "/"))) {
		return false, ck.over
	}
	subject, found := lookupPointer(out, c.path)
	name := subjectName(c.path)
	if !found && g.Type != Expr {
		return false, fmt.Sprintf("output has nothing at %s", c.path)
	}
	switch g.Type {
	case NonEmpty:
		if empty(subject) {
			return false, name + " is empty"
		}
		return true, name + " is not empty"
	case Contains, NotContains:
		if !ck.charge(c, where, ck.textCost(subject)) {
			return false, ck.over
		}
		text := textOf(subject)
		if !g.CaseSensitive {
			text = strings.ToLower(text)
		}
		has := strings.Contains(text, c.text)
		want := g.Type == Contains
		if has == want {
			return true, c.describe()
		}
		if want {
			return false, fmt.Sprintf("%s does not contain %q", name, g.Value)
		}
		return false, fmt.Sprintf("%s contains %q", name, g.Value)
	case Matches:
		if !ck.charge(c, where, matchCost*ck.textCost(subject)) {
			return false, ck.over
		}
		if c.re.MatchString(textOf(subject)) {
			return true, c.describe()
		}
		return false, fmt.Sprintf("%s does not match /%s/", name, g.Pattern)
	case Equals:
		if !ck.charge(c, where, c.size) {
			return false, ck.over
		}
		if reflect.DeepEqual(subject, c.value) {
			return true, c.describe()
		}
		return false, fmt.Sprintf("%s is %s, want %s", name, clip(jsonText(subject)), clip(jsonText(c.value)))
	case Exists:
		return true, c.describe()
	case ExitCode:
		n, ok := integer(subject)
		if !ok {
			return false, fmt.Sprintf("%s is %s, not an exit code", name, clip(jsonText(subject)))
		}
		if n != int64(c.code) {
			return false, fmt.Sprintf("exit code %d, want %d", n, c.code)
		}
		return true, c.describe()
	case HTTPStatus:
		n, ok := integer(subject)
		if !ok {
			return false, fmt.Sprintf("%s is %s, not an HTTP status", name, clip(jsonText(subject)))
		}
		if c.class && n/100 == int64(c.code) || !c.class && n == int64(c.code) {
			return true, c.describe()
		}
		return false, fmt.Sprintf("HTTP status %d, want %s", n, c.statusText())
	case Expr:
		if !ck.charge(c, where, ck.textCost(subject)) {
			return false, ck.over
		}
		res, err := expr.Run(c.prog, exprEnv{Output: out, Text: textOf(subject), Meter: ck.meter})
		if errors.Is(err, safeexpr.ErrBudget) {
			ck.stopped(c, where)
			return false, ck.over
		}
		if err != nil {
			return false, fmt.Sprintf("expr %q: %v", g.Expr, firstLineOf(err.Error()))
		}
		if b, _ := res.(bool); b {
			return true, c.describe()
		}
		return false, fmt.Sprintf("expr %q is false", g.Expr)
	}
	return false, "unknown gate type " + g.Type
}

// matchCost is how many times a byte of text costs more to match with a
// pattern than to search for a string.
const matchCost = 4

// String describes the gate for people, as in "/stdout contains "ok"".
func (g *Gate) String() string {
	if g == nil {
		return "no gate"
	}
	c := g.c
	if c == nil {
		var err error
		if c, err = compileGate(g, 0); err != nil {
			return "invalid gate: " + err.Error()
		}
	}
	return c.describe()
}

func (c *compiledGate) describe() string {
	g := c.source
	where := subjectName(c.path)
	switch g.Type {
	case NonEmpty:
		return where + " is not empty"
	case Contains:
		return fmt.Sprintf("%s contains %q", where, g.Value)
	case NotContains:
		return fmt.Sprintf("%s does not contain %q", where, g.Value)
	case Matches:
		return fmt.Sprintf("%s matches /%s/", where, g.Pattern)
	case Equals:
		return fmt.Sprintf("%s = %s", where, clip(jsonText(c.value)))
	case Exists:
		return c.path + " exists"
	case ExitCode:
		if c.path != "/exitCode" {
			return fmt.Sprintf("exit code at %s is %d", c.path, c.code)
		}
		return fmt.Sprintf("exit code %d", c.code)
	case HTTPStatus:
		if c.path != "/status" {
			return fmt.Sprintf("HTTP status at %s is %s", c.path, c.statusText())
		}
		return "HTTP status " + c.statusText()
	case Expr:
		return "expr " + g.Expr
	case All:
		parts := make([]string, len(c.gates))
		for i, s := range c.gates {
			parts[i] = s.describe()
		}
		return strings.Join(parts, " and ")
	}
	return g.Type
}

func (c *compiledGate) statusText() string {
	if c.class {
		return strconv.Itoa(c.code) + "xx"
	}
	return strconv.Itoa(c.code)
}

func subjectName(path string) string {
	if path == "" {
		return "output"
	}
	return path
}

// textOf is a subject's text: a string as it is, null as "", anything else
// as compact JSON.
func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return jsonText(v)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func clip(s string) string { return text.Clip(s, 80) }

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// deepSize counts the values in a decoded JSON value.
func deepSize(v any) int64 {
	switch x := v.(type) {
	case []any:
		n := int64(1)
		for _, e := range x {
			n += deepSize(e)
		}
		return n
	case map[string]any:
		n := int64(1)
		for _, e := range x {
			n += deepSize(e)
		}
		return n
	case string:
		return safeexpr.Size(x)
	}
	return 1
}

// integer reads a whole number from a decoded JSON or Go value.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		return int64(x), true
	case int:
		return int64(x), true
	case int64:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	}
	return 0, false
}

// normalize turns a Go value into what encoding/json decodes its JSON to,
// so gate values built in Go compare equal to decoded outputs.
func normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// checkPointer validates a JSON pointer's syntax.
func checkPointer(p string) error {
	if p == "" {
		return nil
	}
	if p[0] != '/' {
		return fmt.Errorf("JSON pointer %q must be empty or start with '/'", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return fmt.Errorf("JSON pointer %q: '~' must be followed by 0 or 1", p)
		}
	}
	return nil
}

// lookupPointer follows a valid JSON pointer; found is false when it names
// nothing.
func lookupPointer(v any, p string) (any, bool) {
	if p == "" {
		return v, true
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || tok != strconv.Itoa(i) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

package goap

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/planbus/planbus/internal/safeexpr"
)

// expression is a compiled expr-lang/expr expression over the facts.
type expression struct {
	src   string
	prog  *vm.Program
	reads []int // the facts it may read, in Facts order
}

// An expression computes a number, a truth value or a short string from
// the facts, once per state the search reaches, for whoever sent the
// domain: what one evaluation may hold is bounded (package safeexpr).
// Strings are at most MaxString bytes, facts and what + builds alike; an
// expression has at most MaxExprNodes nodes; a range at most exprMemory
// elements; and only the builtins of exprRules are available: not
// those that build collections or long strings from short input (repeat,
// join, replace, map, toJSON, ...), nor those that read the clock or the
// local time zone, which would make plans depend on when and where they
// are made. An evaluation then holds at most about MaxExprNodes ×
// MaxString bytes.
const (
	// MaxString is the longest string a fact may hold or an expression
	// build, in bytes.
	MaxString = safeexpr.MaxString
	// MaxExprNodes is the most nodes an expression may have.
	MaxExprNodes = safeexpr.MaxNodes
	// exprMemory is the VM's memory budget: elements of ranges, arrays
	// and maps an evaluation makes, fewer than this.
	exprMemory = 10_000
)

// exprRules: the builtins expressions may call compute scalars, or
// strings no longer than their input (string() of a scalar only). Nested
// predicates and ranges are left to the search's time budget.
var exprRules = safeexpr.Rules{Builtins: exprBuiltins,
	Where: "GOAP expressions, which compute numbers, truth values and short strings"}

var exprBuiltins = map[string]bool{
	"len": true, "type": true, "abs": true, "ceil": true, "floor": true, "round": true, "int": true, "float": true,
	"string": true, "trim": true, "trimPrefix": true, "trimSuffix": true, "upper": true, "lower": true,
	"indexOf": true, "lastIndexOf": true, "hasPrefix": true, "hasSuffix": true, "max": true, "min": true,
	"get": true, "first": true, "last": true,
	"bitand": true, "bitor": true, "bitxor": true, "bitnand": true, "bitnot": true, "bitshl": true, "bitshr": true, "bitushr": true,
}

// compileExpr compiles src against the facts' types; kind is expr.AsFloat64
// or expr.AsBool.
func (d *Domain) compileExpr(src string, kind expr.Option) (*expression, error) {
	if why := safeexpr.Refused(src, exprRules); why != "" {
		return nil, errors.New(why)
	}
	p, err := expr.Compile(src, append([]expr.Option{expr.Env(d.env), kind}, safeexpr.Options(exprRules)...)...)
	if err != nil {
		return nil, errors.New(firstLine(err.Error()))
	}
	x := &expression{src: src, prog: p}
	x.reads = x.findReads(d)
	return x, nil
}

// compileDerived compiles a derived fact's expression, of type typ or,
// when typ is "", of the type the expression gives.
func (d *Domain) compileDerived(src string, typ Type) (*expression, Type, error) {
	if typ == "" {
		x, err := d.compileExpr(src, expr.Env(d.env))
		if err != nil {
			return nil, "", err
		}
		switch t := x.prog.Node().Type(); {
		case t == nil:
		case t.Kind() == reflect.Bool:
			typ = Bool
		case t.Kind() == reflect.String:
			typ = String
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
			typ = Number
		}
		if typ == "" {
			return nil, "", fmt.Errorf("%q gives %v; want a bool, a number or a string, or declare the type", src, x.prog.Node().Type())
		}
	}
	var kind expr.Option
	switch typ {
	case Bool:
		kind = expr.AsBool()
	case Number:
		kind = expr.AsFloat64()
	case String:
		kind = expr.AsKind(reflect.String)
	default:
		return nil, "", fmt.Errorf("type %q: want bool, number or string", typ)
	}
	x, err := d.compileExpr(src, kind)
	return x, typ, err
}

// firstLine drops the source excerpt expr appends to its messages, so
// errors stay on one line.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// isIdentifier reports whether name, parsed alone, is a variable (and
// not a keyword such as "in", "not" or "nil").
func isIdentifier(name string) bool {
	tree, err := parser.Parse(name)
	if err != nil {
		return false
	}
	id, ok := tree.Node.(*ast.IdentifierNode)
	return ok && id.Value == name
}

// evaluator runs expressions for one search or one arbiter call. It owns a
// VM and an environment map that it refills for each state, so it must not
// be shared between goroutines.
type evaluator struct {
	d   *Domain
	vm  vm.VM
	env map[string]any
}

func newEvaluator(d *Domain) *evaluator {
	return &evaluator{d: d, vm: vm.VM{MemoryBudget: exprMemory}, env: make(map[string]any, len(d.Facts))}
}

// fill sets the facts x reads; the others keep stale values, which x
// does not see.
func (ev *evaluator) fill(x *expression, s []value) {
	for _, i := range x.reads {
		ev.env[ev.d.slotName(i)] = s[i].any()
	}
}

// derive computes the derived facts of state vector s from its facts.
func (ev *evaluator) derive(s []value) error {
	n := len(ev.d.Facts)
	for i := range ev.d.Derived {
		df := &ev.d.Derived[i]
		out, err := ev.run(df.x, s, "derived fact "+df.Name)
		if err != nil {
			return err
		}
		v, err := valueOf(out)
		if err != nil || v.typ() != df.Type {
			return &EvalError{Where: "derived fact " + df.Name, Err: fmt.Errorf("%q gave %v, not a %s", df.Expr, out, df.Type)}
		}
		s[n+i] = v
	}
	return nil
}

func (ev *evaluator) run(x *expression, s []value, where string) (any, error) {
	ev.fill(x, s)
	out, err := ev.vm.Run(x.prog, ev.env)
	if err != nil {
		return nil, &EvalError{Where: where, Err: errors.New(firstLine(err.Error()))}
	}
	return out, nil
}

// number evaluates a numeric expression and checks the result is finite.
func (ev *evaluator) number(x *expression, s []value, where string) (float64, error) {
	out, err := ev.run(x, s, where)
	if err != nil {
		return 0, err
	}
	f, ok := out.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, &EvalError{Where: where, Err: fmt.Errorf("%q gave %v, not a finite number", x.src, out)}
	}
	return f, nil
}

// boolean evaluates a boolean expression.
func (ev *evaluator) boolean(x *expression, s []value, where string) (bool, error) {
	out, err := ev.run(x, s, where)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, &EvalError{Where: where, Err: fmt.Errorf("%q gave %v, not a bool", x.src, out)}
	}
	return b, nil
}

// identVisitor collects the names of an expression's variables.
type identVisitor map[string]bool

func (v identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		v[id.Value] = true
	}
}

// findReads returns the facts the expression may read, in Facts order. An
// expression that reaches the environment through $env may read any.
func (x *expression) findReads(d *Domain) []int {
	v := identVisitor{}
	node := x.prog.Node()
	ast.Walk(&node, v)
	var out []int
	for i := range d.slots() {
		if v[d.slotName(i)] || v["$env"] {
			out = append(out, i)
		}
	}
	return out
}

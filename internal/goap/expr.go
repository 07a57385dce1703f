package goap

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
	"github.com/expr-lang/expr/vm/runtime"
)

// expression is a compiled expr-lang/expr expression over the facts.
type expression struct {
	src   string
	prog  *vm.Program
	reads []int // the facts it may read, in Facts order
}

// An expression computes a number, a truth value or a short string from
// the facts, once per state the search reaches, for whoever sent the
// domain: what one evaluation may hold is bounded. Strings are at most
// MaxString bytes, facts and what + builds alike; an expression has at
// most MaxExprNodes nodes; a range at most exprMemory elements; and the
// builtins that build collections or long strings from short input
// (repeat, join, replace, map, toJSON, ...) are not available, nor those
// that read the clock or the local time zone, which would make plans
// depend on when and where they are made. An evaluation then holds at
// most about MaxExprNodes × MaxString bytes.
const (
	// MaxString is the longest string a fact may hold or an expression
	// build, in bytes.
	MaxString = 16 << 10
	// MaxExprNodes is the most nodes an expression may have.
	MaxExprNodes = 1000
	// exprMemory is the VM's memory budget: elements of ranges, arrays
	// and maps an evaluation makes.
	exprMemory = 10_000
)

// exprBuiltins are the builtins expressions may call: they compute
// scalars, or strings no longer than their input.
var exprBuiltins = map[string]bool{
	"len": true, "type": true, "abs": true, "ceil": true, "floor": true, "round": true, "int": true, "float": true,
	"string": true, "trim": true, "trimPrefix": true, "trimSuffix": true, "upper": true, "lower": true,
	"indexOf": true, "lastIndexOf": true, "hasPrefix": true, "hasSuffix": true, "max": true, "min": true,
	"get": true, "first": true, "last": true,
	"bitand": true, "bitor": true, "bitxor": true, "bitnand": true, "bitnot": true, "bitshl": true, "bitshr": true, "bitushr": true,
}

// plusFunc is the function a + of strings becomes (plus); no fact may
// have its name.
const plusFunc = "__plus"

// compileExpr compiles src against the facts' types; kind is expr.AsFloat64
// or expr.AsBool.
func (d *Domain) compileExpr(src string, kind expr.Option) (*expression, error) {
	if tree, err := parser.Parse(src); err == nil {
		v := &callVisitor{}
		ast.Walk(&tree.Node, v)
		if v.refused != "" {
			return nil, fmt.Errorf("%s is not available in GOAP expressions, which compute numbers, truth values and short strings (available: %s)",
				v.refused, strings.Join(slices.Sorted(maps.Keys(exprBuiltins)), ", "))
		}
	}
	opts := []expr.Option{expr.Env(d.env), kind, expr.MaxNodes(MaxExprNodes),
		expr.Function(plusFunc, plus, new(func(string, string) string), new(func(any, any) any)),
		expr.Patch(plusPatcher{})}
	for _, name := range builtin.Names {
		if !exprBuiltins[name] {
			opts = append(opts, expr.DisableBuiltin(name))
		}
	}
	p, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, errors.New(firstLine(err.Error()))
	}
	x := &expression{src: src, prog: p}
	x.reads = x.findReads(d)
	return x, nil
}

// callVisitor finds the first call of a builtin expressions may not use.
type callVisitor struct{ refused string }

func (v *callVisitor) Visit(n *ast.Node) {
	if v.refused != "" {
		return
	}
	name := ""
	switch c := (*n).(type) {
	case *ast.BuiltinNode:
		name = c.Name
	case *ast.CallNode:
		if id, ok := c.Callee.(*ast.IdentifierNode); ok {
			name = id.Value
		}
	}
	if name != "" && slices.Contains(builtin.Names, name) && !exprBuiltins[name] {
		v.refused = name
	}
}

// plusPatcher turns a + that may join strings (both sides strings, or of
// a type known only when it runs) into a call of plus, which bounds what
// it builds. A + of numbers stays the VM's own.
type plusPatcher struct{}

func (plusPatcher) Visit(n *ast.Node) {
	b, ok := (*n).(*ast.BinaryNode)
	if !ok || b.Operator != "+" || !maybeString(b.Left.Type()) || !maybeString(b.Right.Type()) {
		return
	}
	ast.Patch(n, &ast.CallNode{Callee: &ast.IdentifierNode{Value: plusFunc}, Arguments: []ast.Node{b.Left, b.Right}})
}

func maybeString(t reflect.Type) bool {
	return t == nil || t.Kind() == reflect.String || t.Kind() == reflect.Interface
}

// plus is + for expressions: strings are joined up to MaxString bytes;
// anything else is added as the VM adds.
func plus(params ...any) (any, error) {
	a, b := params[0], params[1]
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			if n := len(sa) + len(sb); n > MaxString {
				return nil, fmt.Errorf("+ would make a string of %d bytes; expressions make strings of at most %d", n, MaxString)
			}
			return sa + sb, nil
		}
	}
	return runtime.Add(a, b), nil
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

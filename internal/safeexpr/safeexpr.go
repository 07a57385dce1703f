// Package safeexpr compiles expr-lang/expr expressions that come from
// whoever may send a request (GOAP domains, plans' verification gates) so
// that evaluating one cannot take a node's memory, nor, with Rules.Flat,
// run for long: a caller gives Rules, and every expression gets
//
//   - the builtins Rules.Builtins allows and no other: those that build
//     collections or long strings from short input (repeat, join, replace,
//     toJSON, ...) are for the caller to leave out, and a call of one is
//     refused naming it (Refused);
//   - a + that joins strings up to MaxString bytes (Plus), also where the
//     operands' types are known only when it runs, and string() of
//     numbers, truth values and strings only;
//   - matches with a constant pattern only, so that no pattern is made
//     and compiled as the expression runs;
//   - at most MaxNodes nodes, and no optimizer rewrites (which turn sum
//     of an array literal into a + the checks above never see).
//
// The VM's memory budget (vm.VM.MemoryBudget: the elements of ranges,
// arrays and predicate scopes an evaluation makes) is the caller's to set.
package safeexpr

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm/runtime"
)

const (
	// MaxString is the longest string + may make, in bytes.
	MaxString = 16 << 10
	// MaxNodes is the most nodes an expression may have.
	MaxNodes = 1000
	// PlusFunc is the name of the function a + of strings becomes: no
	// variable of an expression's environment may have it.
	PlusFunc = "__plus"
)

// Rules say what expressions of one kind may do.
type Rules struct {
	// Builtins are the builtins they may call.
	Builtins map[string]bool
	// Flat refuses a predicate inside another and ranges: what an
	// evaluation does is then about its nodes times the length of its
	// input, for expressions that run with no deadline.
	Flat bool
	// Where names the expressions in Refused's messages ("X is not
	// available in " + Where); "" says "here".
	Where string
	// Metered charges evaluations to the *Meter their environment holds
	// as MeterVar (see Meter), so that an evaluation stops with an error
	// matching ErrBudget once it has done its budget's work.
	Metered bool
}

// Options are the compile options of expressions under r. They hold only
// with an environment (expr.Env), which the caller adds: without one, expr
// takes unknown names, disabled builtins among them, for variables. Call
// Refused first for a message naming what is refused.
func Options(r Rules) []expr.Option {
	opts := []expr.Option{expr.MaxNodes(MaxNodes), expr.Optimize(false),
		func(c *conf.Config) { c.Functions[PlusFunc] = plusFunction },
		expr.Patch(plusPatcher{})}
	for _, name := range builtin.Names {
		if !r.Builtins[name] {
			opts = append(opts, expr.DisableBuiltin(name))
		}
	}
	if r.Builtins["string"] {
		opts = append(opts, expr.Function("string", scalarString, new(func(any) string)))
	}
	if r.Metered {
		opts = append(opts, meterOptions()...)
	}
	return opts
}

// Refused says what in src r does not allow (the first builtin outside
// r.Builtins it calls, and which it may call; a pattern made as it runs;
// with r.Flat, a predicate in a predicate or a range; a name beginning
// with __, as the functions and variables safeexpr adds), or "" when nothing
// is (or src does not parse: the compiler then says why).
func Refused(src string, r Rules) string {
	cfg := conf.CreateNew()
	cfg.MaxNodes = MaxNodes
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		return ""
	}
	v := &refuser{rules: r}
	ast.Walk(&tree.Node, v)
	return v.refused
}

// Reserved tells whether name is one an expression may not use, nor an
// environment give its own value: the names of what safeexpr adds (those
// beginning with __).
func Reserved(name string) bool { return strings.HasPrefix(name, "__") }

// refuser finds the first thing an expression may not do.
type refuser struct {
	rules   Rules
	refused string
}

func (v *refuser) Visit(n *ast.Node) {
	if v.refused != "" {
		return
	}
	name := ""
	switch c := (*n).(type) {
	case *ast.IdentifierNode:
		if Reserved(c.Value) {
			v.refused = fmt.Sprintf("%s: names beginning with __ are planbus's own", c.Value)
		}
	case *ast.BuiltinNode:
		name = c.Name
	case *ast.CallNode:
		if id, ok := c.Callee.(*ast.IdentifierNode); ok {
			name = id.Value
		}
	case *ast.BinaryNode:
		if _, constant := c.Right.(*ast.StringNode); c.Operator == "matches" && !constant {
			v.refused = "matches takes a constant pattern here (a string in quotes)"
		}
		if c.Operator == ".." && v.rules.Flat {
			v.refused = "ranges (a..b) are not available " + v.where()
		}
	case *ast.PredicateNode:
		if v.rules.Flat && hasPredicate(c.Node) {
			v.refused = "a predicate inside another is not available " + v.where()
		}
	}
	if name != "" && slices.Contains(builtin.Names, name) && !v.rules.Builtins[name] {
		v.refused = fmt.Sprintf("%s is not available %s (available: %s)", name, v.where(), strings.Join(slices.Sorted(maps.Keys(v.rules.Builtins)), ", "))
	}
}

func (v *refuser) where() string {
	if v.rules.Where == "" {
		return "here"
	}
	return "in " + v.rules.Where
}

// hasPredicate tells whether n holds a predicate.
func hasPredicate(n ast.Node) bool {
	f := &predicateFinder{}
	ast.Walk(&n, f)
	return f.found
}

type predicateFinder struct{ found bool }

func (f *predicateFinder) Visit(n *ast.Node) {
	if _, ok := (*n).(*ast.PredicateNode); ok {
		f.found = true
	}
}

// plusPatcher turns a + that may join strings (both sides strings, or of
// a type known only when it runs) into a call of Plus. A + of numbers
// stays the VM's own.
type plusPatcher struct{}

func (plusPatcher) Visit(n *ast.Node) {
	b, ok := (*n).(*ast.BinaryNode)
	if !ok || b.Operator != "+" || !maybeString(b.Left.Type()) || !maybeString(b.Right.Type()) {
		return
	}
	ast.Patch(n, &ast.CallNode{Callee: &ast.IdentifierNode{Value: PlusFunc}, Arguments: []ast.Node{b.Left, b.Right}})
}

func maybeString(t reflect.Type) bool {
	return t == nil || t.Kind() == reflect.String || t.Kind() == reflect.Interface
}

// plusFunction is Plus as expressions call it: typed string when both
// operands are strings, and otherwise as what it is known to be only when
// it runs (a number of operands of unknown type is not a string).
var plusFunction = &builtin.Function{Name: PlusFunc, Func: Plus,
	Validate: func(args []reflect.Type) (reflect.Type, error) {
		if len(args) != 2 {
			return nil, fmt.Errorf("%s takes 2 arguments", PlusFunc)
		}
		if args[0].Kind() == reflect.String && args[1].Kind() == reflect.String {
			return args[0], nil
		}
		return reflect.TypeFor[any](), nil
	}}

// Plus is + for expressions: strings are joined up to MaxString bytes;
// anything else is added as the VM adds.
func Plus(params ...any) (any, error) {
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

// scalarString is string() for expressions: the builtin's text of a
// number, a truth value, a string or nil; of an array or a map (which
// could hold many references to one long string) an error.
func scalarString(params ...any) (any, error) {
	switch x := params[0].(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprintf("%v", x), nil
	default:
		return nil, fmt.Errorf("string() takes a number, a truth value or a string here, not a %T", x)
	}
}

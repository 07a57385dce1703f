// Package safeexpr compiles expr-lang/expr expressions that come from
// whoever may send a request (GOAP domains, plans' verification gates) so
// that evaluating one cannot take a node's memory: a caller names the
// builtins its expressions may call, and every expression gets
//
//   - the builtins allowed and no other: those that build collections or
//     long strings from short input (repeat, join, replace, toJSON, ...) are
//     for the caller to leave out, and a call of one is refused naming it
//     (Refused);
//   - a + that joins strings up to MaxString bytes (Plus), also where the
//     operands' types are known only when it runs;
//   - at most MaxNodes nodes.
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

// Options are the compile options of an expression that may call the
// builtins in allowed and no other. They hold only with an environment
// (expr.Env), which the caller adds: without one, expr takes unknown
// names, disabled builtins among them, for variables.
func Options(allowed map[string]bool) []expr.Option {
	opts := []expr.Option{expr.MaxNodes(MaxNodes),
		expr.Function(PlusFunc, Plus, new(func(string, string) string), new(func(any, any) any)),
		expr.Patch(plusPatcher{})}
	for _, name := range builtin.Names {
		if !allowed[name] {
			opts = append(opts, expr.DisableBuiltin(name))
		}
	}
	return opts
}

// Refused says which builtin outside allowed src calls first, and which
// it may call, or "" when it calls none (or does not parse: the compiler
// then says why).
func Refused(src string, allowed map[string]bool) string {
	tree, err := parser.Parse(src)
	if err != nil {
		return ""
	}
	v := &callVisitor{allowed: allowed}
	ast.Walk(&tree.Node, v)
	if v.refused == "" {
		return ""
	}
	return fmt.Sprintf("%s is not available here (available: %s)", v.refused, strings.Join(slices.Sorted(maps.Keys(allowed)), ", "))
}

// callVisitor finds the first call of a builtin outside allowed.
type callVisitor struct {
	allowed map[string]bool
	refused string
}

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
	if name != "" && slices.Contains(builtin.Names, name) && !v.allowed[name] {
		v.refused = name
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

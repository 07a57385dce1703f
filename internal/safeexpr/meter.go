package safeexpr

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/conf"
)

const (
	// MeterVar is the name under which an environment holds the *Meter
	// of a metered evaluation (Rules.Metered): a struct field tagged
	// `expr:"__meter"`. A nil meter meters nothing.
	MeterVar = "__meter"
	// stepFunc is the function the metering patch wraps values in.
	stepFunc = "__step"
	// textStep is how many bytes of text count as one step.
	textStep = 16
)

// ErrBudget is matched by the error of an evaluation that used up its
// Meter.
var ErrBudget = errors.New("safeexpr: over budget")

// Meter is the budget of metered evaluations, in steps: for each value an
// operator or a builtin takes (a predicate's collection among them), a
// step plus one for each of its elements (or each 16 bytes of a string),
// charged before the operator runs. The
// count depends on the expression and its input alone, so an evaluation
// that ran out of budget does so again on the same input, wherever it
// runs. The work between two charges is at most one operator or builtin
// over one value of the input, so an evaluation stops within about one
// pass over its input of using up the budget.
//
// A Meter is not safe for concurrent use: give each evaluation, or each
// sequence of evaluations that shares one budget, its own.
type Meter struct {
	left, limit int64
}

// NewMeter returns a meter of steps steps.
func NewMeter(steps int64) *Meter { return &Meter{left: steps, limit: steps} }

// Charge takes n steps from the budget, or returns an error matching
// ErrBudget when fewer are left.
func (m *Meter) Charge(n int64) error {
	if m == nil {
		return nil
	}
	m.left -= n
	if m.left < 0 {
		m.left = -1
		return fmt.Errorf("%w: used up its %d steps", ErrBudget, m.limit)
	}
	return nil
}

// Used is the number of steps charged so far (the limit, once over it).
func (m *Meter) Used() int64 {
	if m.left < 0 {
		return m.limit
	}
	return m.limit - m.left
}

// Limit is the meter's budget.
func (m *Meter) Limit() int64 { return m.limit }

// Size is what a value costs to charge: a step, plus one per element of
// an array or a map and one per 16 bytes of a string. It takes constant
// time.
func Size(v any) int64 {
	switch x := v.(type) {
	case nil, bool, float64, int:
		return 1
	case string:
		return 1 + int64(len(x))/textStep
	case []any:
		return 1 + int64(len(x))
	case map[string]any:
		return 1 + int64(len(x))
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return 1 + int64(rv.Len())/textStep
	case reflect.Slice, reflect.Array, reflect.Map:
		return 1 + int64(rv.Len())
	}
	return 1
}

// step is the function the metering patch calls: it charges its meter
// for the value and returns the value.
func step(params ...any) (any, error) {
	m, _ := params[0].(*Meter)
	if err := m.Charge(Size(params[1])); err != nil {
		return nil, err
	}
	return params[1], nil
}

// meterOptions are the compile options of Rules.Metered: the step
// function, typed as the value it passes on, and the patch that calls it.
func meterOptions() []expr.Option {
	fn := &builtin.Function{
		Name: stepFunc,
		Func: step,
		Validate: func(args []reflect.Type) (reflect.Type, error) {
			if len(args) != 2 {
				return nil, fmt.Errorf("%s takes 2 arguments", stepFunc)
			}
			return args[1], nil
		},
	}
	return []expr.Option{
		func(c *conf.Config) { c.Functions[stepFunc] = fn },
		expr.Patch(meterPatcher{}),
	}
}

// meterPatcher wraps the values that may be large in a call of step, so
// that they are charged before an operator or a builtin works on them:
// the arguments of builtins (a predicate's collection among them, so a
// predicate is charged an element per element it may visit) and the
// operands of binary operators other than the logical ones. Literals
// are not charged (their size is bounded by the expression's), nor the
// other operand of a comparison with a literal number, truth value or
// nil, which takes constant time. Walked children first, it does not see
// the calls it makes.
type meterPatcher struct{}

func (meterPatcher) Visit(n *ast.Node) {
	switch c := (*n).(type) {
	case *ast.BuiltinNode:
		for i, a := range c.Arguments {
			if _, closure := a.(*ast.PredicateNode); !closure {
				c.Arguments[i] = stepped(a)
			}
		}
	case *ast.BinaryNode:
		switch c.Operator {
		case "&&", "||", "and", "or", "??":
			return
		case "==", "!=", "<", "<=", ">", ">=":
			if scalarLiteral(c.Left) || scalarLiteral(c.Right) {
				return
			}
		}
		c.Left, c.Right = stepped(c.Left), stepped(c.Right)
	}
}

// scalarLiteral: n is a number, a truth value or nil written in the
// expression.
func scalarLiteral(n ast.Node) bool {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NilNode:
		return true
	}
	return false
}

// stepped is n wrapped in a call of step, or n when it is a literal.
func stepped(n ast.Node) ast.Node {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NilNode, *ast.StringNode, *ast.ConstantNode:
		return n
	}
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: stepFunc},
		Arguments: []ast.Node{&ast.IdentifierNode{Value: MeterVar}, n}}
	ast.Patch(&n, call)
	return n
}

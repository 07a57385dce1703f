package goap

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// expression is a compiled expr-lang/expr expression over the facts.
type expression struct {
	src  string
	prog *vm.Program
}

// Builtins that read the clock or the local time zone would make plans
// depend on when and where they are made.
var impure = []string{"now", "date", "timezone"}

// compileExpr compiles src against the facts' types; kind is expr.AsFloat64
// or expr.AsBool.
func compileExpr(src string, env map[string]any, kind expr.Option) (*expression, error) {
	opts := []expr.Option{expr.Env(env), kind}
	for _, name := range impure {
		opts = append(opts, expr.DisableBuiltin(name))
	}
	p, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, errors.New(firstLine(err.Error()))
	}
	return &expression{src: src, prog: p}, nil
}

// firstLine drops the source excerpt expr appends to its messages, so
// errors stay on one line.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// isIdentifier reports whether name, compiled alone, is a variable (and
// not a keyword such as "in", "not" or "nil").
func isIdentifier(name string, env map[string]any) bool {
	p, err := expr.Compile(name, expr.Env(env))
	if err != nil {
		return false
	}
	id, ok := p.Node().(*ast.IdentifierNode)
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
	return &evaluator{d: d, env: make(map[string]any, len(d.Facts))}
}

func (ev *evaluator) fill(s []value) {
	for i := range ev.d.Facts {
		ev.env[ev.d.Facts[i].Name] = s[i].any()
	}
}

func (ev *evaluator) run(x *expression, s []value, where string) (any, error) {
	ev.fill(s)
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

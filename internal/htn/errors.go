package htn

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them,
// so callers match with errors.Is.
var (
	// ErrSyntax is wrapped by every *ParseError.
	ErrSyntax = errors.New("htn: syntax error")

	// ErrBudgetExceeded means the search went over Options.Budget; the
	// error is a *BudgetError naming the limit. The Result returned with it
	// holds the plans completed so far and, in Partial, the operators
	// applied on the branch that ran out, so the caller can tell a
	// truncated search from a finished one.
	ErrBudgetExceeded = errors.New("htn: out of budget")

	// ErrCanceled wraps the context's error when a run stops because its
	// context ended.
	ErrCanceled = errors.New("htn: canceled")

	// Domain errors: the program asked for something the language forbids.
	// They are returned as *RuntimeError, which names the term involved.
	ErrFactMissing     = errors.New("htn: fact not in state")
	ErrFactExists      = errors.New("htn: fact already in state")
	ErrNotGround       = errors.New("htn: term is not ground")
	ErrDivisionByZero  = errors.New("htn: division by zero")
	ErrUnknownFunction = errors.New("htn: unknown arithmetic function")
	ErrBadCall         = errors.New("htn: invalid call")
)

// BudgetError says which limit of Options.Budget a call went over and by
// how much. It wraps ErrBudgetExceeded.
type BudgetError struct {
	// Limit is the budget that ran out: BudgetMemory, BudgetNodes or
	// BudgetSteps.
	Limit string
	// Used is what the call had used when it stopped (bytes, nodes or
	// steps) and Budget what it was allowed.
	Used, Budget int64
}

// The limits a BudgetError names.
const (
	BudgetMemory = "memory"
	BudgetNodes  = "nodes"
	BudgetSteps  = "steps"
)

func (e *BudgetError) Error() string {
	switch e.Limit {
	case BudgetMemory:
		return fmt.Sprintf("%v: about %d bytes in use, budget %d", ErrBudgetExceeded, e.Used, e.Budget)
	case BudgetNodes:
		return fmt.Sprintf("%v: %d planner nodes, budget %d", ErrBudgetExceeded, e.Used, e.Budget)
	}
	return fmt.Sprintf("%v: %d resolver steps, budget %d", ErrBudgetExceeded, e.Used, e.Budget)
}

// Unwrap returns ErrBudgetExceeded.
func (e *BudgetError) Unwrap() error { return ErrBudgetExceeded }

// ParseError reports where a program or goal failed to parse. Line and
// Column are 1-based; Column counts bytes.
type ParseError struct {
	Line   int
	Column int
	Msg    string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("htn: %d:%d: %s", e.Line, e.Column, e.Msg)
}

// Unwrap returns ErrSyntax.
func (e *ParseError) Unwrap() error { return ErrSyntax }

// RuntimeError is a domain error raised while planning or answering a
// query: deleting a fact that is not there, evaluating a non-ground or
// unknown arithmetic expression, dividing by zero, calling a builtin with
// the wrong arguments. Term is the offending term as the reference prints it.
type RuntimeError struct {
	Err  error // one of the sentinel domain errors
	Term string
	Msg  string // what was being done, e.g. "applying operator walk(a,b)"
}

func (e *RuntimeError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Term)
	}
	return fmt.Sprintf("%v: %s (%s)", e.Err, e.Term, e.Msg)
}

// Unwrap returns the sentinel.
func (e *RuntimeError) Unwrap() error { return e.Err }

package goap

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers match with errors.Is.
var (
	// ErrInvalidDomain is wrapped by every *DomainError Decode returns.
	ErrInvalidDomain = errors.New("goap: invalid domain")

	// ErrInvalidState means a world state gave a declared fact a value of
	// the wrong type (or a number that is NaN or infinite).
	ErrInvalidState = errors.New("goap: invalid world state")

	// ErrUnknownGoal means a goal name is not in the domain.
	ErrUnknownGoal = errors.New("goap: unknown goal")

	// ErrUnreachable means no sequence of usable actions reaches the goal.
	// It is returned as *UnreachableError, which names the conditions.
	ErrUnreachable = errors.New("goap: goal unreachable")

	// ErrBudgetExceeded means the search expanded Options.MaxNodes states
	// without reaching the goal.
	ErrBudgetExceeded = errors.New("goap: node budget exceeded")

	// ErrCanceled wraps the context's error when a search stops because
	// its context ended.
	ErrCanceled = errors.New("goap: canceled")

	// ErrEval means an expression (a cost, a utility, a validity test)
	// failed at run time or gave an unusable value. It is returned as
	// *EvalError.
	ErrEval = errors.New("goap: expression failed")
)

// DomainError says what is wrong with a domain document and where: Path is
// a JSON pointer into the document ("/actions/2/cost"), Msg what is wrong
// there, Err the underlying schema or expression error, if any.
type DomainError struct {
	Path string
	Msg  string
	Err  error
}

func (e *DomainError) Error() string {
	if e.Path == "" {
		return "goap: invalid domain: " + e.Msg
	}
	return fmt.Sprintf("goap: invalid domain: at %s: %s", e.Path, e.Msg)
}

// Is makes errors.Is(err, ErrInvalidDomain) hold.
func (e *DomainError) Is(target error) bool { return target == ErrInvalidDomain }

// Unwrap returns the underlying error.
func (e *DomainError) Unwrap() error { return e.Err }

// EvalError is an expression that failed at run time. Where names its
// owner and field ("action chop: cost").
type EvalError struct {
	Where string
	Err   error
}

func (e *EvalError) Error() string { return fmt.Sprintf("goap: %s: %v", e.Where, e.Err) }

// Is makes errors.Is(err, ErrEval) hold.
func (e *EvalError) Is(target error) bool { return target == ErrEval }

// Unwrap returns the expression's own error.
func (e *EvalError) Unwrap() error { return e.Err }

// UnreachableError is a goal no plan reaches from the given state.
type UnreachableError struct {
	Goal string
	// Unsatisfied are the goal's conditions that do not hold in the start
	// state, as "wood gte 4 (is 0)".
	Unsatisfied []string
	// Why is the planner's explanation: the facts no usable action
	// changes, the disabled actions that would, or the size of the space
	// searched.
	Why string
}

func (e *UnreachableError) Error() string {
	msg := fmt.Sprintf("goap: goal %s unreachable: unsatisfied %s", e.Goal, strings.Join(e.Unsatisfied, ", "))
	if e.Why != "" {
		msg += "; " + e.Why
	}
	return msg
}

// Unwrap returns ErrUnreachable.
func (e *UnreachableError) Unwrap() error { return ErrUnreachable }

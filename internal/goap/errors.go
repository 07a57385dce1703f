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

	// ErrBudgetExceeded means the search went over a limit of its Options
	// (MaxNodes or MaxMemory) without reaching the goal. It is returned as
	// *BudgetError, which names the limit.
	ErrBudgetExceeded = errors.New("goap: out of budget")

	// ErrCanceled wraps the context's error when a search stops because
	// its context ended.
	ErrCanceled = errors.New("goap: canceled")

	// ErrEval means an expression (a cost, a utility, a validity test)
	// failed at run time or gave an unusable value. It is returned as
	// *EvalError.
	ErrEval = errors.New("goap: expression failed")

	// ErrPlanJSON means a plan result did not make a valid plan (ToPlan,
	// PlanJSON). It is returned as *PlanJSONError.
	ErrPlanJSON = errors.New("goap: invalid Plan JSON")
)

// BudgetError is a search stopped by a limit of its Options.
type BudgetError struct {
	// Limit is BudgetNodes (Options.MaxNodes) or BudgetMemory
	// (Options.MaxMemory).
	Limit string
	Goal  string
	// Used is what the search had used when it stopped (states expanded,
	// or bytes held), Budget what it was allowed; Expanded the states it
	// expanded.
	Used, Budget int64
	Expanded     int
}

// The limits a BudgetError names.
const (
	BudgetNodes  = "nodes"
	BudgetMemory = "memory"
)

func (e *BudgetError) Error() string {
	if e.Limit == BudgetMemory {
		return fmt.Sprintf("%v: the search for goal %s holds about %d bytes after expanding %d states (Options.MaxMemory %d)",
			ErrBudgetExceeded, e.Goal, e.Used, e.Expanded, e.Budget)
	}
	return fmt.Sprintf("%v: expanded %d states for goal %s without reaching it (Options.MaxNodes %d)",
		ErrBudgetExceeded, e.Used, e.Goal, e.Budget)
}

// Unwrap returns ErrBudgetExceeded.
func (e *BudgetError) Unwrap() error { return ErrBudgetExceeded }

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
	// state, as "wood gte 4 (is 0)"; none for a goal without conditions.
	Unsatisfied []string
	// Why is the planner's explanation: the facts no usable action
	// changes, the disabled actions that would, or the size of the space
	// searched.
	Why string
}

func (e *UnreachableError) Error() string {
	msg := fmt.Sprintf("goap: goal %s unreachable", e.Goal)
	if len(e.Unsatisfied) > 0 {
		msg += ": unsatisfied " + strings.Join(e.Unsatisfied, ", ")
	}
	if e.Why != "" {
		msg += "; " + e.Why
	}
	return msg
}

// Unwrap returns ErrUnreachable.
func (e *UnreachableError) Unwrap() error { return ErrUnreachable }

// PlanJSONError is a plan result that did not make a valid plan: Err is
// the underlying error, a *plan.Error (plan.ErrInvalid) or the encoding's.
// Only a Result built by hand (or a number grown past float64) gets one.
type PlanJSONError struct {
	Goal string
	Err  error
}

func (e *PlanJSONError) Error() string {
	return fmt.Sprintf("goap: plan for goal %s: %v", e.Goal, e.Err)
}

// Is makes errors.Is(err, ErrPlanJSON) hold.
func (e *PlanJSONError) Is(target error) bool { return target == ErrPlanJSON }

// Unwrap returns the underlying error.
func (e *PlanJSONError) Unwrap() error { return e.Err }

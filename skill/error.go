package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/planbus/planbus"
)

// Error is a failure a handler reports with a code and a category, so the
// dispatcher knows whether to retry and how the skill's health changes.
// Output, if set, is reported along with the error (a command's exit code
// and stderr, say).
type Error struct {
	// Code names the failure for programs, like NO_SUCH_USER.
	Code planbus.Code
	// Category is one of the planbus.Category constants: invalid_input
	// and permanent failures are never retried, timeout and network ones
	// count against the skill's health sooner, invalid_input does not
	// count against it (the caller's input was at fault). Any other value
	// is reported as internal, the message saying which was given.
	Category planbus.Category
	// Message says what went wrong, for people.
	Message string
	// Output is reported with the error. Output that is not JSON is
	// reported as a JSON string of its text.
	Output json.RawMessage
	// Err is the error this one wraps, if any (Unwrap): the constructors
	// set it from a %w verb of their format, as fmt.Errorf does. It is not
	// reported; Message already says it.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s): %s", e.Code, e.Category, e.Message) }

// Unwrap returns the error e wraps, for errors.Is and errors.As.
// A nil *Error (a typed nil returned as an error) wraps nothing.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Failf returns an *Error with code and category (a planbus.Category
// constant), in the order every constructor takes them, code first; an
// empty code is reported as TOOL_FAILED. The
// message is formatted as fmt.Errorf formats it: an error given to a %w
// verb is wrapped (errors.Is and errors.As find it).
func Failf(code planbus.Code, category planbus.Category, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Category: category, Message: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		e.Err = err // wraps what %w gave it
	}
	return e
}

// InvalidInput returns an error about the call's input, code
// INVALID_INPUT: never retried, since the same input fails again.
func InvalidInput(format string, args ...any) *Error {
	return Failf(planbus.CodeInvalidInput, planbus.CategoryInvalidInput, format, args...)
}

// Permanent returns an error that retrying cannot fix (a missing record, a
// refused permission): never retried.
func Permanent(code planbus.Code, format string, args ...any) *Error {
	return Failf(code, planbus.CategoryPermanent, format, args...)
}

// Transient returns an error that may go away: retried as the tool's
// retry policy says.
func Transient(code planbus.Code, format string, args ...any) *Error {
	return Failf(code, planbus.CategoryTransient, format, args...)
}

// Network returns an error reaching something over the network: retried,
// and it moves the skill to temporaryFailure at once.
func Network(code planbus.Code, format string, args ...any) *Error {
	return Failf(code, planbus.CategoryNetwork, format, args...)
}

// ErrorInfo turns any handler error into the error object of a result and
// the output reported with it. An error that is not an *Error counts as
// category internal, code TOOL_FAILED, except for context errors: a
// deadline is a TOOL_TIMEOUT (timeout), a cancellation CANCELLED
// (cancelled). An *Error is reported as it is, made valid where a result
// could not carry it: an empty code becomes TOOL_FAILED, a category that
// is not a planbus one internal (the message names the one given), output
// that is not JSON a JSON string of its text. A *planbus.ErrorInfo (the
// error object of a result) keeps its code and category too. ErrorInfo of
// nil is nil.
func ErrorInfo(err error) (*planbus.ErrorInfo, json.RawMessage) {
	if err == nil {
		return nil, nil
	}
	var pe *planbus.ErrorInfo
	if errors.As(err, &pe) && pe != nil {
		err = &Error{Code: pe.Code, Category: pe.Category, Message: pe.Message}
	}
	var se *Error
	if errors.As(err, &se) && se == nil {
		return &planbus.ErrorInfo{Code: planbus.CodeToolFailed, Category: planbus.CategoryInternal, Message: "the handler returned a nil *skill.Error"}, nil
	}
	if se != nil {
		info := &planbus.ErrorInfo{Code: se.Code, Category: se.Category, Message: se.Message}
		if info.Code == "" {
			info.Code = planbus.CodeToolFailed
		}
		if !knownCategory(info.Category) {
			info.Message = fmt.Sprintf("%s (the skill gave category %q, which is not a planbus category: reported as internal)", info.Message, info.Category)
			info.Category = planbus.CategoryInternal
		}
		out := se.Output
		if len(out) > 0 && !json.Valid(out) {
			out, _ = json.Marshal(string(out))
		}
		return info, out
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &planbus.ErrorInfo{Code: planbus.CodeToolTimeout, Category: planbus.CategoryTimeout, Message: err.Error()}, nil
	}
	if errors.Is(err, context.Canceled) {
		return &planbus.ErrorInfo{Code: planbus.CodeCancelled, Category: planbus.CategoryCancelled, Message: err.Error()}, nil
	}
	return &planbus.ErrorInfo{Code: planbus.CodeToolFailed, Category: planbus.CategoryInternal, Message: err.Error()}, nil
}

// knownCategory tells whether c is one of the planbus.Category constants.
func knownCategory(c planbus.Category) bool {
	switch c {
	case planbus.CategoryTimeout, planbus.CategoryNetwork, planbus.CategoryTransient, planbus.CategoryInvalidInput,
		planbus.CategoryPermanent, planbus.CategoryInternal, planbus.CategoryCancelled, planbus.CategoryDependency:
		return true
	}
	return false
}

// DecodeInput unmarshals a call's input into v, strictly: member names
// match the fields' JSON names exactly, as the input schema's property
// names do (a field without a json tag is named as in Go), and unknown
// or duplicate members, wrong types, trailing data and malformed JSON are
// an InvalidInput error naming them. Matching names regardless of case,
// as encoding/json does, would let {"amount": 50, "AMOUNT": 5000} pass a
// schema that caps amount and hand the handler 5000.
func DecodeInput(call *Call, v any) error {
	return decodeInput(call, v)
}

// decodeInput is DecodeInput with further options.
func decodeInput(call *Call, v any, opts ...jsonv2.Options) error {
	if err := jsonv2.Unmarshal(call.Input, v, append(opts, jsonv2.RejectUnknownMembers(true))...); err != nil {
		return InvalidInput("skill %s: input: %s", call.Skill, inputError(err))
	}
	return nil
}

// inputError says what DecodeInput's decoder refused and where, with the
// JSON pointer of the member: "unknown member /categroy", "at /argv: got
// a string, want an array".
func inputError(err error) string {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return strings.TrimPrefix(err.Error(), "jsontext: ")
	}
	where := string(se.JSONPointer)
	if where == "" {
		where = "/"
	}
	switch {
	case errors.Is(se.Err, jsonv2.ErrUnknownName):
		return "unknown member " + where
	case se.JSONKind != 0 && se.GoType != nil:
		msg := fmt.Sprintf("at %s: got %s, want %s", where, jsonKind(se.JSONKind), goKind(se.GoType))
		if se.Err != nil {
			msg += ": " + se.Err.Error()
		}
		return msg
	}
	return err.Error()
}

func jsonKind(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "JSON " + k.String()
}

func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer (" + t.String() + ")"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer (" + t.String() + ")"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return goKind(t.Elem())
	}
	return t.String()
}

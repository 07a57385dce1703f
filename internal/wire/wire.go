// Package wire decodes the two messages on the hot path of every tool call,
// the call a worker receives and the result a dispatcher receives, at a
// fraction of the cost of validating them against their JSON Schemas, and
// encodes them and the progress events around them without reflection
// (encode.go).
//
// Both are checked by hand for exactly what their schemas require (types,
// required fields, id and token patterns, enums, bounds, no unknown
// fields), so a message is accepted here only if what was read from it is
// valid under the schema; the schema remains the definition, and a message
// that fails is validated against it once more so that the error names
// what and where in the schema's words. The schema validator walks a
// generic decoding of the document (maps of any) with compiled regular
// expressions, which for a no-op tool cost more than the rest of a hop.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/schemas"
)

// maxTimeoutMs is the schema's bound on a call's timeout (a day).
const maxTimeoutMs = 86_400_000

// DecodeCall reads a tool call as published by a dispatcher.
func DecodeCall(data []byte) (planbus.ToolCall, error) {
	var c planbus.ToolCall
	if err := strict(data, &c); err != nil {
		return c, explain(schemas.ToolCall, data, err)
	}
	if err := checkCall(&c); err != nil {
		return c, explain(schemas.ToolCall, data, err)
	}
	return c, nil
}

// DecodeResult reads a tool result as published by a worker.
func DecodeResult(data []byte) (planbus.ToolResult, error) {
	var r planbus.ToolResult
	if err := strict(data, &r); err != nil {
		return r, explain(schemas.ToolResult, data, err)
	}
	if err := checkResult(&r); err != nil {
		return r, explain(schemas.ToolResult, data, err)
	}
	return r, nil
}

// strict decodes one JSON object into v, refusing unknown fields and
// trailing data, as the schemas' additionalProperties: false does. It
// uses the JSON v2 decoder (the proposal for encoding/json/v2, which
// decodes these messages about four times faster than encoding/json's
// Decoder); it also matches names exactly, as the schema does, where
// encoding/json would accept "PlanId" for planId, and refuses duplicate
// names and invalid UTF-8.
func strict(data []byte, v any) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	return jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true))
}

// Lenient decodes data into v, which points to a struct of the fields
// wanted: with the JSON v2 decoder, which skips the rest far faster than
// encoding/json decodes it, and with encoding/json (v reset) when v2
// refuses the document (duplicate names, invalid UTF-8), so it reads any
// document as encoding/json would.
func Lenient(data []byte, v any) error {
	if jsonv2.Unmarshal(data, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return json.Unmarshal(data, v)
}

// explain turns a failed fast check into the schema's own error when the
// schema rejects the document too (it names the field and the rule), and
// into the fast check's error otherwise.
func explain(schema string, data []byte, fast error) error {
	if err := schemas.Validate(schema, data); err != nil {
		return err
	}
	return &schemas.Error{Schema: schema, Issues: []string{fast.Error()}}
}

func checkCall(c *planbus.ToolCall) error {
	switch {
	case !IsID(c.PlanID):
		return fieldErr("planId", c.PlanID)
	case !IsID(c.RequestID):
		return fieldErr("requestId", c.RequestID)
	case !IsToolID(c.ToolID):
		return fieldErr("toolId", c.ToolID)
	case !IsSkill(c.Skill):
		return fieldErr("skill", c.Skill)
	case c.Attempt < 1:
		return fmt.Errorf("at /attempt: %d is below the minimum 1", c.Attempt)
	case c.MaxAttempts < 1:
		return fmt.Errorf("at /maxAttempts: %d is below the minimum 1", c.MaxAttempts)
	case !IsObject(c.Input):
		return fmt.Errorf("at /input: not a JSON object")
	case c.TimeoutMs < 1 || c.TimeoutMs > maxTimeoutMs:
		return fmt.Errorf("at /timeoutMs: %d is not between 1 and %d", c.TimeoutMs, maxTimeoutMs)
	case len(c.IdempotencyKey) < 5:
		return fmt.Errorf("at /idempotencyKey: shorter than 5 characters")
	case !IsToken(c.Token):
		return fieldErr("token", c.Token)
	case !IsToken(c.CancelDigest):
		return fieldErr("cancelDigest", c.CancelDigest)
	}
	return nil
}

func checkResult(r *planbus.ToolResult) error {
	switch {
	case !IsID(r.PlanID):
		return fieldErr("planId", r.PlanID)
	case !IsID(r.RequestID):
		return fieldErr("requestId", r.RequestID)
	case !IsToolID(r.ToolID):
		return fieldErr("toolId", r.ToolID)
	case !IsSkill(r.Skill):
		return fieldErr("skill", r.Skill)
	case r.Attempt < 1:
		return fmt.Errorf("at /attempt: %d is below the minimum 1", r.Attempt)
	case !IsToken(r.Token):
		return fieldErr("token", r.Token)
	case r.DurationMs < 0:
		return fmt.Errorf("at /durationMs: below the minimum 0")
	case r.StatePatch != nil && !IsObject(r.StatePatch):
		return fmt.Errorf("at /statePatch: not a JSON object")
	}
	switch r.State {
	case planbus.ToolSucceeded:
	case planbus.ToolFailed, planbus.ToolTimeout:
		if r.Error == nil {
			return fmt.Errorf("at /error: required when the state is %s", r.State)
		}
	default:
		return fmt.Errorf("at /state: %q is not succeeded, failed or timeout", r.State)
	}
	if e := r.Error; e != nil {
		if e.Code == "" {
			return fmt.Errorf("at /error/code: empty")
		}
		if !isCategory(e.Category) {
			return fmt.Errorf("at /error/category: %q is not a known category", e.Category)
		}
	}
	// Timestamps were parsed as RFC 3339 by encoding/json.
	return nil
}

func fieldErr(field, v string) error {
	if v == "" {
		return fmt.Errorf("at /%s: missing or empty", field)
	}
	return fmt.Errorf("at /%s: %q does not match its pattern", field, v)
}

// IsID reports whether s matches the schemas' id pattern,
// ^[A-Za-z0-9_-]{1,128}$.
func IsID(s string) bool { return match(s, 1, 128, "_-") }

// IsToolID reports whether s matches the toolId pattern,
// ^[A-Za-z0-9_.:-]{1,128}$.
func IsToolID(s string) bool { return match(s, 1, 128, "_.:-") }

// IsSkill reports whether s matches the skill pattern,
// ^([A-Za-z0-9_-]{1,64}\.)?[A-Za-z0-9_-]{1,64}$: a name, optionally in a
// namespace (NAME.TOOL).
func IsSkill(s string) bool {
	if ns, name, dotted := strings.Cut(s, "."); dotted {
		return match(ns, 1, 64, "_-") && match(name, 1, 64, "_-")
	}
	return match(s, 1, 64, "_-")
}

// IsName reports whether s is a name: ^[A-Za-z0-9_-]{1,64}$, a skill's
// name or namespace, a schedule's name.
func IsName(s string) bool { return match(s, 1, 64, "_-") }

// IsToken reports whether s has the shape of a result token or a cancel
// digest: ^[A-Za-z0-9_-]{43}$.
func IsToken(s string) bool { return match(s, 43, 43, "_-") }

func match(s string, minLen, maxLen int, extra string) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		default:
			if !bytesContain(extra, c) {
				return false
			}
		}
	}
	return true
}

func bytesContain(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// IsObject reports whether raw JSON (already syntax-checked) is an object.
func IsObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

func isCategory(c planbus.Category) bool {
	switch c {
	case planbus.CategoryTimeout, planbus.CategoryNetwork, planbus.CategoryTransient, planbus.CategoryInvalidInput,
		planbus.CategoryPermanent, planbus.CategoryInternal, planbus.CategoryCancelled, planbus.CategoryDependency:
		return true
	}
	return false
}

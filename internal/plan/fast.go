package plan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/planbus/planbus/internal/wire"
	"github.com/planbus/planbus/schemas"
)

// The fast path of Decode. Validating a plan against its JSON Schema
// walks a generic decoding of the document with compiled patterns: for a
// plan of 1,000 tools it took two thirds of Decode's time and most of its
// allocations, on the critical path of every plan a dispatcher starts.
// decodeFast reads the document once into the decoding types and checks
// by hand exactly what the schema requires of them (as internal/wire does
// for calls and results); gates, the one part of a plan whose schema is
// intricate, are held to their definition by the schema validator itself.
//
// It only ever accepts: a document it does not take, for any reason, goes
// the slow way (the schema, then encoding/json), which names what is
// wrong and where and otherwise decodes it as it always has. So where the
// two decoders might differ it declines:
//   - any null and any empty string in the document: the decoding types
//     cannot tell them from absent fields;
//   - whatever the JSON v2 decoder refuses: unknown members (the schema's
//     additionalProperties: false), duplicate names and invalid UTF-8
//     (which encoding/json would take), numbers that do not fit their
//     fields, trailing data.
//
// A differential test and fuzz target (fast_test.go) hold the two paths
// to the same verdict and the same plan.

// Bounds of the plan schema not shared with calls and results.
const (
	maxTools          = 100_000
	maxPlanConcurrent = 100_000
	maxToolAttempts   = 100
	maxBackoffMs      = 3_600_000
	maxPromptRunes    = 1024
)

// decodeFast returns the plan doc holds, before Check, if doc is valid
// under the plan schema and takes no detour; ok is false otherwise.
// tools is the number of tools of a document it decoded but declined,
// so Decode can refuse too many of them without the schema's walk over
// every one (seconds of CPU for a few megabytes of tiny tools).
func decodeFast(doc []byte) (p *Plan, ok bool, tools int) {
	if t := bytes.TrimLeft(doc, " \t\r\n"); len(t) == 0 || t[0] != '{' || nullOrEmpty(doc) {
		return nil, false, 0
	}
	var j planJSON
	if jsonv2.Unmarshal(doc, &j, jsonv2.RejectUnknownMembers(true)) != nil {
		return nil, false, 0
	}
	if !j.valid() {
		return nil, false, len(j.Tools)
	}
	p = new(Plan)
	if j.plan(p) != nil {
		return nil, false, 0
	}
	return p, true, 0
}

// valid checks a plan decoded from a document with no null and no empty
// string, so a field left "" or nil was absent.
func (j *planJSON) valid() bool {
	switch {
	case j.PlanID != "" && !wire.IsID(j.PlanID),
		j.RequestID != "" && !wire.IsID(j.RequestID),
		j.SessionID != "" && !wire.IsID(j.SessionID),
		j.MaxConcurrency != nil && (*j.MaxConcurrency < 1 || *j.MaxConcurrency > maxPlanConcurrent),
		!timeoutValid(j.TimeoutMs),
		j.Tools == nil || len(j.Tools) > maxTools,
		!objectOrAbsent(j.Metadata):
		return false
	}
	for i := range j.Tools {
		if !j.Tools[i].valid() {
			return false
		}
	}
	return true
}

func (t *toolJSON) valid() bool {
	if !wire.IsToolID(t.ToolID) || !wire.IsSkill(t.Skill) || !objectOrAbsent(t.Input) || !objectOrAbsent(t.Metadata) ||
		!timeoutValid(t.TimeoutMs) || !t.RetryPolicy.valid() || !gateValid(t.Verify) {
		return false
	}
	for _, d := range t.Dependencies {
		if !wire.IsToolID(d) {
			return false
		}
	}
	if a := t.Approval; a != nil {
		if n := utf8.RuneCountInString(a.Prompt); n < 1 || n > maxPromptRunes {
			return false
		}
	}
	if r := t.ReuseFrom; r != nil && (!wire.IsID(r.PlanID) || !wire.IsToolID(r.ToolID) || r.ResultSeq < 1) {
		return false
	}
	if f := t.Fallback; f != nil && (!wire.IsSkill(f.Skill) || !objectOrAbsent(f.Input) || !objectOrAbsent(f.Metadata) ||
		!timeoutValid(f.TimeoutMs) || !f.RetryPolicy.valid() || !gateValid(f.Verify)) {
		return false
	}
	return true
}

func (rp *retryJSON) valid() bool {
	return rp == nil ||
		(rp.MaxAttempts == nil || *rp.MaxAttempts >= 1 && *rp.MaxAttempts <= maxToolAttempts) &&
			(rp.BackoffMs == nil || *rp.BackoffMs >= 0 && *rp.BackoffMs <= maxBackoffMs)
}

func timeoutValid(ms *int64) bool { return ms == nil || *ms >= 1 && *ms <= MaxTimeoutMs }

func objectOrAbsent(raw json.RawMessage) bool { return raw == nil || wire.IsObject(raw) }

// gateValid holds a gate to its schema definition.
func gateValid(raw json.RawMessage) bool {
	return raw == nil || schemas.Validate(schemas.Gate, raw) == nil
}

// nullOrEmpty reports whether doc holds a null or an empty string (as a
// value or a name). Outside strings an n can only begin a null (or be an
// error the decoder will refuse).
func nullOrEmpty(doc []byte) bool {
	in := false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case in && c == '\\':
			i++
		case in:
			in = c != '"'
		case c == '"':
			if i+1 < len(doc) && doc[i+1] == '"' {
				return true
			}
			in = true
		case c == 'n':
			return true
		}
	}
	return false
}

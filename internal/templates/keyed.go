package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/text"
	"github.com/planbus/planbus/schemas"
)

// KeyedSchemaName is the JSON Schema, in package schemas, of a library in
// the keyed format.
const KeyedSchemaName = "template-library-keyed.schema.json"

// The keyed format is the plan library as agents that run their tools
// themselves write it: "_meta" with the version, "plans" an object keyed
// by plan id, snake_case fields, and steps that name the agent's tool, a
// command hint and a check of the tool's output (Check) instead of a
// skill's input and a gate. Decode reads it as well as the list format and
// turns each plan into a Template.

// keyedLibrary is a library in the keyed format, plans in document order.
type keyedLibrary struct {
	Meta struct {
		Version     string `json:"version"`
		Description string `json:"description"`
	} `json:"_meta"`
	Plans []keyedEntry `json:"-"`
}

type keyedEntry struct {
	id   string
	plan keyedPlan
}

type keyedPlan struct {
	Name             string      `json:"name"`
	Description      string      `json:"description"`
	Domains          []string    `json:"domains"`
	Triggers         []string    `json:"triggers"`
	TriggerThreshold int         `json:"trigger_threshold"`
	StaleAfterTurns  *int        `json:"stale_after_turns"`
	Steps            []keyedStep `json:"steps"`
}

type keyedStep struct {
	Name     string `json:"name"`
	Action   string `json:"action"`
	Tool     string `json:"tool"`
	ToolHint string `json:"tool_hint"`
	Verify   *Check `json:"verify"`
	OnFail   string `json:"on_fail"`
	Required *bool  `json:"required"`
}

// DefaultKeyedVersion is the version of a keyed library whose _meta gives
// none.
const DefaultKeyedVersion = "1"

// isKeyed reports whether doc is a library in the keyed format: its plans
// are an object, not an array.
func isKeyed(doc []byte) bool {
	var probe struct {
		Plans json.RawMessage `json:"plans"`
	}
	if json.Unmarshal(doc, &probe) != nil {
		return false
	}
	p := bytes.TrimSpace(probe.Plans)
	return len(p) > 0 && p[0] == '{'
}

// decodeKeyed reads a library in the keyed format into a Library, which
// the caller checks as any other.
func decodeKeyed(doc []byte) (*Library, error) {
	plans, err := keyedPlans(doc)
	if err != nil {
		return nil, err
	}
	if err := schemas.Validate(KeyedSchemaName, doc); err != nil {
		return nil, schemaError(doc, err)
	}
	var kl keyedLibrary
	if err := json.Unmarshal(doc, &kl); err != nil {
		return nil, &Error{Msg: err.Error(), Err: err}
	}
	kl.Plans = plans
	l := &Library{Version: kl.Meta.Version, Description: kl.Meta.Description, keyed: true}
	if l.Version == "" {
		l.Version = DefaultKeyedVersion
	}
	for _, e := range kl.Plans {
		l.Plans = append(l.Plans, e.plan.template(e.id))
	}
	return l, nil
}

// keyedPlans reads the plans object in document order, which is the
// library's order (ties in matching go to the earlier plan). A plan id
// given twice is an error: JSON would silently keep the last.
func keyedPlans(doc []byte) ([]keyedEntry, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, &Error{Msg: err.Error(), Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(top["plans"]))
	if _, err := dec.Token(); err != nil { // {
		return nil, &Error{Field: "plans", Msg: err.Error(), Err: err}
	}
	var out []keyedEntry
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &Error{Field: "plans", Msg: err.Error(), Err: err}
		}
		id, _ := tok.(string)
		if !validTemplateID(id) {
			return nil, &Error{Field: "plans", Msg: fmt.Sprintf("plan id %q: want 1 to 64 letters, digits, '_' or '-'", id)}
		}
		if seen[id] {
			return nil, &Error{Template: id, Msg: "the plan id appears twice in plans"}
		}
		seen[id] = true
		var p keyedPlan
		if err := dec.Decode(&p); err != nil {
			// The schema, checked next, says better what is wrong.
			p = keyedPlan{}
		}
		out = append(out, keyedEntry{id, p})
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) { // }
		return nil, &Error{Field: "plans", Msg: err.Error(), Err: err}
	}
	return out, nil
}

// literal escapes braces, so that text of the keyed format, which has no
// placeholders, reads the same after placeholders are filled in.
func literal(s string) string {
	return strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
}

// template turns a keyed plan into a Template. Its steps are step1,
// step2, ... (the tool ids of its plan); each runs the step's tool as a
// skill with input {"action", "hint"}; its check becomes its gate (Check.Gate)
// for executed plans and stays its Check for guided sessions; required
// false lets an executed plan go on without the step once its attempts
// are spent. A step without a tool is manual (Step.Manual): the agent is
// told what to do with no tool named, and an executed plan waits for a
// person's approval, whose prompt is the step's name and action.
func (p *keyedPlan) template(id string) *Template {
	t := &Template{ID: id, Name: p.Name, Description: p.Description, Domains: p.Domains, Triggers: p.Triggers,
		TriggerThreshold: p.TriggerThreshold, Staleness: Staleness{MaxTurns: DefaultMaxTurns}, keyed: true}
	if p.StaleAfterTurns != nil {
		t.Staleness.MaxTurns = *p.StaleAfterTurns
	}
	for i, ks := range p.Steps {
		s := Step{ID: fmt.Sprintf("step%d", i+1), Name: literal(ks.Name), Action: literal(ks.Action), Skill: ks.Tool,
			Hint: literal(ks.ToolHint), Check: ks.Verify, OnFail: keyedOnFail(ks.OnFail, ks.Required == nil || *ks.Required)}
		in := map[string]string{}
		if ks.Action != "" {
			in["action"] = literal(ks.Action)
		}
		if ks.ToolHint != "" {
			in["hint"] = literal(ks.ToolHint)
		}
		s.Input, _ = marshal(in)
		switch {
		case ks.Tool == "":
			// What a person did cannot be checked on the output of the
			// skill that records it: the approval is the check.
			s.Approval = &plan.Approval{Prompt: literal(manualPrompt(i+1, len(p.Steps), ks.Name, ks.Action))}
		case ks.Verify != nil:
			s.Verify = ks.Verify.Gate()
		}
		t.Steps = append(t.Steps, s)
	}
	return t
}

// manualPrompt is what the approval of manual step i of n asks a person,
// within the 1024 characters Plan JSON allows a prompt.
func manualPrompt(i, n int, name, action string) string {
	p := fmt.Sprintf("Step %d/%d: %s", i, n, name)
	if action != "" {
		p += ": " + action
	}
	return text.Clip(p, 900) + " (a step without a tool: approve it once it is done)"
}

// keyedOnFail maps a keyed step's on_fail: warn (the default) and block
// keep the step in a guided session and are retried twice in a plan;
// retry is retried twice in both; skip and abort act at once. In a plan,
// a step that is not required is skipped once its attempts are spent,
// instead of aborting the plan.
func keyedOnFail(onFail string, required bool) OnFail {
	then := ActionAbort
	if !required {
		then = ActionSkip
	}
	switch Action(onFail) {
	case ActionSkip:
		return OnFail{Then: ActionSkip}
	case ActionAbort:
		return OnFail{Then: ActionAbort}
	case ActionRetry:
		return OnFail{Retries: DefaultRetries, Then: then}
	case ActionBlock:
		return OnFail{Retries: DefaultRetries, Then: then, Guided: ActionBlock}
	default:
		return OnFail{Retries: DefaultRetries, Then: then, Guided: ActionWarn}
	}
}

// Check types: the verifications of the keyed format.
const (
	CheckOutputContains    = "output_contains"     // the output contains Value (any case)
	CheckOutputNotContains = "output_not_contains" // the output does not contain Value (any case)
	CheckExitCodeZero      = "exit_code_zero"      // the command exited with 0
	CheckFileExists        = "file_exists"         // the file Value was made: the agent confirms it
	CheckAnyOutput         = "any_output"          // the output is not blank
	CheckManual            = "manual"              // the agent confirms it: no automatic check
)

// Check is a step's verification in the keyed format, checked against an
// agent's tool output in a guided session (Verify). A plan checks its
// Gate instead.
type Check struct {
	Type  string `json:"type"`
	Value string `json:"value,omitempty"`
}

// Verify checks one tool output. The output's text is a JSON string's
// value, or the compact JSON of anything else; comparisons ignore case.
// exit_code_zero wants exitCode 0 when the result gives one (or the output
// is an object with a numeric exitCode); without one, it passes when the
// text mentions neither "error" nor "exit code". file_exists and manual
// pass: the planner cannot see the agent's files, so the agent confirms
// them, as the context's Verify line asks.
func (c *Check) Verify(output json.RawMessage, exitCode *int) (ok bool, reason string) {
	if c == nil {
		return true, "no check"
	}
	text := strings.ToLower(outputText(output))
	value := strings.ToLower(c.Value)
	switch c.Type {
	case CheckOutputContains:
		if strings.Contains(text, value) {
			return true, c.String()
		}
		return false, fmt.Sprintf("output does not contain %q", c.Value)
	case CheckOutputNotContains:
		if !strings.Contains(text, value) {
			return true, c.String()
		}
		return false, fmt.Sprintf("output contains %q", c.Value)
	case CheckExitCodeZero:
		if code, ok := exitCodeOf(output, exitCode); ok {
			if code == 0 {
				return true, "exit code 0"
			}
			return false, fmt.Sprintf("exit code %d, want 0", code)
		}
		for _, bad := range []string{"error", "exit code"} {
			if strings.Contains(text, bad) {
				return false, fmt.Sprintf("no exit code, and the output mentions %q", bad)
			}
		}
		return true, "no exit code, and the output mentions no error"
	case CheckAnyOutput:
		if strings.TrimSpace(text) != "" {
			return true, "output is not empty"
		}
		return false, "output is empty"
	case CheckFileExists:
		return true, fmt.Sprintf("%s exists (the agent confirms it)", c.Value)
	case CheckManual:
		return true, "confirmed by the agent"
	}
	return false, "unknown check type " + c.Type
}

// String describes the check for people, as the context's Verify line.
func (c *Check) String() string {
	if c == nil {
		return "no check"
	}
	switch c.Type {
	case CheckOutputContains:
		return fmt.Sprintf("output contains %q", c.Value)
	case CheckOutputNotContains:
		return fmt.Sprintf("output does not contain %q", c.Value)
	case CheckExitCodeZero:
		return "exit code 0"
	case CheckAnyOutput:
		return "any output"
	case CheckFileExists:
		return fmt.Sprintf("file %s exists (confirm it)", c.Value)
	case CheckManual:
		return "confirm it yourself"
	}
	return c.Type
}

// Gate is the check as a plan's gate: output_contains and
// output_not_contains become contains and notContains on the whole output,
// exit_code_zero exitCode (the output's /exitCode is 0), any_output
// nonEmpty. file_exists and manual become no gate: nothing that sees only
// the output can check them.
func (c *Check) Gate() *gate.Gate {
	if c == nil {
		return nil
	}
	switch c.Type {
	case CheckOutputContains:
		return &gate.Gate{Type: gate.Contains, Value: literal(c.Value)}
	case CheckOutputNotContains:
		return &gate.Gate{Type: gate.NotContains, Value: literal(c.Value)}
	case CheckExitCodeZero:
		return &gate.Gate{Type: gate.ExitCode}
	case CheckAnyOutput:
		return &gate.Gate{Type: gate.NonEmpty}
	}
	return nil
}

// outputText is a tool output as text: a JSON string's value, "" for
// nothing or null, the JSON itself for anything else (and for output that
// is not JSON at all).
func outputText(output json.RawMessage) string {
	raw := bytes.TrimSpace(output)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// exitCodeOf is the exit code a result gives, or the integer exitCode of
// an object output.
func exitCodeOf(output json.RawMessage, exitCode *int) (int, bool) {
	if exitCode != nil {
		return *exitCode, true
	}
	var obj struct {
		ExitCode *json.Number `json:"exitCode"`
	}
	if raw := bytes.TrimSpace(output); len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &obj) == nil && obj.ExitCode != nil {
		if n, err := obj.ExitCode.Int64(); err == nil && n >= -1<<31 && n < 1<<31 {
			return int(n), true
		}
	}
	return 0, false
}

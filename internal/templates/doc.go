// Package templates is planbus's plan library: static plan templates
// found by domain and trigger phrases, turned into Plan JSON,
// with a verification gate and an onFail action on every step, and a step
// tracker that follows an instance to its end or its expiry, in a plan or
// in a guided session (an agent that runs each step itself).
//
// The package is pure: it reads a library from bytes, does no other I/O,
// starts no goroutines, keeps no global state, and every result is
// deterministic (time comes in as an argument). A *Library and the
// *Template and *Instance values it hands out, with their compiled gates,
// are immutable and safe for concurrent use; a *Tracker belongs to one
// goroutine.
//
// # Library
//
// Decode reads a library in the list format (schemas/template-library.schema.json)
// or in the keyed format agents write (schemas/template-library-keyed.schema.json:
// _meta, plans keyed by id, snake_case, steps with a tool, a tool_hint, a
// Check and an on_fail; keyed.go), checks it against its schema and then
// its meaning: unique ids,
// after lists without cycles, onFail targets that exist, regular
// expressions and gate expressions that compile, placeholders that name
// declared variables, defaults that match their patterns, and that each
// template makes a valid plan. Errors are *Error values naming the
// template, the step and the field, and match ErrInvalid.
//
// A step's name, action, input strings (and keys) and gate values may hold
// {var} placeholders: input is the request's text, the others are
// declared under vars with an optional default and an RE2 pattern the
// whole value must match. {{ and }} write literal braces. Captures, RE2
// patterns with named groups, fill variables from the request's text.
// Inputs may also hold {"$ref": "step#/pointer"} to take an earlier
// step's output, as Plan JSON does.
//
// # Matching
//
// Match ranks the templates that fit a request: a template that lists
// domains needs the request's domain to be one of them (a request without
// a domain matches only templates that list none); a trigger phrase
// matches as whole words, in any case, whatever the punctuation and
// spacing between them ("debug*" matches "debugging"); a template needs
// TriggerThreshold different triggers (default 2). The score is the
// number of matched triggers plus DomainBonus (1); ties go to library
// order.
// Best applies a minimum score; Select picks a template by id or by match
// and instantiates it with the request's variables.
//
// # Plans
//
// ToPlan (Instantiate, then Instance.Plan) makes a plan: one tool per
// step, each after the step before it or its after list, retryPolicy from
// onFail's retries, required false when a failure ends in skip, the
// step's gate as the tool's verify (the fallback step's as the fallback's),
// and in each tool's metadata the step, its onFail and its fallback step
// (ToolMeta). The plan comes back from plan.Decode.
//
// # Gates and onFail
//
// A step's gate is a gate.Gate (package internal/gate), with {var}
// placeholders in its values filled in when the template is instantiated.
// The execution engine checks it against each output of the plan's tool;
// the tracker does the same for a step. A refused output counts as a
// failed attempt. ParseToolMeta reads a tool's metadata. OnFail.Resolve
// says what follows a failed attempt: retry while retries last and the
// failure is retryable, then skip (go on as if the step were optional),
// abort (stop the plan) or fall back (run a fallback step in the step's
// place, or switch the request to another template).
//
// # Tracking
//
// A Tracker follows an Instance: Observe takes each attempt's Result,
// checks the gate, applies onFail and returns the Decision; Next lists
// the steps that may run; Summary prints where the plan stands ("Step
// 2/5: ... → next"). Staleness (more than maxTurns turns, or maxAgeMs,
// since the last progress) is data with a pure Check; State is JSON to
// keep between turns, and Resume continues from it.
//
// # Guided sessions
//
// GuideTurn plays one turn of a guided session (guide.go): with no active
// plan, the turn's message and domain are matched and the best template
// is activated (NewGuidedTracker: missing variables read <name>); with
// one, the turn counts, the plan expires once more than maxTurns turns
// pass without progress, and the turn's last tool output is checked
// against the current step (its Check, else its gate), which advances,
// stays (onFail guided warn or block, or retries left:
// OnFail.ResolveGuided), is skipped or aborts the plan. The reply carries
// the transition, the plan's state and its Context, the text for the
// model ("Step 2 of 5: ... ← YOU ARE HERE").
package templates

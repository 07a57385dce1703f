package planbus

import "encoding/json"

// SkillManifest describes a skill (schemas/skill-manifest.schema.json).
// Workers advertise one per skill they serve in the KV bucket
// planbus-skills; dispatchers take a skill's default timeout and retries
// from it, and planners its parameters and operators.
type SkillManifest struct {
	// Name is the skill's name: 1 to 64 letters, digits, '_' or '-',
	// optionally in a namespace, NAMESPACE.NAME (as an MCP server's tools
	// are served). It becomes subject tokens (planbus.tools.<name>) and,
	// the dot written '~', a consumer name.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	// InputSchema is a JSON Schema (2020-12) for the tool's input. A
	// worker checks every call against it before the handler runs.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema is a JSON Schema (2020-12) for the tool's output. A
	// worker checks every output the handler returns against it: one that
	// breaks it fails the attempt with OUTPUT_INVALID (category
	// permanent). Planners may read it to know what dependents can reach.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Parameters name the positional arguments of HTN operators, in
	// order: an operator walk(home, park) calls a skill with parameters
	// [from, to] with the input {"from": "home", "to": "park"}.
	Parameters []string `json:"parameters,omitempty"`
	// TimeoutMs and RetryPolicy are the defaults for plan tools that leave
	// theirs out.
	TimeoutMs   int64        `json:"timeoutMs,omitempty"`
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`
	// Concurrency bounds the calls of this skill in flight across all its
	// workers; 0 means no bound beyond each worker's own.
	Concurrency int `json:"concurrency,omitempty"`
	// Operators are the HTN operators this skill performs; empty means the
	// operator with the skill's own name.
	Operators []string `json:"operators,omitempty"`
	// ReadOnly says the skill changes nothing outside it, and Idempotent
	// that calling it again with the same input has no further effect:
	// hints for planners and people (an MCP server's tool annotations
	// readOnlyHint and idempotentHint become them).
	ReadOnly   bool `json:"readOnly,omitempty"`
	Idempotent bool `json:"idempotent,omitempty"`
}

// RetryPolicy says how often a tool is tried and how long to wait between
// tries: before attempt n+1 the dispatcher waits BackoffMs × 2^(n−1).
type RetryPolicy struct {
	MaxAttempts int   `json:"maxAttempts"`
	BackoffMs   int64 `json:"backoffMs"`
}

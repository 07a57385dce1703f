// Package gate holds verification gates: checks of one tool output that
// decide whether a tool that succeeded did what it was for. A plan tool
// carries one in its "verify" field (its fallback may carry its own); the
// execution engine checks every succeeded result against the gate of the
// attempt's variant, and a refused output counts as a failed attempt with
// code VERIFY_FAILED. Plan templates give each step one.
//
// A Gate checks its subject, the value at a JSON pointer in the output (or
// the whole output): nonEmpty, contains, notContains, matches (RE2),
// equals, exists, exitCode (the shell skill's), httpStatus (the http
// skill's), expr (an expr-lang expression over output and text, with the
// builtins that read the clock or expose map order disabled) and all.
// Check returns the verdict and why, in words a person can act on.
//
// The package is pure: no I/O, no goroutines, no global state, and every
// verdict is deterministic, so a result checked again gets the same one.
// Parse and Compile report a bad gate as an error matching ErrInvalid that
// names the field at fault. A compiled Gate is immutable and safe for
// concurrent use.
package gate

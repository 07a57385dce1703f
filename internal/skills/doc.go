// Package skills holds what tool workers run: the Handler interface and its
// middleware, skill manifests, and the built-in skills echo, sleep, fail,
// shell and http.
//
// A Handler receives one attempt of one tool call. It must honour ctx: the
// worker cancels it at the call's deadline, when the plan ends, and on
// shutdown. The call's IdempotencyKey (planId/toolId/attempt) is the same
// for every delivery of an attempt, so a handler with side effects can make
// them idempotent: delivery is at least once.
//
// The two built-ins that reach outside refuse the dangerous by default: http
// connects only to public addresses (HTTPConfig.AllowPrivate opens the
// rest), shell runs only allowed programs, without their dangerous options,
// paths outside its directory or variables not allowed, under resource
// limits (ShellConfig, ParseShellAllow, ShellLimits).
package skills

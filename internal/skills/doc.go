// Package skills holds the skills planbus ships: echo, sleep, fail, shell,
// http and remember (Builtins), and the stand-ins of Simulated for demos
// and planner tests. They are written against the public skill API, as a
// user's own skills are, and served by the public worker.
//
// The two built-ins that reach outside refuse the dangerous by default: http
// connects only to public addresses (HTTPConfig.AllowPrivate opens the
// rest), shell runs only allowed programs, without their dangerous options,
// paths outside its directory or variables not allowed, under resource
// limits (ShellConfig, ParseShellAllow, ShellLimits; the limits are applied
// by a re-exec of the running binary, internal/rlimit).
package skills

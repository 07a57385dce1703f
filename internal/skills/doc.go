// Package skills holds the skills planbus ships, written against the
// public skill API as a user's own skills are and served by the public
// worker:
//   - Echo (its input back), Sleep ({"ms": N}), Fail (a chosen error, for
//     the first N attempts or always) and Remember (its input deep-merged
//     into the session state);
//   - Shell (one allowed program per call, never through a shell) and
//     HTTP (one request per call);
//   - Builtins, all six with one BuiltinConfig, as `planner serve` and
//     cmd/toolworker serve them;
//   - Simulated, a stand-in made from a spec: "walk(from,to)" succeeds,
//     echoing its input, "walk(from,to)=network" always fails with an error
//     of that category; for the demos (--simulate) and planner tests.
//
// The two that reach outside refuse the dangerous by default. HTTP
// connects only to public addresses, checked on the address it dials
// (HTTPConfig: AllowHosts, AllowPrivate, BodyCap, OutputCap); its errors
// are HTTP_<status> (planbus.CodeHTTPStatus: 429 and 5xx transient,
// other 4xx permanent) and the planbus.CodeHTTP* codes. Shell runs only the programs on ShellConfig.Allow
// (ParseShellAllow reads --shell-allow), without their code-running
// options, paths outside ShellConfig.Dir or variables not on
// ShellConfig.EnvAllow (ParseShellEnvAllow), under ShellConfig.Limits
// (ShellLimits: CPU time, memory, file size, processes; applied through a
// re-exec of the running binary, internal/rlimit); a program that exits
// non-zero is planbus.CodeExitNonzero, one killed at a limit
// planbus.CodeShellCPULimit or planbus.CodeShellFileSizeLimit. docs/skills.md has what each refuses and why.
//
// Skill health and its store are not here but in internal/health; the
// handler API and its middleware are in package skill.
package skills

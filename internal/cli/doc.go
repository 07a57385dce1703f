// Package cli holds what the commands of cmd/planner, cmd/dispatcher and
// cmd/toolworker share, so that their mains stay thin and the commands
// can be tested in-process: each command takes its arguments and an IO
// (streams and environment) and returns an exit code: ExitOK (0),
// ExitFailed (1: the plan or request failed, timed out, fell back or was
// cancelled, or the command could not do its work), ExitUsage (2: bad
// flags, or input that is not a valid plan or request), and ExitSignal
// (130) when interrupted.
//
// The commands themselves are a package a binary: plannercmd (with
// benchcmd and authcmd, its bench and auth commands, and progress, what
// run and watch show), dispatchercmd and toolworkercmd.
//
// flags.go gives every flag an environment variable (the command line
// wins over the variable, which wins over the default) and the flags
// common to all commands: the NATS connection and credentials, the
// embedded server's, logging. auth.go is protected mode (an embedded
// server beyond loopback needs --auth); dispatcher.go and toolworker.go
// the flags of the components, which planner serve runs too; metrics.go
// --metrics and who may read /metrics; tracing.go the OTEL setup of
// every main.
//
// The tests here run the binaries as processes (process, chaos, soak and
// custom-skill tests); the commands' own tests are in their packages.
package cli

// Package cli holds the commands behind cmd/planner, cmd/dispatcher and
// cmd/toolworker, so that their mains stay thin and the commands can be
// tested in-process: Planner, Dispatcher and Toolworker each take their
// arguments and an IO (streams and environment) and return an exit code:
// ExitOK (0), ExitFailed (1: the plan or request failed, timed out, fell
// back or was cancelled, or the command could not do its work), ExitUsage
// (2: bad flags, or input that is not a valid plan or request), and 130
// when interrupted.
//
// The planner verbs, one file each where they are more than a few lines:
//   - run (planner.go, request.go): a plan or a request end to end, on
//     --nats-url or on a private embedded node, progress on stderr
//     (progress.go) and the result last on stdout;
//   - serve (planner.go): a node (embedded NATS, planner, dispatcher,
//     workers) until interrupted, or, with --nats-url, the planner service
//     alone; a component that dies stops the node with exit code 1;
//   - submit, watch, cancel, ls (verbs.go), status (status.go), guide
//     (guide.go): clients of a running system, through the public client
//     package;
//   - ui (web.go): the web view (internal/web) of a running system; web.go
//     also serves it for serve (--http, by default) and run (--http), on
//     the process's one HTTP server;
//   - bench (bench.go), htn (internal/htncli), auth init (auth.go) and
//     version.
//
// dispatcher.go and toolworker.go are the other two commands. flags.go
// gives every flag an environment variable (the command line wins over
// the variable, which wins over the default) and the flags common to all
// commands: the NATS connection and credentials, the embedded server's,
// logging.
package cli

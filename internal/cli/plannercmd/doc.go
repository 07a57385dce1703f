// Package plannercmd is the planner command behind cmd/planner: Run takes
// the arguments (the first one the command) and an IO (package cli) and
// returns the exit code, so that cmd/planner's main stays thin and the
// commands can be tested in-process. One command a file, as litestream's
// cmd/litestream has it:
//   - run (run.go, request.go): a plan or a request end to end, on
//     --nats-url or on a private embedded node, progress on stderr
//     (package progress) and the result last on stdout;
//   - serve (serve.go, node.go): a node (embedded NATS, planner,
//     dispatcher, workers) until interrupted, or, with --nats-url, the
//     planner service alone; a component that dies stops the node with
//     exit code 1;
//   - submit, watch, cancel, approve, ls, skills, reset, status, agent,
//     guide: clients of a running system, through the public client
//     package (client.go holds what they share);
//   - ui (ui.go): the web view of a running system; view.go serves the
//     view (package web) for ui, serve (--http, by default) and run
//     (--http), on the process's one HTTP server, with /metrics beside it.
//     This package is linked by cmd/planner alone, so the view is in that
//     binary only;
//   - htn (htn.go): an InductorHtn domain planned and printed as the
//     reference engine prints it;
//   - bench and auth, packages of their own (benchcmd, authcmd), and
//     version.
package plannercmd

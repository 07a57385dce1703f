// Package rlimit starts programs under resource limits (setrlimit), set
// before the program's first instruction.
//
// Go cannot set a child's limits between fork and exec, and setting them
// on a child that already runs (prlimit) races with what it does first.
// So Command makes the running binary start itself as a helper, with the
// variable Env naming the limits: this package's init, run before main
// and before a test binary's TestMain, sets the limits on the helper
// process and execs the program in its place. The program keeps the
// helper's pid and process group. The helper needs no other binary, so it
// works in an image that holds only the worker.
//
// The package imports little, so that the helper's start-up runs few other
// packages' initialisation before it execs.
package rlimit

// Package htncli is the command-line front end of the htn planner:
//
//	htn -program FILE [-goal 'travel-to(park)'] [-first] [-query] [-facts] [-budget BYTES]
//
// It prints plans, query answers and final facts in the exact format of
// the InductorHtn reference engine, so outputs can be compared string for
// string. Run is called by the planner binary's main; it owns the I/O and
// leaves planning to package htn.
//
// Exit status: 0 when a plan (or query answer) was found, 1 when there is
// none or planning failed (the reason is on stderr), 2 for usage errors and
// for programs or goals that do not parse (the message names
// file:line:column).
package htncli

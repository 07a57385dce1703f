// Package health follows each skill's health per session: the state
// machine (healthy, degraded, temporaryFailure, permanentFailure) that tool
// results drive, in Record.Apply, and the Book that keeps the records in
// the KV bucket planbus-health under <sessionId>.<skill>, changed with
// compare-and-set by every dispatcher and read by planners, which plan
// without the skills in permanentFailure.
//
// Health is per session, so one user's failures do not disable a skill
// for everyone; Book.Reset is the "session restart" that heals them all.
// The default session, which requests that name none share whoever sends
// them, keeps no health at all (Keeps).
package health

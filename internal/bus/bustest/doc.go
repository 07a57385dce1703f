// Package bustest starts a real embedded JetStream server for tests: one
// per test, on a free port of 127.0.0.1, with its store in t.TempDir(),
// stopped by t.Cleanup. There is no mock of the bus. Eventually is the
// tests' one way to wait for a condition that raises no event.
package bustest

// Package skilltest calls one skill in a test, with a call built from a Go
// value, through the middleware a worker runs it in (skill.Wrap): the
// input is checked against the manifest's input schema, the output against
// its output schema, a panic becomes a TOOL_PANIC error and the call's
// timeout ends the handler's context. It needs no NATS server: to run
// skills in plans, on a bus, use package planbustest.
//
//	func TestWordcount(t *testing.T) {
//		res, err := skilltest.Call(t, wordcount(), map[string]any{"text": "to be or not to be"})
//		if err != nil {
//			t.Fatal(err)
//		}
//		if got := skilltest.Output[Count](t, res); got.Words != 6 {
//			t.Errorf("got %d words, want 6", got.Words)
//		}
//	}
//
// The error Call returns is the handler's, as the chain passed it on, or
// the one a worker would report for a result it refuses
// (skill.Result.Check): skill.ErrorInfo gives its code and category, as a
// worker reports them.
//
// Everything here is safe for concurrent use: parallel subtests may call
// one skill at once.
package skilltest

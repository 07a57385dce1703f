package guide

import (
	"errors"
	"testing"

	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
)

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s1","message":"fix the bug","domain":"bugfix"}`,
		`{"sessionId":"s1","message":"","toolResults":[{"tool":"t","output":"x","exitCode":1},{"skill":"shell","output":{"stdout":""}}]}`,
		`{"sessionId":"a.b","message":"x"}`, `{"message":"x"}`, `{"sessionId":"s","message":"x","toolResults":[{}]}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		q, err := Decode(doc)
		if err != nil {
			if !errors.Is(err, request.ErrInvalid) {
				t.Fatalf("error %v is not an invalid request", err)
			}
			return
		}
		if !plan.ValidID(q.SessionID) {
			t.Fatalf("decoded session id %q", q.SessionID)
		}
		for i, r := range q.ToolResults {
			if r.Output == nil {
				t.Fatalf("result %d without output", i)
			}
		}
	})
}

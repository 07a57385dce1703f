package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/session"
)

// TestConcurrentPatchesAllSurvive patches one session from many goroutines,
// each on its own connection, and checks that no update was lost.
func TestConcurrentPatchesAllSurvive(t *testing.T) {
	cfg := bustest.Start(t)
	ctx := context.Background()
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		st, err := session.Open(ctx, bustest.Dial(t, cfg).JS)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				patch := fmt.Sprintf(`{"w%d": {"n%d": %d}, "last": %d}`, w, i, i, w)
				if _, err := st.Patch(ctx, "s1", []byte(patch)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st, _ := session.Open(ctx, bustest.Dial(t, cfg).JS)
	got, err := st.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		m, _ := got[fmt.Sprintf("w%d", w)].(map[string]any)
		if len(m) != each {
			b, _ := json.Marshal(got)
			t.Fatalf("writer %d: %d of %d patches survived: %s", w, len(m), each, b)
		}
	}
}

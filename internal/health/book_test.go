package health_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/health"
)

// wait bounds every wait on the bus; a test that passes never waits it out.
const wait = 20 * time.Second

// Two books on one bucket stand for two dispatchers: changes made through
// one are seen by the other, concurrent failures are all counted, and a
// reset heals the session's skills and no other session's.
func TestBookSharesHealthAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cfg := bustest.Start(t)
	books := make([]*health.Book, 2)
	for i := range books {
		b, err := health.Open(ctx, bustest.Dial(t, cfg).JS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		books[i] = b
	}

	// A success of a healthy skill needs no write.
	if books[0].Quick("s1", "walk", health.Outcome{Key: "p/t/1", Succeeded: true}) {
		t.Error("Quick: a success of a healthy skill could change its health")
	}

	// Failures from both books at once: three in all degrade the skill,
	// whichever order compare-and-set puts them in.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Go(func() {
			o := health.Outcome{Key: fmt.Sprintf("p/t%d/1", i), Category: "internal", Error: "boom"}
			_, _, err := books[i%2].Apply(ctx, "s1", "walk", o)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	for i, b := range books {
		bustest.Eventually(t, wait, fmt.Sprintf("book %d sees walk degraded", i), func() (bool, string) {
			h := b.Get("s1", "walk")
			return h.State == health.Degraded, h.State
		})
	}
	if h := books[1].Get("s2", "walk"); h.State != health.Healthy {
		t.Errorf("walk in another session: %s, want healthy", h.State)
	}

	// A timeout on the last attempt disables a skill at once.
	before, after, err := books[1].Apply(ctx, "s1", "ride", health.Outcome{Key: "p/r/3", Category: "timeout", Final: true})
	if err != nil {
		t.Fatal(err)
	}
	if before.State != health.Healthy || after.State != health.PermanentFailure {
		t.Errorf("ride went %s -> %s, want healthy -> permanentFailure", before.State, after.State)
	}
	// The same outcome again (a redelivered result) changes nothing.
	if _, again, err := books[1].Apply(ctx, "s1", "ride", health.Outcome{Key: "p/r/3", Category: "timeout", Final: true}); err != nil || again.State != health.PermanentFailure || again.Failures != after.Failures {
		t.Errorf("the same outcome again: %+v, %v; want %+v", again, err, after)
	}
	bustest.Eventually(t, wait, "book 0 sees ride disabled", func() (bool, string) {
		d := books[0].Disabled("s1")
		return slices.Equal(d, []string{"ride"}), fmt.Sprint(d)
	})

	changed, err := books[0].Reset(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(changed)
	if !slices.Equal(changed, []string{"ride", "walk"}) {
		t.Errorf("Reset healed %v, want [ride walk]", changed)
	}
	bustest.Eventually(t, wait, "book 1 sees session s1 reset", func() (bool, string) {
		s := books[1].Session("s1")
		return len(s) == 0, fmt.Sprint(s)
	})
}

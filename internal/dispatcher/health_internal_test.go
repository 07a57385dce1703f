package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/health"
)

// The engines learn of skill health only through timeoutFactor: a
// degraded skill's calls get health.DegradedTimeoutFactor times their
// timeout, in its own session only; every other state gets its own. The
// default session keeps no health (health.Keeps), so its skills never
// get longer timeouts.
func TestTimeoutFactorFollowsTheHealthBook(t *testing.T) {
	conn := bustest.Dial(t, bustest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	book, err := health.Open(ctx, conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	defer book.Close()
	d := &Dispatcher{health: book}
	fail := func(session, skill string, n int, category planbus.Category) {
		for i := range n {
			if _, _, err := book.Apply(ctx, session, skill, health.Outcome{Key: fmt.Sprintf("%s/%s/%d", session, skill, i),
				Category: category, Error: "boom"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fail("s1", "slow", health.FailuresToDegrade, planbus.CategoryTransient)
	fail("s1", "flaky", 1, planbus.CategoryTimeout)
	fail(planbus.DefaultSession, "slow", health.FailuresToDegrade, planbus.CategoryTransient)
	want := map[[2]string]int64{
		{"s1", "slow"}:                    health.DegradedTimeoutFactor,
		{"s1", "flaky"}:                   1, // temporaryFailure
		{"s1", "fine"}:                    1,
		{"s2", "slow"}:                    1,
		{"", "slow"}:                      1, // "" is the default session
		{planbus.DefaultSession, "slow"}:  1,
		{planbus.DefaultSession, "flaky"}: 1,
	}
	// The book learns of its writes through its bucket's watch, which
	// raises no event to wait on.
	bustest.Eventually(t, 10*time.Second, "the book shows the failures", func() (bool, string) {
		slow, flaky := book.Get("s1", "slow"), book.Get("s1", "flaky")
		return slow.State == health.Degraded && flaky.State == health.TemporaryFailure, fmt.Sprintf("%+v, %+v", slow, flaky)
	})
	for k, f := range want {
		if got := d.timeoutFactor(k[0], k[1]); got != f {
			t.Errorf("timeoutFactor(%q, %q) = %d, want %d (health %+v)", k[0], k[1], got, f, book.Get(k[0], k[1]))
		}
	}
}

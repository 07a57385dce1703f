package dispatcher

import (
	"testing"
	"time"
)

// A held timer is taken once, and only while it is not due; entries past
// their time are swept when the next timer is held a sweep later.
func TestTimeoutsHoldTakeSweep(t *testing.T) {
	var ts timeouts
	now := time.Unix(1000, 0)
	ts.hold("p1", "$JS.ACK.a", now.Add(time.Minute), now)
	ts.hold("p2", "$JS.ACK.b", now.Add(time.Second), now)
	if reply, ok := ts.take("p1", now); !ok || reply != "$JS.ACK.a" {
		t.Fatalf("take p1 = %q, %v", reply, ok)
	}
	if _, ok := ts.take("p1", now); ok {
		t.Error("p1 taken twice")
	}
	// Due: its delivery is spent, so it is not acknowledged, but forgotten.
	if _, ok := ts.take("p2", now.Add(2*time.Second)); ok || ts.held() != 0 {
		t.Errorf("a due timer was taken (held %d)", ts.held())
	}
	ts.hold("p3", "$JS.ACK.c", now.Add(time.Second), now)
	ts.hold("p4", "$JS.ACK.d", now.Add(time.Hour), now.Add(30*time.Second))
	if ts.held() != 2 {
		t.Fatalf("held %d, want 2 before a sweep is due", ts.held())
	}
	ts.hold("p5", "$JS.ACK.e", now.Add(time.Hour), now.Add(2*time.Minute))
	if ts.held() != 2 {
		t.Errorf("held %d after the sweep, want p4 and p5", ts.held())
	}
	if _, ok := ts.take("p3", now); ok {
		t.Error("a swept timer was taken")
	}
}

// held is how many timers are held.
func (t *timeouts) held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

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
	ts.hold("p1", "$JS.ACK.a", 1, now.Add(time.Minute), now)
	ts.hold("p2", "$JS.ACK.b", 1, now.Add(time.Second), now)
	if reply, ok, _ := ts.take("p1", 1, now); !ok || reply != "$JS.ACK.a" {
		t.Fatalf("take p1 = %q, %v", reply, ok)
	}
	if _, ok, _ := ts.take("p1", 1, now); ok {
		t.Error("p1 taken twice")
	}
	// Due: its delivery is spent, so it is not acknowledged, but forgotten.
	if _, ok, held := ts.take("p2", 1, now.Add(2*time.Second)); ok || !held || ts.held() != 0 {
		t.Errorf("a due timer was taken (held %d)", ts.held())
	}
	ts.hold("p3", "$JS.ACK.c", 1, now.Add(time.Second), now)
	ts.hold("p4", "$JS.ACK.d", 1, now.Add(time.Hour), now.Add(30*time.Second))
	if ts.held() != 2 {
		t.Fatalf("held %d, want 2 before a sweep is due", ts.held())
	}
	ts.hold("p5", "$JS.ACK.e", 1, now.Add(time.Hour), now.Add(2*time.Minute))
	if ts.held() != 2 {
		t.Errorf("held %d after the sweep, want p4 and p5", ts.held())
	}
	if _, ok, held := ts.take("p3", 1, now); ok || held {
		t.Error("a swept timer was taken")
	}
}

// A timer held before the connection was lost is not acknowledged
// through the ack subject of its delivery: the server may have given its
// sequence to another timer since. It is reported held, to be purged.
func TestTimeoutsHeldBeforeAReconnectAreNotAcknowledged(t *testing.T) {
	var ts timeouts
	now := time.Unix(1000, 0)
	ts.hold("p1", "$JS.ACK.a", 3, now.Add(time.Minute), now)
	if reply, ok, held := ts.take("p1", 4, now); ok || !held {
		t.Errorf("take after a reconnect = %q, ok %v, held %v; want not ok, held", reply, ok, held)
	}
	if _, _, held := ts.take("p1", 4, now); held {
		t.Error("p1 still held after it was taken")
	}
}

// held is how many timers are held.
func (t *timeouts) held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

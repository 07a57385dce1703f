package planner

import (
	"testing"
	"time"
)

// A key waits only for its own holder (striped locks made a request wait
// for another's five-second search when their ids shared a stripe), and
// a lock nobody holds or waits for is forgotten.
func TestKeyedLocks(t *testing.T) {
	var k keyedLocks
	unlockA := k.lock("a")
	got := make(chan string, 2)
	bDone, aDone := make(chan struct{}), make(chan struct{})
	go func() { u := k.lock("b"); got <- "b"; u(); close(bDone) }()
	if v := <-got; v != "b" {
		t.Fatalf("got %s", v)
	}
	go func() { u := k.lock("a"); got <- "a again"; u(); close(aDone) }()
	select {
	case v := <-got:
		t.Fatalf("%s while a was held", v)
	case <-time.After(50 * time.Millisecond):
		// Still waiting, as it should: a is held. (A timeout here
		// checks that something does not happen; it waits on no event.)
	}
	unlockA()
	if v := <-got; v != "a again" {
		t.Fatalf("got %s", v)
	}
	<-aDone
	<-bDone
	k.lock("c")()
	k.mu.Lock()
	n := len(k.keys)
	k.mu.Unlock()
	if n != 0 {
		t.Errorf("%d locks kept after every holder let go", n)
	}
}

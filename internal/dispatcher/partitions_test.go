package dispatcher_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/plan"
)

// settled waits until dispatchers dispatchers each see all of them and
// together own every partition once.
func settled(t *testing.T, h *harness, dispatchers int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		owned := dispatcherStatSum(t, h, "partitionsOwned", dispatchers)
		seen := dispatcherStatSum(t, h, "dispatchersSeen", dispatchers)
		if owned == bus.DefaultPartitions && seen == int64(dispatchers*dispatchers) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dispatchers own %d partitions between them and see %d dispatchers in all; want %d and %d",
				dispatchers, owned, seen, bus.DefaultPartitions, dispatchers*dispatchers)
		}
		time.Sleep(50 * time.Millisecond) // the dispatchers rebalance once a second
	}
}

// Two dispatchers share the partitions out, so each plan's messages go to
// one of them: plans run with no contention for their state. When one
// dies, the other takes up its partitions and plans go on.
func TestDispatchersSharePartitionsAndTakeOverADeadOnes(t *testing.T) {
	h := start(t, opts{dispatchers: 2, workers: 2, concurrency: 16})
	settled(t, h, 2)
	conflicts := dispatcherStatSum(t, h, "casConflicts", 2)
	var tools []string
	for i := range 6 {
		tools = append(tools, fmt.Sprintf(`{"toolId":"a%d","skill":"echo"}`, i))
	}
	tools = append(tools, `{"toolId":"z","skill":"echo","dependencies":["a0","a1","a2","a3","a4","a5"]}`)
	doc := `{"tools":[` + strings.Join(tools, ",") + `]}`
	var done []<-chan *plan.ExecutionResult
	for range 24 {
		done = append(done, h.submit(doc, minute, nil))
	}
	for i, ch := range done {
		if res := receive(t, ch, "a plan's result"); res == nil || !res.Success {
			t.Fatalf("plan %d: %+v", i, res)
		}
	}
	if n := dispatcherStatSum(t, h, "casConflicts", 2) - conflicts; n != 0 {
		t.Errorf("%d compare-and-sets lost over 24 plans: two dispatchers contended for a plan's state", n)
	}

	h.node.Dispatchers[0].Kill()
	settled(t, h, 1)
	res, _ := h.run(doc, minute)
	if !res.Success {
		t.Fatalf("after a dispatcher died: %s %+v", res.State, res.Error)
	}
}

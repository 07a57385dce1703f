package planner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/planner"
)

// storeRequests stores n accepted requests straight into the REQUESTS
// stream, while the planners' consumer of it is paused (so none runs):
// what a busy system has accepted: r-<from> to r-<from+n-1>, doc giving
// request i's document.
func (h *harness) storeRequests(ctx context.Context, from, n int, doc func(i int) string) {
	h.t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := h.conn.JS.PublishAsync(bus.RequestSubject(fmt.Sprintf("r-%d", i)), []byte(doc(i))); err != nil {
			h.t.Fatal(err)
		}
		if i%500 == 499 {
			select {
			case <-h.conn.JS.PublishAsyncComplete():
			case <-ctx.Done():
				h.t.Fatal("publishing the requests did not finish")
			}
		}
	}
	select {
	case <-h.conn.JS.PublishAsyncComplete():
	case <-ctx.Done():
		h.t.Fatal("publishing the requests did not finish")
	}
}

// `planner ls --since 1h --text deploy` as the planner answers it: one
// request among 5,000 found by a word of its description, the time range
// and the kind narrowing, and paging on from a cursor.
func TestListFindsARequestAmongFiveThousand(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := h.conn.JS.PauseConsumer(ctx, bus.StreamRequests, bus.ConsumerPlannerRequests, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	plan := func(i int, description string) string {
		return fmt.Sprintf(`{"requestId":"r-%d","kind":"plan","plan":{"description":%q,"tools":[{"toolId":"a","skill":"echo"}]}}`, i, description)
	}
	// An old deploy, then 4,000 others, then (after the cut) 999 more
	// and one new deploy among them.
	h.storeRequests(ctx, 0, 1, func(i int) string { return plan(i, "Deploy the old release") })
	h.storeRequests(ctx, 1, 4000, func(i int) string { return plan(i, "nightly report") })
	st, err := h.conn.JS.Stream(ctx, bus.StreamRequests)
	if err != nil {
		t.Fatal(err)
	}
	lastOld, err := st.GetLastMsgForSubject(ctx, bus.RequestSubject("r-4000"))
	if err != nil {
		t.Fatal(err)
	}
	cut := lastOld.Time.Add(time.Nanosecond)
	h.storeRequests(ctx, 4001, 1000, func(i int) string {
		if i == 4501 {
			return fmt.Sprintf(`{"requestId":"r-%d","kind":"external","planner":"planners.ops","input":"please DEPLOY v2 to staging"}`, i)
		}
		return plan(i, "hourly sync")
	})

	list := func(q planbus.ListRequest) *planbus.ListReply {
		t.Helper()
		reply, err := h.c.Inspector().List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	ids := func(r *planbus.ListReply) string {
		var s []string
		for _, x := range r.Requests {
			s = append(s, x.RequestID)
		}
		return strings.Join(s, ",")
	}
	if got := ids(list(planbus.ListRequest{Text: "deploy", Since: cut})); got != "r-4501" {
		t.Errorf("deploy since the cut: %s, want r-4501", got)
	}
	if got := ids(list(planbus.ListRequest{Text: "deploy"})); got != "r-4501,r-0" {
		t.Errorf("deploy at any time: %s, want r-4501,r-0", got)
	}
	if got := ids(list(planbus.ListRequest{Text: "deploy", Kind: "plan"})); got != "r-0" {
		t.Errorf("deploy of kind plan: %s, want r-0", got)
	}
	if got := ids(list(planbus.ListRequest{Text: "DEPLOY", Until: cut})); got != "r-0" {
		t.Errorf("deploy until the cut: %s, want r-0", got)
	}
	if r := list(planbus.ListRequest{Text: "nothing like it", Since: cut}); len(r.Requests) != 0 || r.More {
		t.Errorf("a text nothing has, since the cut: %+v; want none and no more (the scan stops at the cut)", r)
	}
	// Pages: 3 at a time, on from each page's cursor, cover the newest
	// requests in order without a gap.
	var seen []string
	q := planbus.ListRequest{Limit: 3, Since: cut}
	for range 4 {
		r := list(q)
		if !r.More || r.Next == 0 || len(r.Requests) != 3 {
			t.Fatalf("page %+v: want 3 requests and a cursor", r)
		}
		seen = append(seen, ids(r))
		q.Before = r.Next
	}
	if got, want := strings.Join(seen, ","), "r-5000,r-4999,r-4998,r-4997,r-4996,r-4995,r-4994,r-4993,r-4992,r-4991,r-4990,r-4989"; got != want {
		t.Errorf("pages %s, want %s", got, want)
	}
	// The requests are queued: none ran.
	if r := list(planbus.ListRequest{Limit: 1}); len(r.Requests) != 1 || r.Requests[0].Status != planbus.RequestQueued {
		t.Errorf("newest request %+v, want queued", r.Requests)
	}
}

package planner_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/planner"
	"github.com/planbus/planbus/internal/token"
)

// messages returns the bodies of the messages stream holds on subject.
func (h *harness) messages(ctx context.Context, stream, subject string) [][]byte {
	h.t.Helper()
	cons, err := h.conn.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out [][]byte
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			h.t.Fatalf("%s on %s: %v", stream, subject, err)
		}
		out = append(out, m.Data())
	}
	return out
}

func (h *harness) value(ctx context.Context, bucket, key string) []byte {
	h.t.Helper()
	kv, err := h.conn.JS.KeyValue(ctx, bucket)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		h.t.Fatalf("%s %s: %v", bucket, key, err)
	}
	return e.Value()
}

// Result and cancel tokens stay between dispatchers and the workers that
// run the calls: events, the execution result, the outcome and the stored
// states never show them, whatever the plan went through (retries, a
// required failure that cancels a running sibling).
func TestTokensNeverLeaveTheCalls(t *testing.T) {
	h := start(t, planner.Config{}, simulated(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	requests := map[string]struct {
		doc  string
		want map[string]planbus.ToolState // tool id -> state
	}{
		"retried": {`{"requestId":"retried","kind":"plan","plan":{"tools":[
			{"toolId":"flaky","skill":"fail","input":{"category":"network","attempts":1},"retryPolicy":{"maxAttempts":3,"backoffMs":1}},
			{"toolId":"after","skill":"echo","dependencies":["flaky"],"input":{"from":{"$ref":"flaky"}}}]}}`,
			map[string]planbus.ToolState{"flaky": planbus.ToolSucceeded, "after": planbus.ToolSucceeded}},
		"cancelled": {`{"requestId":"cancelled","kind":"plan","plan":{"tools":[
			{"toolId":"long","skill":"sleep","input":{"ms":60000}},
			{"toolId":"broken","skill":"fail","input":{"category":"permanent","ms":200}}]}}`,
			map[string]planbus.ToolState{"long": planbus.ToolCancelled, "broken": planbus.ToolFailed}},
	}
	key := func() *token.Key {
		k, err := token.Decode(h.value(ctx, bus.BucketKeys, token.KVKey))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}()
	for requestID, tt := range requests {
		t.Run(requestID, func(t *testing.T) {
			out, _ := h.request(tt.doc)
			if out.Execution == nil {
				t.Fatalf("outcome %s without an execution", out.Status)
			}
			for _, tl := range out.Execution.Tools {
				if tl.State != tt.want[tl.ToolID] {
					t.Errorf("%s: %s, want %s", tl.ToolID, tl.State, tt.want[tl.ToolID])
				}
			}
			planID := out.Execution.PlanID
			secrets := map[string]string{"cancel token": key.Cancel(planID)}
			for _, tl := range out.Execution.Tools {
				for a := 1; a <= 3; a++ {
					secrets[fmt.Sprintf("result token of %s attempt %d", tl.ToolID, a)] = key.Result(planID, tl.ToolID, a)
				}
			}
			// The tokens looked for are the real ones: the workers' results echo them.
			results := h.messages(ctx, bus.StreamResults, bus.Partitioned(bus.SubjectResultsAll).Of(planID))
			if len(results) == 0 || !bytes.Contains(results[0], []byte(`"token":"`)) {
				t.Fatalf("%d results of plan %s, the first without a token", len(results), planID)
			}
			found := 0
			for _, r := range results {
				for _, s := range secrets {
					if bytes.Contains(r, []byte(s)) {
						found++
					}
				}
			}
			if found != len(results) {
				t.Fatalf("%d of %d results carry a token computed from the stored key", found, len(results))
			}

			places := map[string][][]byte{
				"events":           h.messages(ctx, bus.StreamEvents, bus.EventsOfRequest(requestID)),
				"execution result": h.messages(ctx, bus.StreamExecutions, bus.ExecutionSubject(planID)),
				"outcome":          h.messages(ctx, bus.StreamOutcomes, bus.OutcomeSubject(requestID)),
				"plan state":       {h.value(ctx, bus.BucketPlans, bus.StateKey(planID))},
				"request state":    {h.value(ctx, bus.BucketRequests, requestID)},
			}
			for where, msgs := range places {
				if len(msgs) == 0 {
					t.Errorf("no %s to look at", where)
				}
				for _, m := range msgs {
					for what, s := range secrets {
						if bytes.Contains(m, []byte(s)) {
							t.Errorf("the %s shows the %s: %s", where, what, m)
						}
					}
				}
			}
		})
	}
}

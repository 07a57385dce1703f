package agent

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/telemetry"
)

// A turn tried again after a lost compare-and-set may find another agent
// in the session (the first stopped, a new one started meanwhile): what it
// does for the new agent is recorded in the new agent's trace, under its
// own span, and the first agent's span ends.
func TestATurnThatFindsAnotherAgentTracesItThere(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	conn := bustest.Dial(t, bustest.Start(t))
	s := New(conn, lockHost{}, Config{Tracer: telemetry.Tracer(tp)}, zerolog.Nop())
	ctx := t.Context()
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	dom, err := os.ReadFile("testdata/agents/door.goap.json")
	if err != nil {
		t.Fatal(err)
	}
	started := func(id string) (*agentDoc, string) {
		c, sp := tp.Tracer("test").Start(context.Background(), "start-"+id)
		sp.End()
		return &agentDoc{Request: &request.Request{RequestID: id, SessionID: "s", Kind: request.KindGOAP, GOAP: &request.GOAPRequest{Domain: "door", Agent: true}},
			Domain: dom, Status: planbus.AgentRunning, Goals: map[string]*planbus.GoalStats{}, Trace: telemetry.Map(c)}, sp.SpanContext().TraceID().String()
	}
	a, aTrace := started("A")
	b, bTrace := started("B")
	if _, err := s.saveAgent(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	calls := 0
	doc, err := s.agentTurn(ctx, triggerSession, "s", false, 0, func(ag *agent, _, _ uint64) error {
		if calls++; calls == 1 {
			// Meanwhile another planner replaces A with B: this turn's
			// write loses, and it is played again on B.
			_, rev, err := s.loadAgent(ctx, "s")
			if err != nil {
				return err
			}
			if _, err := s.saveAgent(ctx, b, rev); err != nil {
				return err
			}
		}
		ag.doc.Detail = "touched by the turn"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if doc.ID() != "B" || calls != 2 {
		t.Fatalf("the turn ended on agent %s after %d tries, want B after 2", doc.ID(), calls)
	}
	turns := map[string]tracetest.SpanStub{}
	for _, sp := range mem.GetSpans() {
		if sp.Name != telemetry.SpanAgentTurn {
			continue
		}
		for _, kv := range sp.Attributes {
			if kv.Key == telemetry.AttrRequestID {
				turns[kv.Value.AsString()] = sp
			}
		}
	}
	if sp, ok := turns["B"]; !ok || sp.SpanContext.TraceID().String() != bTrace {
		t.Errorf("B's turn: recorded %v, in trace %s; want it in B's trace %s", ok, sp.SpanContext.TraceID(), bTrace)
	}
	if sp, ok := turns["A"]; !ok || sp.SpanContext.TraceID().String() != aTrace {
		t.Errorf("A's turn: recorded %v, in trace %s; want it ended in A's trace %s", ok, sp.SpanContext.TraceID(), aTrace)
	}
}

// lockHost is a Host of one lock: the turn of this test takes nothing
// else of a planner's.
type lockHost struct{ Host }

var hostLock sync.Mutex

func (lockHost) Lock(string) func() { hostLock.Lock(); return hostLock.Unlock }

package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/worker"
)

// gateBomb is issue 23's first request: an echo of 300,000 numbers whose
// gate is 20 expressions of 110 passes over them each (about 4.6 s of a
// dispatcher's time an expression, unmetered).
func gateBomb(id string, timeoutMs int) string {
	nums := strings.TrimSuffix(strings.Repeat("1,", 300_000), ",")
	expr := strings.TrimSuffix(strings.Repeat("count(output.a, # == 2) + ", 110), " + ") + " >= 0"
	gates := strings.TrimSuffix(strings.Repeat(`{"type":"expr","expr":"`+expr+`"},`, 20), ",")
	return `{"requestId":"` + id + `","kind":"plan","maxAttempts":1,"plan":{"timeoutMs":` + itoa(timeoutMs) + `,"tools":[` +
		`{"toolId":"a","skill":"echo","input":{"a":[` + nums + `]},"verify":{"type":"all","gates":[` + gates + `]}}]}}`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A verification gate built to take minutes stops at its budget: the plan
// ends with VERIFY_FAILED naming the gate and the budget, not at its
// timeout (nor minutes after it, as before), and a plan sent beside it
// runs.
func TestAGateBombEndsWithinItsBudget(t *testing.T) {
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg, Workers: 2,
		Worker: worker.Config{Skills: skills.Builtins(skills.BuiltinConfig{})}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	c := newClient(t, bustest.Dial(t, cfg))

	bomb := make(chan error, 1)
	var got struct {
		status, code, msg string
	}
	go func() {
		// A long timeout: the bomb takes 2 s, 10 s under the race
		// detector and over a minute beside other tests with the CPU
		// oversubscribed (make test-loaded), and the test is about what
		// stops it, not how fast (docs/benchmarks.md times it).
		o, err := c.Run(ctx, []byte(gateBomb("bomb", 240_000)), nil)
		if err == nil {
			got.status = string(o.Status)
			if o.Error != nil {
				got.code, got.msg = string(o.Error.Code), o.Error.Message
			}
		}
		bomb <- err
	}()
	o, err := c.Run(ctx, []byte(`{"requestId":"beside","kind":"plan","plan":{"tools":[{"toolId":"x","skill":"echo","input":{"n":1}}]}}`), nil)
	if err != nil || !o.Success {
		t.Fatalf("the plan beside the bomb: %v %+v", err, o)
	}
	if err := <-bomb; err != nil {
		t.Fatal(err)
	}
	if got.code != "VERIFY_FAILED" {
		t.Fatalf("bomb ended %s, %s: %s; want VERIFY_FAILED", got.status, got.code, got.msg)
	}
	for _, want := range []string{"gate gates/0", "budget of 4,000,000 steps"} {
		if !strings.Contains(got.msg, want) {
			t.Errorf("bomb's error %q does not say %q", got.msg, want)
		}
	}
}

package bench

import (
	"context"
	"encoding/json"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
)

// RunFloor executes p with goroutines and channels and no bus: the same
// execution engine, each released tool a goroutine that sleeps for the
// tool's "ms" input (or returns at once), results back over a channel.
func RunFloor(ctx context.Context, p *plan.Plan) (*planbus.ExecutionResult, error) {
	results := make(chan *planbus.ToolResult, len(p.Tools))
	eng, fx := execution.Start(p, time.Now(), 64, nil)
	launch := func(fx execution.Effects) {
		for _, r := range fx.Releases {
			t := p.Tools[r.Index]
			go func() {
				var in struct {
					Ms int `json:"ms"`
				}
				_ = json.Unmarshal(t.Input, &in)
				if in.Ms > 0 {
					time.Sleep(time.Duration(in.Ms) * time.Millisecond)
				}
				results <- &planbus.ToolResult{ToolID: t.ToolID, Attempt: r.Attempt, State: planbus.ToolSucceeded, Output: t.Input}
			}()
		}
	}
	launch(fx)
	for fx.Done == nil {
		select {
		case r := <-results:
			fx = eng.OnResult(r, time.Now())
			launch(fx)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return fx.Done, nil
}

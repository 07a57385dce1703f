package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// A worker serving a skill of one's own to a running planbus. Plans call
// the skill through its queue; any NATS client can also try it directly,
// outside a plan, on planbus.invoke.<skill>.
func Example() {
	url, stop := startPlanbus() // a running planbus, as `planner serve` starts one
	defer stop()

	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	wordcount := skill.Skill{
		Manifest: skill.Manifest{Name: "wordcount", Description: "Counts the words of a text.", Version: "1",
			InputSchema: json.RawMessage(`{"type":"object","required":["text"],"properties":{"text":{"type":"string"}}}`)},
		Handler: skill.HandlerFunc(func(_ context.Context, call *skill.Call) (skill.Result, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := skill.DecodeInput(call, &in); err != nil {
				return skill.Result{}, err
			}
			out, err := json.Marshal(map[string]int{"words": len(strings.Fields(in.Text))})
			return skill.Result{Output: out}, err
		}),
	}
	w, err := worker.New(nc, worker.Config{Skills: []skill.Skill{wordcount}, DrainTimeout: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		fmt.Println("worker:", err)
		return
	}

	for _, input := range []string{`{"text": "the quick brown fox"}`, `{"text": 42}`} {
		msg, err := nc.Request("planbus.invoke.wordcount", []byte(input), 5*time.Second)
		if err != nil {
			fmt.Println(err)
			return
		}
		var res planbus.ToolResult
		if err := json.Unmarshal(msg.Data, &res); err != nil {
			fmt.Println(err)
			return
		}
		if res.Error != nil {
			fmt.Println(res.State, res.Error.Code)
			continue
		}
		fmt.Println(res.State, string(res.Output))
	}

	cancel() // the worker drains and stops
	fmt.Println("stopped:", <-done)
	// Output:
	// succeeded {"words":4}
	// failed INVALID_INPUT
	// stopped: <nil>
}

package client_test

import (
	"context"
	"fmt"
	"time"
)

// Start a session's GOAP agent on a domain given inline, wait for it to
// end (no goal left), and show its goal report.
func ExampleClient_StartAgent() {
	url, stop := system()
	defer stop()
	c, closeConn := connect(url)
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acc, err := c.StartAgent(ctx, []byte(`{"requestId": "tidy-up", "sessionId": "home", "goap": {"inline": {
		"name": "home", "facts": {"dishes": false, "floor": false},
		"actions": [
			{"name": "wash", "skill": "remember", "input": {"dishes": true}, "effects": {"dishes": true}},
			{"name": "sweep", "skill": "remember", "input": {"floor": true}, "effects": {"floor": true}}],
		"goals": [
			{"name": "clean-dishes", "conditions": {"dishes": true}, "utility": 70},
			{"name": "clean-floor", "conditions": {"floor": true}, "utility": 40}]}}}`))
	if err != nil {
		panic(err)
	}
	out, err := c.Await(ctx, acc.RequestID)
	if err != nil {
		panic(err)
	}
	st, err := c.AgentStatus(ctx, "home")
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Status, out.Attempts, st.Status)
	fmt.Print(st.Report)
	// Output:
	// succeeded 2 idle
	// Goal Utilities:
	//   clean-dishes: 70.0 [SATISFIED]
	//   clean-floor: 40.0 [SATISFIED]
}

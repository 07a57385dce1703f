package cli

import (
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/node"
)

// buildMCPWorker builds cmd/toolworker and examples/mcp-server.
func buildMCPWorker(t *testing.T) (toolworker, server string) {
	t.Helper()
	bins := build(t, "./cmd/toolworker", "./examples/mcp-server")
	return bins["toolworker"], bins["mcp-server"]
}

// waitingPid finds the example server's "pid N: waiting" line.
var waitingPid = regexp.MustCompile(`mcp demo: .*pid (\d+): waiting`)

// TestToolworkerServesAnMCPServer runs `toolworker --mcp
// demo=<examples/mcp-server>` against a node of planner and dispatcher:
// its tools are skills demo.TOOL, a plan calling them succeeds, an isError
// result fails its tool with the tool's text, and a server process killed
// with -9 in the middle of a call is started again and the call retried
// to success.
func TestToolworkerServesAnMCPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes; skipped with -short")
	}
	toolworker, server := buildMCPWorker(t)
	cfg := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Bus: cfg}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)

	cmd := exec.Command(toolworker, "--nats-url", cfg.URL, "--mcp", "demo="+server)
	cmd.Env = processEnv(t)
	_, log := startWatched(t, cmd, "toolworker --mcp", func(line string) (string, bool) {
		return "", strings.Contains(line, "tool worker serving")
	})
	for _, want := range []string{"demo.add", "demo.shout", "demo.refuse", "demo.wait"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the worker does not say it serves %s:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), `"echo"`) || strings.Contains(log.String(), " echo") {
		t.Errorf("an --mcp worker without --skills serves built-in skills too:\n%s", log.String())
	}
	c := newClient(t, bustest.Dial(t, cfg))

	t.Run("plan", func(t *testing.T) {
		res, err := c.ExecutePlan(ctx, []byte(`{"tools":[
			{"toolId":"add","skill":"demo.add","input":{"a":40,"b":2}},
			{"toolId":"shout","skill":"demo.shout","dependencies":["add"],"input":{"text":"the answer"}}]}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Success {
			t.Fatalf("plan ended %s (%+v), want success; worker log:\n%s", res.State, res.Error, log.String())
		}
		outputs := map[string]string{}
		for _, tool := range res.Tools {
			outputs[tool.ToolID] = string(tool.Output)
		}
		if outputs["add"] != `{"sum":42}` || outputs["shout"] != `{"text":"THE ANSWER"}` {
			t.Errorf("outputs %v", outputs)
		}
	})

	t.Run("isError", func(t *testing.T) {
		res, err := c.ExecutePlan(ctx, []byte(`{"tools":[{"toolId":"no","skill":"demo.refuse","input":{"reason":"not on a Sunday"}}]}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Success || len(res.Tools) != 1 {
			t.Fatalf("plan ended %s with %d tools, want a failure", res.State, len(res.Tools))
		}
		tool := res.Tools[0]
		if tool.State != planbus.ToolFailed || tool.Error == nil || tool.Error.Code != planbus.CodeMCPToolError ||
			tool.Error.Category != planbus.CategoryPermanent || tool.Error.Message != "refused: not on a Sunday" || tool.Attempts != 1 {
			t.Errorf("tool %+v (error %+v), want failed once with MCP_TOOL_ERROR (permanent) and the tool's text", tool, tool.Error)
		}
	})

	t.Run("server killed", func(t *testing.T) {
		done := make(chan *planbus.ExecutionResult, 1)
		errs := make(chan error, 1)
		go func() {
			res, err := c.ExecutePlan(ctx, []byte(`{"tools":[{"toolId":"w","skill":"demo.wait","input":{"ms":2000},"timeoutMs":60000,
				"retryPolicy":{"maxAttempts":3,"backoffMs":100}}]}`), nil)
			if err != nil {
				errs <- err
				return
			}
			done <- res
		}()
		var pid int
		bustest.Eventually(t, wait, "the server says it waits", func() (bool, string) {
			m := waitingPid.FindAllStringSubmatch(log.String(), -1)
			if len(m) == 0 {
				return false, log.String()
			}
			pid, _ = strconv.Atoi(m[len(m)-1][1])
			return true, ""
		})
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", pid, err)
		}
		var res *planbus.ExecutionResult
		select {
		case res = <-done:
		case err := <-errs:
			t.Fatal(err)
		}
		if !res.Success || len(res.Tools) != 1 || res.Tools[0].Attempts != 2 {
			b, _ := json.Marshal(res)
			t.Fatalf("after the kill: %s; want success on attempt 2\nworker log:\n%s", b, log.String())
		}
		m := waitingPid.FindAllStringSubmatch(log.String(), -1)
		if again := m[len(m)-1][1]; again == strconv.Itoa(pid) {
			t.Errorf("the retried call ran in the killed process %s", again)
		}
		for _, want := range []string{"mcp server lost; connecting again", "mcp server process started"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("the worker's log does not say %q", want)
			}
		}
	})
}

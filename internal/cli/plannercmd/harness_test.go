package plannercmd

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/schemas"
)

// wait bounds a whole command run in these tests, so a hang fails with
// the command's stderr: a run that passes is done in seconds, and on a
// machine whose CPU is oversubscribed (make test-loaded) in a minute or
// more.
const wait = 5 * time.Minute

// newClient is a planbus client on conn.
func newClient(t *testing.T, conn *bus.Conn) *client.Client {
	t.Helper()
	c, err := client.New(conn.NC)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// example is the path of a plan under examples/plans.
func example(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(bustest.RepoRoot(t), "examples", "plans", name)
}

// outcome is what a command did.
type outcome struct {
	code           int
	stdout, stderr string
}

// invocation is one in-process run of a command.
type invocation struct {
	env   map[string]string // the whole environment the command sees
	stdin string
}

func (in invocation) io(stdout, stderr *bustest.SyncBuffer) cli.IO {
	return cli.IO{
		Stdin:  strings.NewReader(in.stdin),
		Stdout: stdout,
		Stderr: stderr,
		Env:    func(k string) string { return in.env[k] },
	}
}

// run runs cmd with args and waits for its exit code.
func (in invocation) run(t *testing.T, cmd func(context.Context, []string, cli.IO) int, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var stdout, stderr bustest.SyncBuffer
	code := cmd(ctx, args, in.io(&stdout, &stderr))
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within %s; stderr:\n%s", args, wait, stderr.String())
	}
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// runPlanner runs the planner command with no environment and no stdin.
func runPlanner(t *testing.T, args ...string) outcome {
	t.Helper()
	return invocation{}.run(t, Run, args...)
}

// result decodes the last line of stdout as an execution result.
func (o outcome) result(t *testing.T) planbus.ExecutionResult {
	t.Helper()
	return lastResult(t, o.stdout, o.stderr)
}

func lastResult(t *testing.T, stdout, stderr string) planbus.ExecutionResult {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	last := lines[len(lines)-1]
	if err := schemas.Validate(schemas.ExecutionResult, []byte(last)); err != nil {
		t.Fatalf("last stdout line is not an execution result (%v): %q\nstderr:\n%s", err, last, stderr)
	}
	var res planbus.ExecutionResult
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func toolOutcome(res planbus.ExecutionResult, id string) planbus.ToolOutcome {
	for _, o := range res.Tools {
		if o.ToolID == id {
			return o
		}
	}
	return planbus.ToolOutcome{}
}

package plannercmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
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

// repoRoot is the directory holding go.mod, found by walking up from the
// package directory the test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// example is the path of a plan under examples/plans.
func example(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(repoRoot(t), "examples", "plans", name)
}

// syncBuffer is a bytes.Buffer safe to write from a command's goroutines
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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

func (in invocation) io(stdout, stderr *syncBuffer) cli.IO {
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
	var stdout, stderr syncBuffer
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

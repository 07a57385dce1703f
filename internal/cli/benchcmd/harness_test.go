package benchcmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/cli"
)

// wait bounds a whole command run in these tests, so a hang fails with
// the command's stderr (as in internal/cli's and plannercmd's tests).
const wait = 5 * time.Minute

// outcome is what a command did.
type outcome struct {
	code           int
	stdout, stderr string
}

// runBench runs planner bench with args (after "bench"), no environment
// and no stdin, and waits for its exit code.
func runBench(t *testing.T, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var stdout, stderr bustest.SyncBuffer
	code := Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Env: func(string) string { return "" }})
	if ctx.Err() != nil {
		t.Fatalf("bench %v did not finish within %s; stderr:\n%s", args, wait, stderr.String())
	}
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// buildPlanner builds cmd/planner into a temporary directory.
func buildPlanner(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so the planner binary cannot be built")
	}
	bin := filepath.Join(t.TempDir(), "planner")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/planner")
	cmd.Dir = bustest.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/planner: %v\n%s", err, out)
	}
	return bin
}

// processEnv is this process's environment without the variables that
// would point the planner elsewhere, and with a private temporary
// directory for its embedded server's store.
func processEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "PLANBUS_") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+t.TempDir())
}

package toolworkercmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/internal/cli"
)

// outcome is what the command did.
type outcome struct {
	code           int
	stdout, stderr string
}

// run runs the toolworker command with args and the environment env, and
// waits for its exit code.
func run(t *testing.T, env map[string]string, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Env: func(k string) string { return env[k] }})
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within a minute; stderr:\n%s", args, stderr.String())
	}
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

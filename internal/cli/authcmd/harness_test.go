package authcmd

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

// runAuth runs planner auth with args (what follows "auth"), no
// environment and no stdin, and waits for its exit code.
func runAuth(t *testing.T, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Env: func(string) string { return "" }})
	if ctx.Err() != nil {
		t.Fatalf("auth %v did not finish within a minute; stderr:\n%s", args, stderr.String())
	}
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

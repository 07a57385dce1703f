package toolworkercmd

import (
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/cli"
)

func TestToolworkerHelpShowsTheSafeDefaults(t *testing.T) {
	o := run(t, nil, "-h")
	for _, want := range []string{
		"-http-allow-private", "PLANBUS_HTTP_ALLOW_PRIVATE", "-shell-env-allow", "PLANBUS_SHELL_ENV_ALLOW",
		`-shell-max-cpu duration`, `(default 1m0s)`, `(default 4.0 GiB)`, `(default 1.0 GiB)`, `(default 4096)`,
	} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("toolworker -h does not show %q:\n%s", want, o.stderr)
		}
	}
}

func TestToolworkerRejectsABadShellAllowList(t *testing.T) {
	o := run(t, map[string]string{"NATS_URL": "nats://127.0.0.1:1"}, "--shell-allow", "ls,git=status")
	if o.code != cli.ExitUsage || !strings.Contains(o.stderr, "--shell-allow") {
		t.Errorf("exit %d, stderr %q; want 2 naming --shell-allow", o.code, o.stderr)
	}
}

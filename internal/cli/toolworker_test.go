package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/skills"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"65536", 65536, true},
		{"512MiB", 512 << 20, true},
		{"4GiB", 4 << 30, true},
		{"4 GiB", 4 << 30, true},
		{"1KiB", 1024, true},
		{"2TiB", 2 << 40, true},
		{"100MB", 100e6, true},
		{"7B", 7, true},
		{"", 0, false},
		{"GiB", 0, false},
		{"-1", 0, false},
		{"1.5GiB", 0, false},
		{"4gb", 0, false},
		{"9999999999TiB", 0, false},
		{"0x10", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "is not a size") {
			t.Errorf("parseSize(%q): error %q does not say what is wrong", tt.in, err)
		}
	}
}

// FuzzParseSize checks that parseSize never panics, never returns a
// negative size, and reads back what formatSize writes.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4GiB", "512 MiB", "1e9", "-5", "9223372036854775807", "8589934592TiB", "KiB", " 3B "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
		if back, err := parseSize(formatSize(n)); err != nil || back != n {
			t.Fatalf("%d formats as %q, which reads back as %d, %v", n, formatSize(n), back, err)
		}
	})
}

func TestShellFlags(t *testing.T) {
	parse := func(t *testing.T, args ...string) (skills.ShellConfig, error) {
		t.Helper()
		var wf workerFlags
		f := newFlags("toolworker", &strings.Builder{}, func(string) string { return "" }, toolworkerUsage)
		wf.register(f)
		if err := f.parse(args); err != nil {
			t.Fatal(err)
		}
		return wf.shellConfig()
	}
	t.Run("defaults", func(t *testing.T) {
		cfg, err := parse(t)
		if err != nil {
			t.Fatal(err)
		}
		want := skills.ShellConfig{PassEnv: []string{"HOME"}, Limits: skills.ShellLimits{CPU: skills.DefaultShellMaxCPU,
			Memory: skills.DefaultShellMaxMemory, FileSize: skills.DefaultShellMaxFileSize, Procs: skills.DefaultShellMaxProcs}}
		if diff := cmp.Diff(want, cfg); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("set", func(t *testing.T) {
		cfg, err := parse(t, "--shell-allow", "ls,cat git=status,log", "--shell-env-allow", "APP_*,LANG",
			"--shell-max-cpu", "0", "--shell-max-memory", "512MiB", "--shell-max-file-size", "0", "--shell-max-procs", "64")
		if err != nil {
			t.Fatal(err)
		}
		want := skills.ShellConfig{Allow: []string{"ls", "cat", "git=status,log"}, PassEnv: []string{"HOME"}, EnvAllow: []string{"APP_*", "LANG"},
			Limits: skills.ShellLimits{CPU: -time.Nanosecond, Memory: 512 << 20, FileSize: -1, Procs: 64}}
		if diff := cmp.Diff(want, cfg); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shell-allow", "ls,git=status"}, "--shell-allow: skills: shell allow-list: group \"ls,git=status\""},
		{[]string{"--shell-allow", "./x"}, "--shell-allow: skills: shell allow-list: \"./x\""},
		{[]string{"--shell-env-allow", "A=B"}, "--shell-env-allow: skills: shell env allow-list: \"A=B\""},
		{[]string{"--shell-max-memory", "lots"}, "--shell-max-memory: \"lots\" is not a size"},
		{[]string{"--shell-max-file-size", "-1"}, "--shell-max-file-size: \"-1\" is not a size"},
		{[]string{"--shell-max-cpu", "-1s"}, "--shell-max-cpu -1s: want 0 (no limit) or more"},
		{[]string{"--shell-max-procs", "-1"}, "--shell-max-procs -1: want 0 (no limit) or more"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parse(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestToolworkerHelpShowsTheSafeDefaults(t *testing.T) {
	o := invocation{}.run(t, Toolworker, "-h")
	for _, want := range []string{
		"-http-allow-private", "PLANBUS_HTTP_ALLOW_PRIVATE", "-shell-env-allow", "PLANBUS_SHELL_ENV_ALLOW",
		`-shell-max-cpu duration`, `(default 1m0s)`, `(default "4GiB")`, `(default "1GiB")`, `(default 4096)`,
	} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("toolworker -h does not show %q:\n%s", want, o.stderr)
		}
	}
}

func TestToolworkerRejectsABadShellAllowList(t *testing.T) {
	o := invocation{env: map[string]string{"NATS_URL": "nats://127.0.0.1:1"}}.run(t, Toolworker, "--shell-allow", "ls,git=status")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "--shell-allow") {
		t.Errorf("exit %d, stderr %q; want 2 naming --shell-allow", o.code, o.stderr)
	}
}

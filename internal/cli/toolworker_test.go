package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/planbus/planbus/internal/skills"
)

func TestShellFlags(t *testing.T) {
	parse := func(t *testing.T, args ...string) (skills.ShellConfig, error) {
		t.Helper()
		var wf WorkerFlags
		f := NewFlags("toolworker", &strings.Builder{}, func(string) string { return "" }, "")
		wf.Register(f)
		if err := f.Parse(args); err != nil {
			return skills.ShellConfig{}, err
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
		{[]string{"--shell-max-memory", "lots"}, `"lots" is not a size`},
		{[]string{"--shell-max-file-size", "-1"}, `"-1" is not a size`},
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

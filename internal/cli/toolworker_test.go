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

func TestMCPFlags(t *testing.T) {
	parse := func(t *testing.T, env map[string]string, args ...string) (*WorkerFlags, error) {
		t.Helper()
		var wf WorkerFlags
		f := NewFlags("toolworker", &strings.Builder{}, func(k string) string { return env[k] }, "")
		wf.Register(f)
		wf.RegisterMCP(f)
		return &wf, f.Parse(args)
	}
	skillNames := func(t *testing.T, wf *WorkerFlags) string {
		t.Helper()
		cfg, err := wf.Config()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range cfg.Skills {
			names = append(names, s.Manifest.Name)
		}
		return strings.Join(names, ",")
	}
	t.Run("servers", func(t *testing.T) {
		wf, err := parse(t, map[string]string{"PLANBUS_MCP_TOKEN_GIT_HUB": "tok"}, "--mcp", "demo=./mcp-server -v", "--mcp", "git-hub=https://example.com/mcp")
		if err != nil {
			t.Fatal(err)
		}
		specs, err := wf.MCPServers()
		if err != nil {
			t.Fatal(err)
		}
		if len(specs) != 2 || specs[0].Name != "demo" || strings.Join(specs[0].Command, " ") != "./mcp-server -v" ||
			specs[1].URL != "https://example.com/mcp" || specs[1].Token != "tok" || specs[0].Token != "" {
			t.Errorf("specs %+v", specs)
		}
		if names := skillNames(t, wf); names != "" {
			t.Errorf("an --mcp worker without --skills serves the built-ins %s", names)
		}
	})
	t.Run("with --skills", func(t *testing.T) {
		wf, err := parse(t, nil, "--mcp", "demo=./x", "--skills", "echo")
		if err != nil {
			t.Fatal(err)
		}
		if names := skillNames(t, wf); names != "echo" {
			t.Errorf("skills %s, want echo", names)
		}
		wf, err = parse(t, map[string]string{"PLANBUS_SKILLS": "sleep"}, "--mcp", "demo=./x")
		if err != nil {
			t.Fatal(err)
		}
		if names := skillNames(t, wf); names != "sleep" {
			t.Errorf("skills %s, want sleep ($PLANBUS_SKILLS)", names)
		}
	})
	for args, want := range map[string]string{
		"demo":              `--mcp "demo": want NAME=COMMAND`,
		"demo=./a demo=./b": `--mcp: the name "demo" is given twice`,
		"a.b=./x":           `the name "a.b" must be`,
	} {
		var flags []string
		for _, a := range strings.Fields(args) {
			flags = append(flags, "--mcp", a)
		}
		wf, err := parse(t, nil, flags...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wf.MCPServers(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", args, err, want)
		}
	}
}

//go:build unix

package skills_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
)

// gitRepo makes a shell directory holding a git repository with one
// commit, and returns it with the environment git needs to commit there.
func gitRepo(t *testing.T) string {
	t.Helper()
	needPrograms(t, "git")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// TestShellGitEscapes tries what made an allowed git run other commands:
// each call must be refused, naming what, and the command must not run.
// The first case shows, outside the skill, that the command would run.
func TestShellGitEscapes(t *testing.T) {
	repo := gitRepo(t)
	payload := "touch marker; false" // fsmonitor hooks run through the shell
	marker := filepath.Join(repo, "marker")

	control := exec.Command("git", "-c", "core.fsmonitor="+payload, "status")
	control.Dir = repo
	control.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + repo}
	_ = control.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Skipf("this git does not run core.fsmonitor (%v), so the escapes cannot be shown", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		argv []string
		env  map[string]string
		want []string
	}{
		{"-c", []string{"git", "-c", "core.fsmonitor=" + payload, "status"}, nil,
			[]string{`git option "-c" before the subcommand is refused`, "core.fsmonitor"}},
		{"-c joined", []string{"git", "-ccore.fsmonitor=" + payload, "status"}, nil, []string{"before the subcommand is refused"}},
		{"--config-env", []string{"git", "--config-env=core.fsmonitor=PAYLOAD", "status"}, map[string]string{"PAYLOAD": payload},
			[]string{`"--config-env=core.fsmonitor=PAYLOAD" before the subcommand is refused`}},
		{"GIT_CONFIG_*", []string{"git", "status"},
			map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": payload},
			[]string{"env may not set GIT_CONFIG_COUNT", "git runs commands", "no flag allows it"}},
		{"GIT_CONFIG_PARAMETERS", []string{"git", "status"}, map[string]string{"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='" + payload + "'"},
			[]string{"env may not set GIT_CONFIG_PARAMETERS"}},
		{"GIT_SSH_COMMAND", []string{"git", "status"}, map[string]string{"GIT_SSH_COMMAND": payload}, []string{"env may not set GIT_SSH_COMMAND"}},
		{"HOME with a .gitconfig", []string{"git", "status"}, map[string]string{"HOME": "."}, []string{"env may not set HOME"}},
		{"--exec-path", []string{"git", "--exec-path=.", "status"}, nil, []string{"--exec-path"}},
		{"-C", []string{"git", "-C", "..", "status"}, nil, []string{`option "-C" before the subcommand is refused`}},
		{"config", []string{"git", "config", "core.fsmonitor", payload}, nil, []string{"git config is refused", "--shell-allow"}},
		{"--upload-pack", []string{"git", "ls-remote", "--upload-pack=" + payload, "."}, nil, []string{`option "--upload-pack=`}},
		{"-u", []string{"git", "ls-remote", "-u", payload, "."}, nil, []string{`git ls-remote option "-u" is refused`}},
		{"clone -u", []string{"git", "clone", "-u", payload, ".", "copy"}, nil, []string{`git clone option "-u" is refused`}},
		{"clone -c", []string{"git", "clone", "-c", "core.fsmonitor=" + payload, ".", "copy"}, nil, []string{`git clone option "-c" is refused`}},
		{"grep -O", []string{"git", "grep", "-Osh", "x"}, nil, []string{`git grep option "-Osh" is refused`}},
		{"rebase --exec", []string{"git", "rebase", "--exec", payload, "main"}, nil, []string{`git rebase option "--exec" is refused`}},
		{"submodule foreach", []string{"git", "submodule", "foreach", payload}, nil, []string{"submodule foreach is refused"}},
		{"bisect run", []string{"git", "bisect", "run", "sh", "-c", payload}, nil, []string{"bisect run is refused"}},
		{"--output outside", []string{"git", "log", "--output=../escaped"}, nil, []string{"leads outside the shell directory"}},
		{"--output absolute", []string{"git", "log", "--output=" + filepath.Join(t.TempDir(), "escaped")}, nil, []string{"absolute paths are refused"}},
	}
	cfg := skills.ShellConfig{Allow: []string{"git"}, Dir: repo, EnvAllow: []string{"*"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runShell(t, cfg, map[string]any{"argv": tt.argv, "env": tt.env})
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, tt.want...)
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the payload ran")
			}
		})
	}

	t.Run("ordinary git still works", func(t *testing.T) {
		for _, argv := range [][]string{
			{"git", "status", "--porcelain"},
			{"git", "--no-pager", "log", "--oneline"},
			{"git", "log", "-c", "--format=%s"},
			{"git", "diff", "--exit-code", "HEAD"},
		} {
			if _, err := runShell(t, cfg, map[string]any{"argv": argv}); err != nil {
				t.Errorf("%v: %v", argv, err)
			}
		}
		got, err := runShell(t, cfg, map[string]any{"argv": []string{"git", "commit", "--allow-empty", "--message", "second"},
			"env": map[string]string{"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
				"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.com"}})
		if err != nil || !strings.Contains(got.Stdout, "second") {
			t.Errorf("commit: %v, %+v", err, got)
		}
	})

	t.Run("git limited to subcommands", func(t *testing.T) {
		cfg := skills.ShellConfig{Allow: []string{"git=status,log"}, Dir: repo}
		if _, err := runShell(t, cfg, map[string]any{"argv": []string{"git", "log", "--oneline"}}); err != nil {
			t.Errorf("log: %v", err)
		}
		_, err := runShell(t, cfg, map[string]any{"argv": []string{"git", "commit", "--allow-empty", "-m", "x"}})
		wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
		wantMessage(t, err, `git subcommand "commit" is not allowed (allowed: status, log)`, "--shell-allow")
		_, err = runShell(t, cfg, map[string]any{"argv": []string{"git", "-c", "core.fsmonitor=" + payload, "status"}})
		wantMessage(t, err, `git subcommand "-c" is not allowed`)
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the payload ran")
		}
	})
}

// TestShellWritesStayInside runs tee, which writes where it is told, at
// paths outside the shell directory: each is refused and nothing is
// written there.
func TestShellWritesStayInside(t *testing.T) {
	needPrograms(t, "tee")
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(parent, "root")
	outside := filepath.Join(parent, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	cfg := skills.ShellConfig{Allow: []string{"tee"}, Dir: root}
	tests := []struct {
		name string
		dir  string
		path string
		want string
	}{
		{"absolute", "", filepath.Join(outside, "x"), "absolute paths are refused"},
		{"dot-dot", "", "../outside/x", "leads outside the shell directory"},
		{"dot-dot from a sub dir", "sub", "../../outside/x", "leads outside the shell directory"},
		{"through a symlink", "", "link/x", "through a symlink"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runShell(t, cfg, map[string]any{"argv": []string{"tee", tt.path}, "dir": tt.dir, "stdin": "escaped"})
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, `argv[1] "`+tt.path+`"`, tt.want)
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("%d files were written outside the shell directory", len(entries))
	}
	if _, err := runShell(t, cfg, map[string]any{"argv": []string{"tee", "sub/../inside", "/dev/null"}, "stdin": "kept"}); err != nil {
		t.Fatalf("a path inside: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "inside")); err != nil || string(b) != "kept" {
		t.Errorf("inside: got %q, %v; want \"kept\"", b, err)
	}
}

func TestShellEnvAllowList(t *testing.T) {
	needPrograms(t, "env")
	tests := []struct {
		name  string
		allow []string
		env   map[string]string
		want  string // part of the refusal; empty = runs
	}{
		{"nothing by default", nil, map[string]string{"GREETING": "hi"}, "env GREETING is not allowed (allowed: none); add it to the worker's --shell-env-allow"},
		{"a name", []string{"GREETING"}, map[string]string{"GREETING": "hi"}, ""},
		{"another name", []string{"GREETING"}, map[string]string{"OTHER": "x"}, "env OTHER is not allowed (allowed: GREETING)"},
		{"a prefix", []string{"APP_*"}, map[string]string{"APP_MODE": "x"}, ""},
		{"any", []string{"*"}, map[string]string{"ANYTHING": "x", "GIT_AUTHOR_NAME": "a"}, ""},
		{"PATH, even with any", []string{"*"}, map[string]string{"PATH": "."}, "env may not set PATH"},
		{"the limits variable", []string{"*"}, map[string]string{"PLANBUS_RLIMITS": "core=0"}, "env may not set PLANBUS_RLIMITS"},
		{"LD_PRELOAD", []string{"*"}, map[string]string{"LD_PRELOAD": "x.so"}, "dynamic loader"},
		{"BASH_ENV", []string{"*"}, map[string]string{"BASH_ENV": "x"}, "shells run code from it"},
		{"exported bash function", []string{"*"}, map[string]string{"BASH_FUNC_ls%%": "() { id; }"}, "shells run code from it"},
		{"GIT_EXEC_PATH", []string{"GIT_*"}, map[string]string{"GIT_EXEC_PATH": "."}, "env may not set GIT_EXEC_PATH"},
		{"lower case proxy", []string{"*"}, map[string]string{"http_proxy": "http://x"}, "traffic through another host"},
		{"NODE_OPTIONS", []string{"*"}, map[string]string{"NODE_OPTIONS": "--require x"}, "interpreters"},
		{"GOFLAGS", []string{"*"}, map[string]string{"GOFLAGS": "-toolexec=x"}, "compilers"},
		{"the first refused, in order", []string{"B"}, map[string]string{"B": "1", "A": "2", "C": "3"}, "env A is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runShell(t, skills.ShellConfig{Allow: []string{"env"}, Dir: t.TempDir(), EnvAllow: tt.allow},
				map[string]any{"argv": []string{"env"}, "env": tt.env})
			if tt.want != "" {
				wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
				wantMessage(t, err, tt.want)
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			for k, v := range tt.env {
				if !strings.Contains(got.Stdout, k+"="+v+"\n") {
					t.Errorf("the program did not see %s=%s:\n%s", k, v, got.Stdout)
				}
			}
		})
	}
}

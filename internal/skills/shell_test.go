//go:build unix

package skills_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
)

// The test binary doubles as a program for the shell skill to run, chosen
// by this variable; see spawnHelper.
const (
	helperEnv = "SKILLS_TEST_HELPER"
	fifoEnv   = "SKILLS_TEST_FIFO"
)

// helperModes are more modes of the test binary, by name, added by the
// files that use them.
var helperModes = map[string]func() int{}

func TestMain(m *testing.M) {
	switch mode := os.Getenv(helperEnv); mode {
	case "":
		os.Exit(m.Run())
	case "spawn":
		os.Exit(spawnHelper(true))
	case "spawn-and-exit":
		os.Exit(spawnHelper(false))
	default:
		if f := helperModes[mode]; f != nil {
			os.Exit(f())
		}
		os.Exit(2)
	}
}

// spawnHelper opens the FIFO named by SKILLS_TEST_FIFO for writing, which
// waits for the test to open it for reading, and starts `sleep 60` holding
// that descriptor, in the helper's process group. Then it writes "ready"
// and either waits for sleep or exits. The test's reader sees EOF once no
// process holds the FIFO: once the helper and its child are both dead.
func spawnHelper(wait bool) int {
	f, err := os.OpenFile(os.Getenv(fifoEnv), os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := f.WriteString("ready\n"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if wait {
		_ = child.Wait()
	}
	return 0
}

// needPrograms skips the test unless every program is on PATH.
func needPrograms(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("needs %s: %v", n, err)
		}
	}
}

type shellOutput struct {
	ExitCode   int    `json:"exitCode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMs int64  `json:"durationMs"`
}

func decodeShell(t *testing.T, raw json.RawMessage) shellOutput {
	t.Helper()
	var out shellOutput
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	return out
}

// runShell calls the shell skill with input, which is marshalled to JSON.
func runShell(t *testing.T, cfg skills.ShellConfig, input any) (shellOutput, error) {
	t.Helper()
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	res, err := skills.Shell(cfg).Handler.Handle(t.Context(), newCall("shell", string(b)))
	if err != nil {
		return shellOutput{}, err
	}
	return decodeShell(t, res.Output), nil
}

var ignoreDuration = cmpopts.IgnoreFields(shellOutput{}, "DurationMs")

func TestShellRuns(t *testing.T) {
	needPrograms(t, "printf", "cat", "true")
	tests := []struct {
		name  string
		allow []string
		input map[string]any
		want  shellOutput
	}{
		{
			name:  "arguments reach the program literally",
			allow: []string{"printf"},
			input: map[string]any{"argv": []string{"printf", "[%s]", "a b", "'q'", `"dq"`, "$(id)", "`id`", "*", "$HOME", "; rm -rf x", "a|b", "\\n"}},
			want:  shellOutput{Stdout: "[a b]['q'][\"dq\"][$(id)][`id`][*][$HOME][; rm -rf x][a|b][\\n]"},
		},
		{
			name:  "stdin",
			allow: []string{"cat"},
			input: map[string]any{"argv": []string{"cat"}, "stdin": "line one\nline two $(id)\n"},
			want:  shellOutput{Stdout: "line one\nline two $(id)\n"},
		},
		{
			name:  "no stdin reads as empty",
			allow: []string{"cat"},
			input: map[string]any{"argv": []string{"cat"}},
			want:  shellOutput{},
		},
		{
			name:  "no output",
			allow: []string{"true"},
			input: map[string]any{"argv": []string{"true"}},
			want:  shellOutput{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runShell(t, skills.ShellConfig{Allow: tt.allow, Dir: t.TempDir()}, tt.input)
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreDuration); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShellEnv(t *testing.T) {
	needPrograms(t, "env")
	t.Setenv("PLANBUS_TEST_SECRET", "hunter2")
	got, err := runShell(t, skills.ShellConfig{Allow: []string{"env"}, Dir: t.TempDir(), EnvAllow: []string{"GREETING", "EMP*"}},
		map[string]any{"argv": []string{"env"}, "env": map[string]string{"GREETING": "hello world", "EMPTY": ""}})
	if err != nil {
		t.Fatalf("got error %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(got.Stdout, "\n"), "\n")
	slices.Sort(lines)
	want := []string{"EMPTY=", "GREETING=hello world", "PATH=" + os.Getenv("PATH")}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("the program's environment (-want +got):\n%s", diff)
	}
}

func TestShellEnvRefused(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"name with =", map[string]string{"A=B": "x"}, `env name "A=B" is not valid`},
		{"empty name", map[string]string{"": "x"}, `env name "" is not valid`},
		{"NUL in name", map[string]string{"A\x00B": "x"}, `env name "A\x00B" is not valid`},
		{"NUL in value", map[string]string{"A": "x\x00y"}, "env A contains a NUL byte"},
		{"PATH", map[string]string{"PATH": "/tmp"}, "env may not set PATH"},
		{"loader", map[string]string{"LD_PRELOAD": "/tmp/x.so"}, "env may not set LD_PRELOAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runShell(t, skills.ShellConfig{Allow: []string{"env"}, Dir: t.TempDir()},
				map[string]any{"argv": []string{"env"}, "env": tt.env})
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, tt.want)
		})
	}
}

func TestShellDir(t *testing.T) {
	needPrograms(t, "pwd")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for _, d := range []string{"sub/deeper"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "outside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(root, "sub", "up")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		dir     string
		want    string // the program's working directory; empty = refused
		wantErr string
	}{
		{"", root, ""},
		{".", root, ""},
		{"sub", filepath.Join(root, "sub"), ""},
		{"sub/deeper/..", filepath.Join(root, "sub"), ""},
		{"inside", filepath.Join(root, "sub"), ""},
		{"inside/deeper", filepath.Join(root, "sub", "deeper"), ""},
		{"../x", "", "must be a relative path that stays inside"},
		{"sub/../../x", "", "must be a relative path that stays inside"},
		{outside, "", "must be a relative path that stays inside"},
		{"/", "", "must be a relative path that stays inside"},
		{"outside", "", "leads outside the worker's shell directory through a symlink"},
		{"sub/up", "", "leads outside the worker's shell directory through a symlink"},
		{"missing", "", `dir "missing" does not exist`},
		{"file", "", `dir "file" is not a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := runShell(t, skills.ShellConfig{Allow: []string{"pwd"}, Dir: root},
				map[string]any{"argv": []string{"pwd"}, "dir": tt.dir})
			if tt.want == "" {
				wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
				wantMessage(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if got := strings.TrimSuffix(got.Stdout, "\n"); got != tt.want {
				t.Errorf("ran in %q, want %q", got, tt.want)
			}
		})
	}
}

func TestShellDirDefaultsToWorkingDirectory(t *testing.T) {
	needPrograms(t, "pwd")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	got, err := runShell(t, skills.ShellConfig{Allow: []string{"pwd"}}, map[string]any{"argv": []string{"pwd"}})
	if err != nil {
		t.Fatalf("got error %v", err)
	}
	if got := strings.TrimSuffix(got.Stdout, "\n"); got != dir {
		t.Errorf("ran in %q, want %q", got, dir)
	}
}

func TestShellAllow(t *testing.T) {
	needPrograms(t, "printf", "cat")
	printf, _ := exec.LookPath("printf")
	cat, _ := exec.LookPath("cat")
	// A link named printf somewhere else, to a program that is not allowed.
	impostor := filepath.Join(t.TempDir(), "printf")
	if err := os.Symlink(cat, impostor); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		allow   []string
		argv0   string
		wantErr []string // parts of the refusal; nil = runs
	}{
		{"name allowed by name", []string{"printf"}, "printf", nil},
		{"path allowed by name", []string{"printf"}, printf, nil},
		{"name allowed by path", []string{printf}, "printf", nil},
		{"path allowed by path", []string{"cat", printf}, printf, nil},
		{"nothing allowed", nil, "printf", []string{"no program is allowed", "--shell-allow"}},
		{"other name", []string{"printf"}, "cat", []string{`program "cat" is not allowed (allowed: printf)`, "--shell-allow"}},
		{"other path", []string{"printf"}, cat, []string{"is not allowed", "--shell-allow"}},
		{"same name elsewhere", []string{"printf"}, impostor, []string{"is not allowed"}},
		{"relative path", []string{"printf"}, "./printf", []string{"give a bare name to look up in PATH or an absolute path"}},
		{"allowed but missing", []string{"planbus-no-such-program"}, "planbus-no-such-program", []string{`program "planbus-no-such-program" cannot be run`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runShell(t, skills.ShellConfig{Allow: tt.allow, Dir: t.TempDir()},
				map[string]any{"argv": []string{tt.argv0, "ran"}})
			if tt.wantErr != nil {
				wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
				wantMessage(t, err, tt.wantErr...)
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if got.Stdout != "ran" {
				t.Errorf("got stdout %q, want %q", got.Stdout, "ran")
			}
		})
	}
}

func TestShellInvalidInput(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"no argv", `{}`, "argv must name a program"},
		{"empty argv", `{"argv":[]}`, "argv must name a program"},
		{"empty program", `{"argv":[""]}`, "argv must name a program"},
		{"argv as a string", `{"argv":"printf hi"}`, "at /argv: got a string, want an array"},
		{"unknown field", `{"argv":["printf"],"shell":true}`, "unknown member /shell"},
		{"a name in another case", `{"argv":["printf"],"ARGV":["rm"]}`, "unknown member /ARGV"},
		{"a name twice", `{"argv":["printf"],"argv":["rm"]}`, `duplicate object member name "argv"`},
		{"NUL in an argument", `{"argv":["printf","a\u0000b"]}`, "argv[1] contains a NUL byte"},
		{"NUL in dir", `{"argv":["printf"],"dir":"a\u0000"}`, "dir contains a NUL byte"},
		{"not an object", `["printf"]`, "at /: got an array, want an object"},
		{"trailing data", `{"argv":["printf"]} {"argv":["rm"]}`, "after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sk := skills.Shell(skills.ShellConfig{Allow: []string{"printf"}, Dir: t.TempDir()})
			_, err := sk.Handler.Handle(t.Context(), newCall("shell", tt.input))
			wantError(t, err, planbus.CategoryInvalidInput, planbus.CodeInvalidInput)
			wantMessage(t, err, tt.want)
		})
	}
}

func TestShellOutputCap(t *testing.T) {
	needPrograms(t, "head")
	tests := []struct {
		name      string
		cap       int
		wantBytes int
	}{
		{"configured", 1000, 1000},
		{"default", 0, skills.DefaultOutputCap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runShell(t, skills.ShellConfig{Allow: []string{"head"}, Dir: t.TempDir(), OutputCap: tt.cap},
				map[string]any{"argv": []string{"head", "-c", "200000", "/dev/zero"}})
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if len(got.Stdout) != tt.wantBytes || !got.Truncated {
				t.Errorf("got %d bytes, truncated %v; want %d, truncated true", len(got.Stdout), got.Truncated, tt.wantBytes)
			}
		})
	}
}

func TestShellExitNonzero(t *testing.T) {
	needPrograms(t, "false", "cat")
	tests := []struct {
		name     string
		argv     []string
		wantMsg  string
		wantOut  shellOutput
		wantCode int
	}{
		{"false", []string{"false"}, "shell: false exited with code 1", shellOutput{ExitCode: 1}, 1},
		{"message carries stderr", []string{"cat", "nonexistent/planbus"},
			"shell: cat exited with code 1: cat: nonexistent/planbus:",
			shellOutput{ExitCode: 1, Stderr: "cat: nonexistent/planbus: No such file or directory\n"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runShell(t, skills.ShellConfig{Allow: []string{tt.argv[0]}, Dir: t.TempDir()}, map[string]any{"argv": tt.argv})
			se := wantError(t, err, planbus.CategoryInternal, planbus.CodeExitNonzero)
			wantMessage(t, err, tt.wantMsg)
			if !planbus.Retryable(planbus.Category(se.Category)) {
				t.Errorf("category %s is not retried, want it retried", se.Category)
			}
			info, output := skill.ErrorInfo(err)
			if info.Code != planbus.CodeExitNonzero {
				t.Errorf("got result code %s, want %s", info.Code, planbus.CodeExitNonzero)
			}
			if diff := cmp.Diff(tt.wantOut, decodeShell(t, output), ignoreDuration); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShellExitMessageIsShort(t *testing.T) {
	needPrograms(t, "cat")
	long := "nonexistent/" + strings.Repeat("a", 1000)
	_, err := runShell(t, skills.ShellConfig{Allow: []string{"cat"}, Dir: t.TempDir()}, map[string]any{"argv": []string{"cat", long}})
	wantError(t, err, planbus.CategoryInternal, planbus.CodeExitNonzero)
	msg := err.(*skill.Error).Message
	if len(msg) > 300 || !strings.HasSuffix(msg, "...") {
		t.Errorf("got a %d-byte message %q, want at most 300 bytes ending in \"...\"", len(msg), msg)
	}
}

func TestShellContextEnds(t *testing.T) {
	needPrograms(t, "sleep")
	sk := skills.Shell(skills.ShellConfig{Allow: []string{"sleep"}, Dir: t.TempDir()})
	call := newCall("shell", `{"argv":["sleep","30"]}`)

	t.Run("cancelled while running", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := handleAsync(ctx, sk.Handler, call)
		cancel()
		if o := await(t, done, "shell to return after cancel"); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", o.err)
		}
	})

	t.Run("cancelled before the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := sk.Handler.Handle(ctx, call); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		done := handleAsync(ctx, sk.Handler, call)
		if o := await(t, done, "shell to return at the deadline"); !errors.Is(o.err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", o.err)
		}
	})

	t.Run("behind Timeout", func(t *testing.T) {
		call := newCall("shell", `{"argv":["sleep","30"]}`)
		call.Timeout = 20 * time.Millisecond
		h := skill.Chain(sk.Handler, skill.Recover, skill.Timeout)
		done := handleAsync(t.Context(), h, call)
		o := await(t, done, "shell to time out")
		wantError(t, o.err, planbus.CategoryTimeout, planbus.CodeToolTimeout)
	})
}

// startFIFOReader makes a FIFO and reads it on a goroutine: ready delivers
// once a writer has written "ready", gone once every writer is gone.
func startFIFOReader(t *testing.T) (path string, ready, gone <-chan error) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// If no writer ever came, opening the write end without blocking lets
	// the reader's open return, and the goroutine end.
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	readyc, gonec := make(chan error, 1), make(chan error, 1)
	go func() {
		f, err := os.Open(path) // waits for a writer
		if err != nil {
			readyc <- err
			return
		}
		defer f.Close()
		r := bufio.NewReader(f)
		if line, err := r.ReadString('\n'); line != "ready\n" {
			readyc <- fmt.Errorf("read %q, %v from the FIFO, want \"ready\\n\"", line, err)
			return
		}
		readyc <- nil
		_, err = io.Copy(io.Discard, r) // EOF: no process holds the write end
		gonec <- err
	}()
	return path, readyc, gonec
}

func helperCall(t *testing.T, mode, fifo string) (*skill.Call, skill.Skill) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"argv": []string{exe}, "env": map[string]string{helperEnv: mode, fifoEnv: fifo, "GORACE": "atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	return newCall("shell", string(b)), skills.Shell(skills.ShellConfig{Allow: []string{exe}, Dir: t.TempDir(),
		EnvAllow: []string{helperEnv, fifoEnv, "GORACE"}})
}

// TestShellCancelKillsProcessGroup runs a program that starts a child and
// waits for it, cancels the call, and checks that the child died too.
func TestShellCancelKillsProcessGroup(t *testing.T) {
	needPrograms(t, "sleep")
	fifo, ready, gone := startFIFOReader(t)
	call, sk := helperCall(t, "spawn", fifo)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := handleAsync(ctx, sk.Handler, call)

	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case o := <-done:
		t.Fatalf("shell returned %v before its program started a child", o.err)
	case <-time.After(guard):
		t.Fatalf("the program did not start a child within %v", guard)
	}
	cancel()
	if o := await(t, done, "shell to return after cancel"); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", o.err)
	}
	if err := await(t, gone, "the program's child to die (is the process group killed?)"); err != nil {
		t.Fatal(err)
	}
}

// TestShellExitKillsLeftovers runs a program that starts a child and exits
// without waiting for it, and checks that the child does not outlive the
// call.
func TestShellExitKillsLeftovers(t *testing.T) {
	needPrograms(t, "sleep")
	fifo, ready, gone := startFIFOReader(t)
	call, sk := helperCall(t, "spawn-and-exit", fifo)
	o := await(t, handleAsync(t.Context(), sk.Handler, call), "shell to return")
	if o.err != nil {
		t.Fatalf("got error %v", o.err)
	}
	if err := await(t, ready, "the program's child to start"); err != nil {
		t.Fatal(err)
	}
	if err := await(t, gone, "the program's child to die"); err != nil {
		t.Fatal(err)
	}
}

// FuzzShellInput feeds arbitrary input to a shell skill that allows
// nothing: decoding must not panic, and every call must be refused as
// invalid input.
func FuzzShellInput(f *testing.F) {
	for _, seed := range []string{
		`{"argv":["ls","-l"]}`, `{"argv":["cat"],"dir":"sub","env":{"K":"V"},"stdin":"x"}`,
		`{"argv":[]}`, `{"argv":"ls"}`, `{"env":{"A=B":"x"}}`, `{"dir":"../x","argv":["pwd"]}`,
		`{}`, `null`, `[]`, ``, `{"argv":["\u0000"]}`, `{"argv":["ls"]} trailing`,
	} {
		f.Add([]byte(seed))
	}
	sk := skills.Shell(skills.ShellConfig{})
	f.Fuzz(func(t *testing.T, input []byte) {
		_, err := sk.Handler.Handle(t.Context(), &skill.Call{Skill: "shell", Attempt: 1, Input: input})
		if err == nil {
			t.Fatalf("input %q: ran, want it refused", input)
		}
		if info, _ := skill.ErrorInfo(err); info.Category != planbus.CategoryInvalidInput {
			t.Fatalf("input %q: got %s %s, want category invalid_input", input, info.Category, info.Message)
		}
	})
}

func TestShellPassesOnlyTheNamedWorkerVariables(t *testing.T) {
	t.Setenv("PLANBUS_TEST_PASSED", "yes")
	t.Setenv("PLANBUS_TEST_KEPT", "secret")
	sk := skills.Shell(skills.ShellConfig{Allow: []string{"env"}, PassEnv: []string{"PLANBUS_TEST_PASSED", "PATH"},
		EnvAllow: []string{"PLANBUS_TEST_PASSED"}})
	res, err := sk.Handler.Handle(context.Background(), newCall("shell", `{"argv":["env"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Stdout string }
	_ = json.Unmarshal(res.Output, &out)
	if !strings.Contains(out.Stdout, "PLANBUS_TEST_PASSED=yes") || strings.Contains(out.Stdout, "PLANBUS_TEST_KEPT") {
		t.Errorf("environment:\n%s", out.Stdout)
	}
	res, err = sk.Handler.Handle(context.Background(), newCall("shell", `{"argv":["env"],"env":{"PLANBUS_TEST_PASSED":"call"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(res.Output, &out)
	if !strings.Contains(out.Stdout, "PLANBUS_TEST_PASSED=call") || strings.Count(out.Stdout, "PLANBUS_TEST_PASSED=") != 1 {
		t.Errorf("the call's value should win:\n%s", out.Stdout)
	}
}

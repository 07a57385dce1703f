//go:build linux

package skills_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
)

func init() {
	helperModes["limits"] = printLimits
	helperModes["spin"] = spin
	helperModes["shell-worker"] = shellWorker
}

var rlimitNames = map[string]int{
	"core": unix.RLIMIT_CORE, "cpu": unix.RLIMIT_CPU, "data": unix.RLIMIT_DATA,
	"fsize": unix.RLIMIT_FSIZE, "nproc": unix.RLIMIT_NPROC,
}

// printLimits prints the process's limits as {"name": [soft, hard]}.
func printLimits() int {
	out := map[string][2]uint64{}
	for name, res := range rlimitNames {
		var l unix.Rlimit
		if err := unix.Getrlimit(res, &l); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		out[name] = [2]uint64{l.Cur, l.Max}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 2
	}
	return 0
}

// spin uses CPU until something stops it. A Go program ignores SIGXCPU,
// so only the hard limit's SIGKILL does.
func spin() int {
	for n := 0; ; n++ {
		_ = n
	}
}

// workerRequest is what shellWorker runs: a shell skill's config and one
// call's input.
type workerRequest struct {
	Config skills.ShellConfig
	Input  map[string]any
}

type workerReply struct {
	Output json.RawMessage `json:"output"`
	Code   planbus.Code    `json:"code"`
	Msg    string          `json:"message"`
}

// shellWorker runs a shell skill call described by SKILLS_TEST_REQUEST,
// standing in for a worker of another user, and prints its outcome.
func shellWorker() int {
	var req workerRequest
	if err := json.Unmarshal([]byte(os.Getenv("SKILLS_TEST_REQUEST")), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in, _ := json.Marshal(req.Input)
	res, err := skills.Shell(req.Config).Handler.Handle(context.Background(), &skill.Call{Skill: "shell", Attempt: 1, Input: in})
	reply := workerReply{Output: res.Output}
	if err != nil {
		info, output := skill.ErrorInfo(err)
		reply = workerReply{Output: output, Code: info.Code, Msg: info.Message}
	}
	if err := json.NewEncoder(os.Stdout).Encode(reply); err != nil {
		return 2
	}
	return 0
}

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestShellLimitsAreSet(t *testing.T) {
	exe := testBinary(t)
	const inf = unix.RLIM_INFINITY
	var worker [2]uint64 // the worker's own process limit: the helper never goes above its hard limit
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &l); err != nil {
		t.Fatal(err)
	}
	worker = [2]uint64{l.Cur, l.Max}
	capped := func(v uint64) [2]uint64 { return [2]uint64{min(v, worker[1]), min(v, worker[1])} }
	tests := []struct {
		name   string
		limits skills.ShellLimits
		want   map[string][2]uint64
	}{
		{"defaults", skills.ShellLimits{}, map[string][2]uint64{
			"core": {0, 0}, "cpu": {60, 61}, "data": {4 << 30, 4 << 30}, "fsize": {1 << 30, 1 << 30}, "nproc": capped(4096)}},
		{"chosen", skills.ShellLimits{CPU: 1500 * time.Millisecond, Memory: 1 << 30, FileSize: 5 << 20, Procs: 100}, map[string][2]uint64{
			"core": {0, 0}, "cpu": {2, 3}, "data": {1 << 30, 1 << 30}, "fsize": {5 << 20, 5 << 20}, "nproc": capped(100)}},
		{"none", skills.ShellLimits{CPU: -1, Memory: -1, FileSize: -1, Procs: -1}, map[string][2]uint64{
			"core": {0, 0}, "cpu": {inf, inf}, "data": {inf, inf}, "fsize": {inf, inf}, "nproc": worker}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runShell(t, skills.ShellConfig{Allow: []string{exe}, Dir: t.TempDir(), Limits: tt.limits, EnvAllow: []string{helperEnv}},
				map[string]any{"argv": []string{exe}, "env": map[string]string{helperEnv: "limits"}})
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			var limits map[string][2]uint64
			if err := json.Unmarshal([]byte(got.Stdout), &limits); err != nil {
				t.Fatalf("stdout %q: %v", got.Stdout, err)
			}
			for name, want := range tt.want {
				if limits[name] != want {
					t.Errorf("%s: got soft, hard %v, want %v", name, limits[name], want)
				}
			}
		})
	}
}

func TestShellFileSizeLimit(t *testing.T) {
	needPrograms(t, "dd")
	dir := t.TempDir()
	_, err := runShell(t, skills.ShellConfig{Allow: []string{"dd"}, Dir: dir, Limits: skills.ShellLimits{FileSize: 1 << 20}},
		map[string]any{"argv": []string{"dd", "if=/dev/zero", "of=big", "bs=65536", "count=64"}})
	se := wantError(t, err, planbus.CategoryPermanent, planbus.CodeShellFileSizeLimit)
	wantMessage(t, err, "shell: dd was killed", "file size limit of 1048576 bytes", "--shell-max-file-size")
	if len(se.Output) == 0 {
		t.Error("the error carries no output")
	}
	fi, err := os.Stat(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1<<20 {
		t.Errorf("the file grew to %d bytes, past the 1 MiB limit", fi.Size())
	}
}

func TestShellCPULimit(t *testing.T) {
	t.Run("a C program, killed by SIGXCPU", func(t *testing.T) {
		needPrograms(t, "sh")
		_, err := runShell(t, skills.ShellConfig{Allow: []string{"sh"}, Dir: t.TempDir(), Limits: skills.ShellLimits{CPU: time.Second}},
			map[string]any{"argv": []string{"sh", "-c", "while :; do :; done"}})
		wantError(t, err, planbus.CategoryPermanent, planbus.CodeShellCPULimit)
		wantMessage(t, err, "shell: sh was killed", "CPU time", "--shell-max-cpu")
	})
	t.Run("a Go program, which ignores SIGXCPU, killed by SIGKILL", func(t *testing.T) {
		exe := testBinary(t)
		_, err := runShell(t, skills.ShellConfig{Allow: []string{exe}, Dir: t.TempDir(), Limits: skills.ShellLimits{CPU: time.Second},
			EnvAllow: []string{helperEnv}},
			map[string]any{"argv": []string{exe}, "env": map[string]string{helperEnv: "spin"}})
		wantError(t, err, planbus.CategoryPermanent, planbus.CodeShellCPULimit)
		wantMessage(t, err, "killed", "--shell-max-cpu")
	})
}

// nprocBinds reports whether RLIMIT_NPROC would bind a process of this
// test's user: not root, no CAP_SYS_ADMIN nor CAP_SYS_RESOURCE.
func nprocBinds(t *testing.T) bool {
	if os.Getuid() == 0 {
		return false
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if hex, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<21|1<<24) == 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// TestShellProcessLimitBoundsAForkBomb runs a shell loop that starts up
// to 200 sleeping processes under a process limit of 32: it must stop
// with a fork failure before it has 32. The loop is bounded in any case,
// and its processes die with the call, so it cannot hurt the machine. The
// kernel does not apply the limit to root, so as root the call runs in a
// worker process of the user nobody.
func TestShellProcessLimitBoundsAForkBomb(t *testing.T) {
	needPrograms(t, "sh", "sleep")
	const limit = 32
	req := workerRequest{
		Config: skills.ShellConfig{Allow: []string{"sh"}, Limits: skills.ShellLimits{Procs: limit}},
		Input: map[string]any{"argv": []string{"sh", "-c",
			`i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); echo $i; done`}},
	}
	var reply workerReply
	if nprocBinds(t) {
		req.Config.Dir = t.TempDir()
		in, _ := json.Marshal(req.Input)
		res, err := skills.Shell(req.Config).Handler.Handle(t.Context(), newCall("shell", string(in)))
		reply.Output = res.Output
		if err != nil {
			info, output := skill.ErrorInfo(err)
			reply = workerReply{Output: output, Code: info.Code, Msg: info.Message}
		}
	} else {
		if os.Getuid() != 0 {
			t.Skip("this user has CAP_SYS_ADMIN or CAP_SYS_RESOURCE, which RLIMIT_NPROC does not bind, and cannot become another")
		}
		reply = runAsNobody(t, req)
	}

	if reply.Code != planbus.CodeExitNonzero {
		t.Fatalf("got code %q (%s), want %s: the loop should have failed to fork", reply.Code, reply.Msg, planbus.CodeExitNonzero)
	}
	var out struct{ Stdout, Stderr string }
	if err := json.Unmarshal(reply.Output, &out); err != nil {
		t.Fatalf("output %s: %v", reply.Output, err)
	}
	started := 0
	if lines := strings.Fields(out.Stdout); len(lines) > 0 {
		started, _ = strconv.Atoi(lines[len(lines)-1])
	}
	t.Logf("the loop started %d processes; stderr %q", started, out.Stderr)
	if started >= limit {
		t.Errorf("the loop started %d processes, want fewer than the limit %d", started, limit)
	}
	if !strings.Contains(strings.ToLower(out.Stderr), "fork") {
		t.Errorf("stderr %q does not report a failed fork", out.Stderr)
	}
}

// runAsNobody runs req in a copy of the test binary as the user nobody,
// whose processes the process limit binds, and returns its reply.
func runAsNobody(t *testing.T, req workerRequest) workerReply {
	t.Helper()
	const nobody = 65534
	dir := t.TempDir() // <tmp>/<test name><n>/<n>, both made 0700
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "skills.test")
	src, err := os.Open(testBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	req.Config.Dir = dir
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), helperEnv + "=shell-worker", "SKILLS_TEST_REQUEST=" + string(b)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the worker as nobody: %v: %s", err, stderr.String())
	}
	var reply workerReply
	if err := json.Unmarshal(stdout.Bytes(), &reply); err != nil {
		t.Fatalf("the worker as nobody printed %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	return reply
}

//go:build linux

package rlimit

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpec(t *testing.T) {
	tests := []struct {
		limits Limits
		want   string
	}{
		{Limits{}, "core=0"},
		{Limits{CPUSeconds: 60, Data: 1 << 30, FileSize: 4096, Procs: 100}, "core=0,cpu=60,data=1073741824,fsize=4096,nproc=100"},
		{Limits{Procs: 7}, "core=0,nproc=7"},
	}
	for _, tt := range tests {
		spec := tt.limits.spec()
		if spec != tt.want {
			t.Errorf("%+v: got spec %q, want %q", tt.limits, spec, tt.want)
		}
		settings, err := parseSpec(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		var back []string
		for _, s := range settings {
			back = append(back, s.name)
		}
		if diff := cmp.Diff(strings.Count(spec, ",")+1, len(back)); diff != "" {
			t.Errorf("%q read back as %v", spec, back)
		}
	}
	for _, bad := range []string{"", "cpu", "cpu=", "cpu=-1", "cpu=1,", "cpu=x"} {
		if _, err := parseSpec(bad); err == nil {
			t.Errorf("parseSpec(%q) succeeded, want an error", bad)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"core=0", "core=0,cpu=60,nproc=5", "=", ",,", "cpu=18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		settings, err := parseSpec(s)
		if err == nil && len(settings) == 0 {
			t.Fatalf("%q: no error and no settings", s)
		}
	})
}

// run starts argv through the helper under l and returns its stdout.
func run(t *testing.T, l Limits, argv ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var out bytes.Buffer
	cmd.Stdout = &out
	st, err := Command(cmd, l)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	if serr := st.Started(); serr != nil && err == nil {
		_ = cmd.Wait()
		return "", serr
	}
	if err != nil {
		return "", err
	}
	err = cmd.Wait()
	return out.String(), err
}

func TestCommandSetsTheLimitsBeforeTheProgramRuns(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip(err)
	}
	out, err := run(t, Limits{CPUSeconds: 7, Data: 1 << 30, FileSize: 1 << 20, Procs: 999}, cat, "/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Max cpu time              7                    8                    seconds",
		"Max file size             1048576              1048576              bytes",
		"Max data size             1073741824           1073741824           bytes",
		"Max core file size        0                    0                    bytes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the program's limits lack %q:\n%s", want, out)
		}
	}
}

func TestCommandPassesArgvAndEnvironment(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	out, err := run(t, Limits{}, sh, "-c", `echo "$0|$1|$`+Env+`|$PATH"`, "sh", "a b")
	if err != nil {
		t.Fatal(err)
	}
	if want := "sh|a b||" + os.Getenv("PATH") + "\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestCommandReportsWhyTheProgramCouldNotRun(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	noExec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want error
	}{
		{filepath.Join(dir, "missing"), fs.ErrNotExist},
		{garbage, syscall.ENOEXEC},
		{noExec, fs.ErrPermission},
	}
	for _, tt := range tests {
		_, err := run(t, Limits{}, tt.path)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("%s: got %v, want %v naming the path", tt.path, err, tt.want)
		}
	}
}

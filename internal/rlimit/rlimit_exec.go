//go:build linux || darwin

package rlimit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	if spec, ok := os.LookupEnv(Env); ok {
		helper(spec)
	}
}

// statusFD is the descriptor the helper reports a failure to exec on. It
// is closed on exec, so the parent reads EOF once the program runs.
const statusFD = 3

var resources = map[string]int{
	"core":  unix.RLIMIT_CORE,
	"cpu":   unix.RLIMIT_CPU,
	"data":  unix.RLIMIT_DATA,
	"fsize": unix.RLIMIT_FSIZE,
	"nproc": unix.RLIMIT_NPROC,
}

// helper sets the limits spec names and execs os.Args[1] with the argv
// os.Args[2:] and the environment without Env. It does not return.
func helper(spec string) {
	runtime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	if fi, err := status.Stat(); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		status = os.Stderr // not started by Command
	}
	fail := func(err error) {
		errno := 0
		var e syscall.Errno
		if errors.As(err, &e) {
			errno = int(e)
		}
		fmt.Fprintf(status, "%d %v", errno, err)
		os.Exit(127)
	}
	if len(os.Args) < 3 {
		fail(errors.New("rlimit: the helper wants a program and its argv"))
	}
	settings, err := parseSpec(spec)
	if err != nil {
		fail(err)
	}
	for _, s := range settings {
		res, ok := resources[s.name]
		if !ok {
			fail(fmt.Errorf("rlimit: unknown limit %q", s.name))
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			fail(fmt.Errorf("rlimit: reading the %s limit: %w", s.name, err))
		}
		// Never above the hard limit the worker has: only root may raise it.
		lim := unix.Rlimit{Cur: min(s.value, cur.Max), Max: min(s.value, cur.Max)}
		if res == unix.RLIMIT_CPU {
			lim.Max = min(s.value+1, cur.Max) // SIGXCPU first, SIGKILL a second later
		}
		if err := unix.Setrlimit(res, &lim); err != nil {
			fail(fmt.Errorf("rlimit: setting the %s limit to %d: %w", s.name, s.value, err))
		}
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, Env+"=") })
	syscall.CloseOnExec(statusFD)
	err = syscall.Exec(os.Args[1], os.Args[2:], env)
	fail(&fs.PathError{Op: "exec", Path: os.Args[1], Err: err})
}

// self is the running binary, to start as the helper.
func self() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil // the running binary, even if replaced on disk since
	}
	return os.Executable()
}

// Status is the parent's end of a helper's report.
type Status struct{ r, w *os.File }

// Command makes cmd, not yet started, start its program through the
// helper under l: cmd.Path, cmd.Args, cmd.Env and cmd.ExtraFiles are
// rewritten. The caller must call Started after cmd.Start, whether that
// succeeded or not.
func Command(cmd *exec.Cmd, l Limits) (*Status, error) {
	exe, err := self()
	if err != nil {
		return nil, fmt.Errorf("rlimit: finding the running binary: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("rlimit: %w", err)
	}
	cmd.Args = append([]string{"planbus-rlimit", cmd.Path}, cmd.Args...)
	cmd.Path = exe
	cmd.Env = append(slices.Clip(cmd.Env), Env+"="+l.spec())
	cmd.ExtraFiles = []*os.File{w}
	return &Status{r, w}, nil
}

// Started waits until the helper has exec'd the program, and returns why
// it could not if it did not: an error that matches the errno (as
// fs.ErrNotExist for ENOENT).
func (st *Status) Started() error {
	st.w.Close()
	defer st.r.Close()
	b, err := io.ReadAll(st.r)
	if err != nil || len(b) == 0 {
		return err
	}
	num, msg, _ := strings.Cut(string(b), " ")
	if n, err := strconv.Atoi(num); err == nil && n != 0 {
		return &helperError{msg: msg, errno: syscall.Errno(n)}
	}
	return errors.New(msg)
}

type helperError struct {
	msg   string
	errno syscall.Errno
}

func (e *helperError) Error() string { return e.msg }
func (e *helperError) Unwrap() error { return e.errno }

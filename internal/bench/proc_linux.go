//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for user space on every architecture Go runs
// on (sysconf(_SC_CLK_TCK) would need cgo).
const clockTick = 10 * time.Millisecond

// SelfCPU is this process's CPU time, user and system, all threads
// (getrusage RUSAGE_SELF).
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("bench: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// ProcCPU is the CPU time, user and system, of the running process pid,
// read from /proc/<pid>/stat (utime and stime, in clock ticks of 10 ms).
// RUSAGE_CHILDREN would count only children already waited for, so a
// running child is read here instead, before it ends.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("bench: CPU time of process %d: %w", pid, err)
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// the fields after its closing parenthesis start with field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: CPU time of process %d: /proc/%d/stat has no command name", pid, pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: CPU time of process %d: /proc/%d/stat has %d fields after the name", pid, pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // fields 14 and 15: utime, stime
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: CPU time of process %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// RSS is the resident set size in bytes of process pid (0: this one),
// VmRSS in /proc/<pid>/status.
func RSS(pid int) (int64, error) {
	name := "/proc/self/status"
	if pid != 0 {
		name = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, fmt.Errorf("bench: RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench: RSS in %s: %w", name, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("bench: RSS: no VmRSS line in %s", name)
}

// childAttr has a component process killed when the thread that started
// it ends, so a bench that dies leaves no process behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

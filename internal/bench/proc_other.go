//go:build !linux

package bench

import (
	"errors"
	"syscall"
	"time"
)

// errNoProc is returned where the process figures are not read: they come
// from getrusage and /proc as Linux has them.
var errNoProc = errors.New("bench: CPU time and RSS are measured on Linux only")

// SelfCPU is this process's CPU time; measured on Linux only.
func SelfCPU() (time.Duration, error) { return 0, errNoProc }

// ProcCPU is the CPU time of process pid; measured on Linux only.
func ProcCPU(int) (time.Duration, error) { return 0, errNoProc }

// RSS is the resident set size of process pid; measured on Linux only.
func RSS(int) (int64, error) { return 0, errNoProc }

// childAttr sets nothing where Pdeathsig is not available.
func childAttr() *syscall.SysProcAttr { return nil }

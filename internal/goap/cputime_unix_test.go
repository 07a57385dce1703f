//go:build unix

package goap

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, user and system. On a
// machine shared with other work a benchmark's wall time counts the time
// it waited for a core; its CPU time does not.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

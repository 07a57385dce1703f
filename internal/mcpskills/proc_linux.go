package mcpskills

import "syscall"

// childAttr has a server process signalled when the worker's thread that
// started it ends, so a worker killed with -9 leaves no server behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

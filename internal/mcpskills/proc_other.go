//go:build !linux

package mcpskills

import "syscall"

// childAttr sets nothing where Pdeathsig is not available.
func childAttr() *syscall.SysProcAttr { return nil }

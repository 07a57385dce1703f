package skills

import (
	"time"

	"github.com/planbus/planbus/internal/rlimit"
)

// ShellLimits are the resource limits (setrlimit) each program the shell
// skill starts runs under; its children inherit them. A zero field means
// its default; a negative one, no limit. They bound a program that spins,
// bloats, fills the disk or forks without end, and any process that
// escaped the call's process group, which the call's deadline cannot
// reach.
type ShellLimits struct {
	// CPU is the CPU time each process may use (RLIMIT_CPU), rounded up
	// to whole seconds. At the limit the process gets SIGXCPU and, a
	// second later, SIGKILL. Default DefaultShellMaxCPU.
	CPU time.Duration
	// Memory is the private writable memory each process may map
	// (RLIMIT_DATA: its heap and anonymous mappings, not address space
	// merely reserved), in bytes. Allocations past it fail. Default
	// DefaultShellMaxMemory.
	Memory int64
	// FileSize is the largest file each process may write (RLIMIT_FSIZE),
	// in bytes. Writing past it raises SIGXFSZ. Default
	// DefaultShellMaxFileSize.
	FileSize int64
	// Procs is the number of processes and threads the worker's user may
	// have for a program to start another (RLIMIT_NPROC). The kernel
	// counts all of the user's processes, the worker's own threads among
	// them, and does not apply the limit to root (uid 0) or to processes
	// with CAP_SYS_ADMIN or CAP_SYS_RESOURCE: run the worker as a user
	// of its own. Default DefaultShellMaxProcs.
	Procs int64
}

// Defaults of ShellLimits.
const (
	DefaultShellMaxCPU      = time.Minute
	DefaultShellMaxMemory   = 4 << 30
	DefaultShellMaxFileSize = 1 << 30
	DefaultShellMaxProcs    = 4096
)

// withDefaults fills zero fields with the defaults.
func (l ShellLimits) withDefaults() ShellLimits {
	if l.CPU == 0 {
		l.CPU = DefaultShellMaxCPU
	}
	if l.Memory == 0 {
		l.Memory = DefaultShellMaxMemory
	}
	if l.FileSize == 0 {
		l.FileSize = DefaultShellMaxFileSize
	}
	if l.Procs == 0 {
		l.Procs = DefaultShellMaxProcs
	}
	return l
}

// cpuSeconds is the CPU limit in whole seconds, rounded up; 0 for none.
func (l ShellLimits) cpuSeconds() int64 {
	if l.CPU < 0 {
		return 0
	}
	return int64((l.CPU + time.Second - 1) / time.Second)
}

// rlimits converts l, defaults filled in, to what the helper sets.
func (l ShellLimits) rlimits() rlimit.Limits {
	pos := func(v int64) uint64 { return uint64(max(v, 0)) }
	return rlimit.Limits{CPUSeconds: uint64(l.cpuSeconds()), Data: pos(l.Memory), FileSize: pos(l.FileSize), Procs: pos(l.Procs)}
}

package rlimit

import (
	"fmt"
	"strconv"
	"strings"
)

// Env carries the limits to the helper; a process started with it set is
// the helper. Programs must not be allowed to set it.
const Env = "PLANBUS_RLIMITS"

// Limits are the limits to set; a zero field is no limit. Core dumps are
// always off.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU: SIGXCPU at the limit, SIGKILL a second
	// later.
	CPUSeconds uint64
	// Data is RLIMIT_DATA in bytes: private writable memory.
	Data uint64
	// FileSize is RLIMIT_FSIZE in bytes: SIGXFSZ on writing past it.
	FileSize uint64
	// Procs is RLIMIT_NPROC: processes and threads of the user.
	Procs uint64
}

// Any reports whether any limit is set.
func (l Limits) Any() bool {
	return l.CPUSeconds > 0 || l.Data > 0 || l.FileSize > 0 || l.Procs > 0
}

// spec is the text Env carries: "core=0,cpu=60,data=...", the limits in
// the order the helper sets them, those that are off left out. The
// process limit comes last: the helper may still need a thread before.
func (l Limits) spec() string {
	parts := []string{"core=0"}
	add := func(name string, v uint64) {
		if v > 0 {
			parts = append(parts, name+"="+strconv.FormatUint(v, 10))
		}
	}
	add("cpu", l.CPUSeconds)
	add("data", l.Data)
	add("fsize", l.FileSize)
	add("nproc", l.Procs)
	return strings.Join(parts, ",")
}

// setting is one part of a spec.
type setting struct {
	name  string
	value uint64
}

// parseSpec reads what spec writes, in its order.
func parseSpec(spec string) ([]setting, error) {
	var out []setting
	for _, part := range strings.Split(spec, ",") {
		name, v, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("rlimit: %s=%q: bad part %q", Env, spec, part)
		}
		out = append(out, setting{name, n})
	}
	return out, nil
}

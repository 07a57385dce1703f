//go:build !(linux || darwin)

package rlimit

import (
	"errors"
	"os/exec"
)

// Status is the parent's end of a helper's report.
type Status struct{}

// Command refuses limits, which this system cannot set, and leaves cmd
// as it is when l sets none.
func Command(_ *exec.Cmd, l Limits) (*Status, error) {
	if l.Any() {
		return nil, errors.New("rlimit: resource limits need a unix system")
	}
	return &Status{}, nil
}

// Started returns nil.
func (*Status) Started() error { return nil }

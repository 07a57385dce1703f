//go:build !unix

package goap

import "time"

// processCPU is not measured on this system.
func processCPU() (time.Duration, bool) { return 0, false }

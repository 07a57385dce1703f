//go:build linux

package bench

import (
	"os"
	"testing"
)

// A process's own figures read through /proc agree in kind with
// getrusage: CPU time spent, RSS above a megabyte.
func TestProcFigures(t *testing.T) {
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	_ = x
	self, err := SelfCPU()
	if err != nil || self <= 0 {
		t.Fatalf("SelfCPU = %v, %v; want a positive time", self, err)
	}
	proc, err := ProcCPU(os.Getpid())
	if err != nil || proc < 0 || proc > self+clockTick {
		t.Errorf("ProcCPU(self) = %v, %v; want between 0 and getrusage's %v", proc, err, self)
	}
	for _, pid := range []int{0, os.Getpid()} {
		if rss, err := RSS(pid); err != nil || rss < 1<<20 {
			t.Errorf("RSS(%d) = %d, %v; want more than 1 MiB", pid, rss, err)
		}
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Error("ProcCPU of no process: no error")
	}
}

//go:build unix

package skills

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/planbus/planbus"
)

// setProcessGroup makes the program lead a process group of its own and
// has ctx's end kill the whole group, so its children die with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}

// killProcessGroup kills whatever the program left running in its group
// after it exited. While any member is alive the group id cannot be reused;
// once none is, the kill finds nothing unless the pid space wrapped around
// to that id in the instant since the program was reaped.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// limitKill says which limit killed the program, judging by how it ended:
// the code and a description, or "" if none did. Go programs ignore
// SIGXCPU, so a SIGKILL after the CPU limit's worth of time counts too.
func limitKill(ps *os.ProcessState, l ShellLimits) (code planbus.Code, what string) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", ""
	}
	cpu := ps.UserTime() + ps.SystemTime()
	switch sig := ws.Signal(); {
	case sig == syscall.SIGXFSZ:
		return planbus.CodeShellFileSizeLimit, fmt.Sprintf("it wrote past the file size limit of %d bytes (--shell-max-file-size)", l.FileSize)
	case sig == syscall.SIGXCPU, sig == syscall.SIGKILL && l.CPU > 0 && cpu >= time.Duration(l.cpuSeconds())*time.Second:
		return planbus.CodeShellCPULimit, fmt.Sprintf("it used %.1fs of CPU time, its limit being %ds (--shell-max-cpu)", cpu.Seconds(), l.cpuSeconds())
	}
	return "", ""
}

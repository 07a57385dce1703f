//go:build unix

package skills

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
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

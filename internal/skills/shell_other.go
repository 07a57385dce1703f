//go:build !unix

package skills

import (
	"os"
	"os/exec"

	"github.com/planbus/planbus"
)

// setProcessGroup leaves exec.CommandContext's default in place, which
// kills only the program itself when ctx ends.
func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(*exec.Cmd) {}

func limitKill(*os.ProcessState, ShellLimits) (code planbus.Code, what string) { return "", "" }

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
)

// IO is what a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    func(string) string
}

// OS returns the process's streams and environment.
func OS() IO { return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Getenv} }

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1   // the plan failed, timed out or was rejected; or the command failed
	ExitUsage  = 2   // bad flags, or input that is not a valid plan
	ExitSignal = 130 // interrupted: the command's context ended first
)

// Version of the build, from the module information when installed.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.0.0-dev"
}

// UsageErr reports a command line that cannot be used: err on stderr and
// ExitUsage, or ExitOK when err is flag.ErrHelp (-h printed the usage).
func UsageErr(stderr io.Writer, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintln(stderr, err)
	return ExitUsage
}

// CtxExit is code, or ExitSignal when the command failed because ctx
// ended (an interrupt).
func CtxExit(ctx context.Context, code int) int {
	if ctx.Err() != nil && code != ExitOK {
		return ExitSignal
	}
	return code
}

// Runner is a component's Run.
type Runner func(context.Context) error

// ServeComponent connects to c.Bus as role, declares the streams (or, on
// a server with authorization, what the role may declare, waiting for the
// rest) and runs the component build makes until ctx ends. An error from
// build is a usage error (a bad configuration).
func ServeComponent(ctx context.Context, c *Common, log zerolog.Logger, stderr io.Writer, name string, role bus.Role, build func(*bus.Conn) (Runner, error)) int {
	c.Bus.Role = role
	conn, err := bus.Dial(ctx, c.Bus, log)
	if err != nil {
		log.Error().Err(err).Msg("cannot connect")
		return CtxExit(ctx, ExitFailed)
	}
	defer conn.Close()
	if err := conn.Declare(ctx); err != nil {
		log.Error().Err(err).Msg("cannot declare streams")
		return CtxExit(ctx, ExitFailed)
	}
	run, err := build(conn)
	if err != nil {
		return UsageErr(stderr, err)
	}
	if err := run(ctx); err != nil {
		log.Error().Err(err).Msg(name + " failed")
		return ExitFailed
	}
	return ExitOK
}

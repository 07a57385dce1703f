package plannercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/client"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/plan"
	"github.com/rs/zerolog"
)

// dialForID checks that a command was given one id (of the kind what
// names) and connects; on failure it has said why on stderr and code is
// the exit code.
func (c *common) dialForID(ctx context.Context, f *cli.Flags, log zerolog.Logger, io cli.IO, name, what string) (cl *client.Client, id string, closeConn func(), code int, ok bool) {
	if f.NArg() != 1 || !plan.ValidID(f.Arg(0)) {
		fmt.Fprintf(io.Stderr, "%s: want one %s%s\n", name, what, f.LateFlags())
		return nil, "", nil, cli.ExitUsage, false
	}
	cl, closeConn, err := c.dialClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "%s: %v\n", name, err)
		return nil, "", nil, cli.CtxExit(ctx, cli.ExitFailed), false
	}
	return cl, f.Arg(0), closeConn, 0, true
}

// dialClient connects to the system named by c and returns a client on
// the connection and a function that closes it.
func (c *common) dialClient(ctx context.Context, log zerolog.Logger) (*client.Client, func(), error) {
	conn, err := c.dialAsClient(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	cl, err := clientOn(conn, client.WithLogger(logbridge.Slog(log)))
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return cl, conn.Close, nil
}

// refusedInput reports whether err is the planner's refusal of what it was
// given (exit 2: fix the input); a refusal because the planner could not
// do its part just then (UNAVAILABLE: its store did not answer) is not.
func refusedInput(err error) bool {
	var rej *client.RejectedError
	return errors.As(err, &rej) && rej.Reply.Error.Code != planbus.CodeUnavailable
}

// unavailable says what an UNAVAILABLE refusal means: nothing was stored,
// and the same request may be sent again; other errors are as they are.
func unavailable(err error) error {
	var rej *client.RejectedError
	if errors.As(err, &rej) && rej.Reply.Error.Code == planbus.CodeUnavailable {
		return fmt.Errorf("the planner could not take the request just now (%s: %v); nothing was stored: send it again", planbus.CodeUnavailable, err)
	}
	return err
}

// dialAsClient connects to --nats-url for a client command and checks the
// server lets it read what a client reads (bus.Conn.CheckClient).
func (c *common) dialAsClient(ctx context.Context, log zerolog.Logger) (*bus.Conn, error) {
	conn, err := bus.Dial(ctx, c.Bus, log)
	if err != nil {
		return nil, err
	}
	if err := conn.CheckClient(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// clientFlags parses the flags of a client verb and checks that a system
// is named. When the command must end, ok is false and code is its exit
// code.
func clientFlags(f *cli.Flags, c *common, args []string, io cli.IO, cmd string) (log zerolog.Logger, code int, ok bool) {
	if err := f.Parse(args); err != nil {
		return zerolog.Nop(), cli.UsageErr(io.Stderr, err), false
	}
	if c.Bus.URL == "" {
		fmt.Fprintf(io.Stderr, "%s: --nats-url (or $NATS_URL) is required: it works on a running system (planner serve listens on nats://127.0.0.1:4222; --nats-url goes before the arguments)\n", cmd)
		return zerolog.Nop(), cli.ExitUsage, false
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return log, cli.UsageErr(io.Stderr, err), false
	}
	return log, 0, true
}

// writer is io.Writer, named where a verb's IO parameter hides package io.
type writer = io.Writer

// answerVerb is a verb that asks the planner one thing and prints its
// answer: its flags are the connection's, the verb's own and --json.
type answerVerb struct {
	name   string
	c      common
	f      *cli.Flags
	asJSON bool
	log    zerolog.Logger
}

// parseAnswerVerb registers and parses an answer verb's flags; own
// registers the verb's own. ok is false, with the exit code, when the
// command line is not usable.
func parseAnswerVerb(name, usage string, args []string, io cli.IO, own func(f *cli.Flags)) (v *answerVerb, code int, ok bool) {
	return parseVerb(name, usage, args, io, own, false)
}

// parseAnswerVerbAnyOrder is parseAnswerVerb for a verb whose flags may
// come before, between or after its arguments (planner schedule add NAME
// --cron EXPR FILE).
func parseAnswerVerbAnyOrder(name, usage string, args []string, io cli.IO, own func(f *cli.Flags)) (v *answerVerb, code int, ok bool) {
	return parseVerb(name, usage, args, io, own, true)
}

func parseVerb(name, usage string, args []string, io cli.IO, own func(f *cli.Flags), anyOrder bool) (v *answerVerb, code int, ok bool) {
	v = &answerVerb{name: name}
	v.f = cli.NewFlags(name, io.Stderr, io.Env, usage)
	v.c.Register(v.f, cli.AsClient)
	v.c.RegisterClient(v.f)
	if own != nil {
		own(v.f)
	}
	v.f.Bool(&v.asJSON, "json", "", false, "print the planner's answer as JSON")
	if anyOrder {
		args = flagsFirst(v.f.FlagSet, args)
	}
	v.log, code, ok = clientFlags(v.f, &v.c, args, io, name)
	return v, code, ok
}

// dialForID checks the verb's one id argument (what it names) and
// connects a client.
func (v *answerVerb) dialForID(ctx context.Context, io cli.IO, what string) (cl *client.Client, id string, closeConn func(), code int, ok bool) {
	return v.c.dialForID(ctx, v.f, v.log, io, v.name, what)
}

// failed reports an answer verb's call that failed, and the exit code:
// 2 when the planner refused what it was given, 1 when it could not be
// asked or could not answer just then (UNAVAILABLE).
func (v *answerVerb) failed(ctx context.Context, io cli.IO, err error) (int, bool) {
	switch {
	case err == nil:
		return 0, false
	case refusedInput(err):
		fmt.Fprintf(io.Stderr, "%s: %v\n", v.name, err)
		return cli.ExitUsage, true
	}
	fmt.Fprintf(io.Stderr, "%s: %v\n", v.name, unavailable(err))
	return cli.CtxExit(ctx, cli.ExitFailed), true
}

// print prints the answer: as one JSON line with --json, else as text
// writes it. It returns ExitOK.
func (v *answerVerb) print(std cli.IO, answer any, text func(w writer)) int {
	if v.asJSON {
		line, _ := jsonLine(answer)
		fmt.Fprintln(std.Stdout, line)
	} else {
		text(std.Stdout)
	}
	return cli.ExitOK
}

// clientOn is a planbus client on conn, as the named client its seed
// names (client-<name>.nk), if any.
func clientOn(conn *bus.Conn, opts ...client.Option) (*client.Client, error) {
	if conn.Config.Client != "" {
		opts = append(opts, client.As(conn.Config.Client))
	}
	return client.New(conn.NC, opts...)
}

// common are the flags every command has (cli.Common), with what the
// planner's commands do with them: connect as a client, or start a node.
type common struct{ cli.Common }

// flagsFirst moves the flags of args (as fs defines them: a flag that is
// not boolean takes the next argument unless written name=value) before
// the other arguments, which keep their order after "--".
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		fl := fs.Lookup(name)
		if fl == nil {
			continue // Parse reports it
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), rest...)
}

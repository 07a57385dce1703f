package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
)

// Flags is a flag.FlagSet whose flags may also come from the environment:
// a flag given on the command line wins over its variable, which wins over
// the default.
type Flags struct {
	*flag.FlagSet
	env    func(string) string
	errors []string
}

// NewFlags is the flag set of command name, whose -h prints usage and
// the flags on stderr; env reads the environment.
func NewFlags(name string, stderr io.Writer, env func(string) string, usage string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &Flags{FlagSet: fs, env: env}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags (each may also be set by the environment variable shown):\n", strings.TrimSpace(usage))
		fs.PrintDefaults()
	}
	return f
}

// Env is the environment variable name as the flags see it (the IO's
// Env of the command).
func (f *Flags) Env(name string) string { return f.env(name) }

func (f *Flags) envOr(env, def string) string {
	if env != "" {
		if v := f.env(env); v != "" {
			return v
		}
	}
	return def
}

func envNote(env string) string {
	if env == "" {
		return ""
	}
	return " [$" + env + "]"
}

// String registers a string flag, set by the variable env if not empty.
func (f *Flags) String(p *string, name, env, def, usage string) {
	f.StringVar(p, name, f.envOr(env, def), usage+envNote(env))
}

// Int registers an int flag, set by the variable env if not empty.
func (f *Flags) Int(p *int, name, env string, def int, usage string) {
	v := def
	if s := f.envOr(env, ""); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q is not a number", env, s))
		}
		v = n
	}
	f.IntVar(p, name, v, usage+envNote(env))
}

// Duration registers a duration flag, set by the variable env if not
// empty.
func (f *Flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	v := def
	if s := f.envOr(env, ""); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q is not a duration (like 30s)", env, s))
		}
		v = d
	}
	f.DurationVar(p, name, v, usage+envNote(env))
}

// Size registers a byte-size flag that takes sizes like 256MiB, 1GiB,
// 64MB or a plain number of bytes.
func (f *Flags) Size(p *int64, name, env string, def int64, usage string) {
	*p = def
	if s := f.envOr(env, ""); s != "" {
		if err := (*sizeValue)(p).Set(s); err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q: %v", env, s, err))
		}
	}
	f.Var((*sizeValue)(p), name, usage+envNote(env))
}

// Strings registers a flag that may be given many times; each adds a
// value to *p.
func (f *Flags) Strings(p *[]string, name, usage string) {
	f.Var((*stringsValue)(p), name, usage)
}

// stringsValue is a flag.Value of the values of a repeated flag.
type stringsValue []string

func (v *stringsValue) Set(s string) error { *v = append(*v, s); return nil }

func (v *stringsValue) String() string {
	if v == nil {
		return ""
	}
	return strings.Join(*v, " ")
}

// Given tells whether the flag name was given on the command line.
func (f *Flags) Given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// sizeValue is a flag.Value of bytes.
type sizeValue int64

// maxSize bounds sizes so that sums of a few of them stay in an int64.
const maxSize = 1 << 50

func (v *sizeValue) Set(s string) error {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil || n > maxSize {
		return fmt.Errorf("%q is not a size like 256MiB, 1GiB or a number of bytes", s)
	}
	*v = sizeValue(n)
	return nil
}

func (v *sizeValue) String() string {
	if v == nil {
		return "0"
	}
	return humanize.IBytes(uint64(*v))
}

// Bool registers a bool flag, set by the variable env if not empty.
func (f *Flags) Bool(p *bool, name, env string, def bool, usage string) {
	v := def
	if s := f.envOr(env, ""); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q is not true or false", env, s))
		}
		v = b
	}
	f.BoolVar(p, name, v, usage+envNote(env))
}

// syncValue is a bus.Sync as a flag.
type syncValue struct{ p *bus.Sync }

func (v syncValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v syncValue) Set(s string) error {
	sy, err := bus.ParseSync(s)
	if err != nil {
		return fmt.Errorf("want always or an interval like 1s")
	}
	*v.p = sy
	return nil
}

// Sync registers a flag of bus.Sync: always, or an interval like 1s.
func (f *Flags) Sync(p *bus.Sync, name, env string, def bus.Sync, usage string) {
	*p = def
	if s := f.envOr(env, ""); s != "" {
		sy, err := bus.ParseSync(s)
		if err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q is not always or an interval like 1s", env, s))
		}
		*p = sy
	}
	f.Var(syncValue{p}, name, usage+envNote(env))
}

// KeepEvents is a flag of bus.KeepEvents, checked as it is parsed.
func (f *Flags) KeepEvents(p *bus.KeepEvents, name, env string, usage string) {
	*p = ""
	if s := f.envOr(env, ""); s != "" {
		k, err := bus.ParseKeepEvents(s)
		if err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q is neither all nor outcomes", env, s))
		}
		*p = k
	}
	f.Var(keepEventsValue{p}, name, usage+envNote(env))
}

type keepEventsValue struct{ p *bus.KeepEvents }

func (v keepEventsValue) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v keepEventsValue) Set(s string) error {
	k, err := bus.ParseKeepEvents(s)
	if err != nil {
		return fmt.Errorf("%q is neither all nor outcomes", s)
	}
	*v.p = k
	return nil
}

// Parse parses args and reports the environment's bad values too.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if len(f.errors) > 0 {
		return fmt.Errorf("%s", strings.Join(f.errors, "; "))
	}
	return nil
}

// Common are the flags every command has: the NATS connection and its
// credentials, the embedded server's, logging. Register adds them to a
// command's Flags; the fields hold their values once parsed.
type Common struct {
	Bus       bus.Config
	LogLevel  string
	LogFormat string
	// Auth and Insecure: commands with an embedded server only.
	Auth     bool
	Insecure bool
}

// Mode says how a command reaches NATS, which decides its flags and the
// defaults its help shows.
type Mode int

const (
	// Connects: a component that needs a running system (--nats-url) and
	// declares the streams and buckets its role may.
	Connects Mode = iota
	// AsClient: a command that talks to a running system and declares
	// nothing, so the settings of the streams are not its flags.
	AsClient
	// Serves: planner serve, an embedded server by default that others
	// connect to.
	Serves
	// RunsPrivately: planner run, a private embedded server by default (a
	// free port, a temporary store) so it can run beside a live node.
	RunsPrivately
)

// Register adds the flags to f, as m says the command reaches NATS.
func (c *Common) Register(f *Flags, m Mode) {
	switch m {
	case Connects, AsClient:
		f.String(&c.Bus.URL, "nats-url", "NATS_URL", "", "NATS server URL(s), comma-separated (required)")
	default:
		f.String(&c.Bus.URL, "nats-url", "NATS_URL", "", "NATS server URL(s), comma-separated; empty starts an embedded server")
	}
	f.String(&c.Bus.CredsFile, "creds", "NATS_CREDS", "", "NATS credentials file")
	f.String(&c.Bus.NKeySeedFile, "nkey", "NATS_NKEY", "", "file with an nkey seed to authenticate with")
	f.String(&c.Bus.TLSCAFile, "tls-ca", "NATS_CA", "", "PEM file of CAs to verify the NATS server")
	if m != AsClient {
		c.registerStreams(f)
	}
	switch m {
	case Serves:
		f.String(&c.Bus.Listen, "listen", "PLANBUS_LISTEN", "127.0.0.1:4222", "embedded server address (port 0: any free port)")
		f.String(&c.Bus.DataDir, "data-dir", "PLANBUS_DATA_DIR", bus.DefaultDataDir(), "embedded server store")
	case RunsPrivately:
		f.String(&c.Bus.Listen, "listen", "PLANBUS_LISTEN", "127.0.0.1:0", "embedded server address (port 0: any free port)")
		f.String(&c.Bus.DataDir, "data-dir", "PLANBUS_DATA_DIR", "", "embedded server store (default: a new temporary directory, removed after the run)")
	}
	if m == Serves || m == RunsPrivately {
		f.Bool(&c.Auth, "auth", "PLANBUS_AUTH", false,
			"authentication and least-privilege roles on the embedded server; each role's nkey seed is in <data-dir>/auth/<role>.nk")
		f.Bool(&c.Insecure, "insecure", "PLANBUS_INSECURE", false, "let --listen take a non-loopback address without --auth")
		usage := "when the embedded store is flushed to disk: always (before each write is acknowledged) or an interval like 1s (see docs/deploy.md)"
		if m == RunsPrivately {
			usage += "; a private run's temporary store is flushed every second unless this is given"
		}
		f.Sync(&c.Bus.Sync, "sync", "PLANBUS_SYNC", bus.DefaultSync, usage)
	}
	level := "info"
	if m == RunsPrivately {
		level = "warn" // progress lines tell the story; logs are for trouble
	}
	f.String(&c.LogLevel, "log-level", "PLANBUS_LOG_LEVEL", level, "debug, info, warn or error")
	f.String(&c.LogFormat, "log-format", "PLANBUS_LOG_FORMAT", "console", "console or json")
}

// registerStreams adds the settings of planbus's streams and buckets,
// which the commands that declare them take.
func (c *Common) registerStreams(f *Flags) {
	f.Int(&c.Bus.Replicas, "replicas", "PLANBUS_REPLICAS", 0,
		"replicas of planbus streams and buckets, 3 on a cluster (default: the running system's, else 1)")
	f.Duration(&c.Bus.Retention, "retention", "PLANBUS_RETENTION", 0,
		"how long finished plans, their results and outcomes are kept, and the longest a plan may run (default: the running system's, else 24h; docs/deploy.md, Retention)")
	f.Int(&c.Bus.Partitions, "partitions", "PLANBUS_PARTITIONS", 0,
		"partitions of the plans' messages, each consumed by one dispatcher; change it only with no plan running (default: the running system's, else 8; docs/deploy.md, Partitions)")
	f.KeepEvents(&c.Bus.KeepEvents, "keep-events", "PLANBUS_KEEP_EVENTS",
		"progress events the events stream keeps for those who read them back: all, or outcomes (all but tool.released and tool.started, which are still published live) (default: the running system's, else all; docs/deploy.md, Retention)")
}

// registerClient adds the flags of commands that talk to a running system
// and end: they give up on an unreachable server instead of waiting for it.
func (c *Common) RegisterClient(f *Flags) {
	f.Duration(&c.Bus.ConnectTimeout, "connect-timeout", "PLANBUS_CONNECT_TIMEOUT", 10*time.Second,
		"with --nats-url: how long to wait for the server to answer before giving up")
}

// Logger is the command's logger on stderr, as --log-level and
// --log-format say.
func (c *Common) Logger(stderr io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.LogLevel)
	if err != nil || c.LogLevel == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	var w io.Writer
	switch c.LogFormat {
	case "json":
		w = stderr
	case "console":
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000", NoColor: !IsTerminal(stderr)}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want console or json", c.LogFormat)
	}
	return zerolog.New(w).Level(lvl).Hook(timestamp{}), nil
}

// timestamp stamps each line with the time to the nanosecond. zerolog's
// own Timestamp writes whole seconds unless a process-wide setting is
// changed, and a log whose lines all end in .000 cannot order events.
type timestamp struct{}

func (timestamp) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().Format(time.RFC3339Nano))
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// SplitList splits a comma-separated flag, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// lateFlags explains a wrong count of arguments that comes from flags
// given after them, which the flag package takes as arguments: "" when
// no argument after the first looks like a flag.
func (f *Flags) LateFlags() string {
	for _, a := range f.Args()[min(1, f.NArg()):] {
		if len(a) > 1 && a[0] == '-' {
			return fmt.Sprintf(" (flags go before the arguments: %s came after them)", a)
		}
	}
	return ""
}

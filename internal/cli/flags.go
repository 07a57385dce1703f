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

// flags is a flag.FlagSet whose flags may also come from the environment:
// a flag given on the command line wins over its variable, which wins over
// the default.
type flags struct {
	*flag.FlagSet
	env    func(string) string
	errors []string
}

func newFlags(name string, stderr io.Writer, env func(string) string, usage string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{FlagSet: fs, env: env}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags (each may also be set by the environment variable shown):\n", strings.TrimSpace(usage))
		fs.PrintDefaults()
	}
	return f
}

func (f *flags) envOr(env, def string) string {
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

func (f *flags) String(p *string, name, env, def, usage string) {
	f.StringVar(p, name, f.envOr(env, def), usage+envNote(env))
}

func (f *flags) Int(p *int, name, env string, def int, usage string) {
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

func (f *flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
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
func (f *flags) Size(p *int64, name, env string, def int64, usage string) {
	*p = def
	if s := f.envOr(env, ""); s != "" {
		if err := (*sizeValue)(p).Set(s); err != nil {
			f.errors = append(f.errors, fmt.Sprintf("$%s=%q: %v", env, s, err))
		}
	}
	f.Var((*sizeValue)(p), name, usage+envNote(env))
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

func (f *flags) Bool(p *bool, name, env string, def bool, usage string) {
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

func (f *flags) Sync(p *bus.Sync, name, env string, def bus.Sync, usage string) {
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
func (f *flags) KeepEvents(p *bus.KeepEvents, name, env string, usage string) {
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

// parse parses args and reports environment errors too.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.errors) > 0 {
		return fmt.Errorf("%s", strings.Join(f.errors, "; "))
	}
	return nil
}

// common are the flags every command has.
type common struct {
	bus       bus.Config
	logLevel  string
	logFormat string
	// auth and insecure: commands with an embedded server only.
	auth     bool
	insecure bool
}

// mode says how a command reaches NATS, which decides its flags and the
// defaults its help shows.
type mode int

const (
	// connects: a component that needs a running system (--nats-url) and
	// declares the streams and buckets its role may.
	connects mode = iota
	// asClient: a command that talks to a running system and declares
	// nothing, so the settings of the streams are not its flags.
	asClient
	// serves: planner serve, an embedded server by default that others
	// connect to.
	serves
	// runsPrivately: planner run, a private embedded server by default (a
	// free port, a temporary store) so it can run beside a live node.
	runsPrivately
)

func (c *common) register(f *flags, m mode) {
	switch m {
	case connects, asClient:
		f.String(&c.bus.URL, "nats-url", "NATS_URL", "", "NATS server URL(s), comma-separated (required)")
	default:
		f.String(&c.bus.URL, "nats-url", "NATS_URL", "", "NATS server URL(s), comma-separated; empty starts an embedded server")
	}
	f.String(&c.bus.CredsFile, "creds", "NATS_CREDS", "", "NATS credentials file")
	f.String(&c.bus.NKeySeedFile, "nkey", "NATS_NKEY", "", "file with an nkey seed to authenticate with")
	f.String(&c.bus.TLSCAFile, "tls-ca", "NATS_CA", "", "PEM file of CAs to verify the NATS server")
	if m != asClient {
		c.registerStreams(f)
	}
	switch m {
	case serves:
		f.String(&c.bus.Listen, "listen", "PLANBUS_LISTEN", "127.0.0.1:4222", "embedded server address (port 0: any free port)")
		f.String(&c.bus.DataDir, "data-dir", "PLANBUS_DATA_DIR", bus.DefaultDataDir(), "embedded server store")
	case runsPrivately:
		f.String(&c.bus.Listen, "listen", "PLANBUS_LISTEN", "127.0.0.1:0", "embedded server address (port 0: any free port)")
		f.String(&c.bus.DataDir, "data-dir", "PLANBUS_DATA_DIR", "", "embedded server store (default: a new temporary directory, removed after the run)")
	}
	if m == serves || m == runsPrivately {
		f.Bool(&c.auth, "auth", "PLANBUS_AUTH", false,
			"authentication and least-privilege roles on the embedded server; each role's nkey seed is in <data-dir>/auth/<role>.nk")
		f.Bool(&c.insecure, "insecure", "PLANBUS_INSECURE", false, "let --listen take a non-loopback address without --auth")
		usage := "when the embedded store is flushed to disk: always (before each write is acknowledged) or an interval like 1s (see docs/deploy.md)"
		if m == runsPrivately {
			usage += "; a private run's temporary store is flushed every second unless this is given"
		}
		f.Sync(&c.bus.Sync, "sync", "PLANBUS_SYNC", bus.DefaultSync, usage)
	}
	level := "info"
	if m == runsPrivately {
		level = "warn" // progress lines tell the story; logs are for trouble
	}
	f.String(&c.logLevel, "log-level", "PLANBUS_LOG_LEVEL", level, "debug, info, warn or error")
	f.String(&c.logFormat, "log-format", "PLANBUS_LOG_FORMAT", "console", "console or json")
}

// registerStreams adds the settings of planbus's streams and buckets,
// which the commands that declare them take.
func (c *common) registerStreams(f *flags) {
	f.Int(&c.bus.Replicas, "replicas", "PLANBUS_REPLICAS", 0,
		"replicas of planbus streams and buckets, 3 on a cluster (default: the running system's, else 1)")
	f.Duration(&c.bus.Retention, "retention", "PLANBUS_RETENTION", 0,
		"how long finished plans, their results and outcomes are kept, and the longest a plan may run (default: the running system's, else 24h; docs/deploy.md, Retention)")
	f.Int(&c.bus.Partitions, "partitions", "PLANBUS_PARTITIONS", 0,
		"partitions of the plans' messages, each consumed by one dispatcher; change it only with no plan running (default: the running system's, else 8; docs/deploy.md, Partitions)")
	f.KeepEvents(&c.bus.KeepEvents, "keep-events", "PLANBUS_KEEP_EVENTS",
		"progress events the events stream keeps for those who read them back: all, or outcomes (all but tool.released and tool.started, which are still published live) (default: the running system's, else all; docs/deploy.md, Retention)")
}

// registerClient adds the flags of commands that talk to a running system
// and end: they give up on an unreachable server instead of waiting for it.
func (c *common) registerClient(f *flags) {
	f.Duration(&c.bus.ConnectTimeout, "connect-timeout", "PLANBUS_CONNECT_TIMEOUT", 10*time.Second,
		"with --nats-url: how long to wait for the server to answer before giving up")
}

func (c *common) logger(stderr io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.logLevel)
	if err != nil || c.logLevel == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	var w io.Writer
	switch c.logFormat {
	case "json":
		w = stderr
	case "console":
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05.000", NoColor: !isTerminal(stderr)}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want console or json", c.logFormat)
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

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func splitList(s string) []string {
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
func (f *flags) lateFlags() string {
	for _, a := range f.Args()[min(1, f.NArg()):] {
		if len(a) > 1 && a[0] == '-' {
			return fmt.Sprintf(" (flags go before the arguments: %s came after them)", a)
		}
	}
	return ""
}

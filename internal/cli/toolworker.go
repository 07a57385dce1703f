package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/logbridge"
	"github.com/planbus/planbus/internal/metrics"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

const toolworkerUsage = `Usage: toolworker [flags]

Serves skills to planbus: pulls tool calls from planbus.tools.<skill>,
runs them with a deadline and heartbeats, and publishes their results.
Start more processes to add capacity; they share each skill's queue.`

type workerFlags struct {
	skills       string
	concurrency  int
	ackWait      time.Duration
	drainTimeout time.Duration
	shellAllow   string
	shellDir     string
	shellPassEnv string
	shellEnv     string
	shellCPU     time.Duration
	shellMemory  int64
	shellFile    int64
	shellProcs   int
	httpAllow    string
	httpPrivate  bool
	simulate     string
	id           string
}

func (w *workerFlags) register(f *flags) {
	f.String(&w.skills, "skills", "PLANBUS_SKILLS", "echo,sleep,fail,shell,http,remember", "built-in skills to serve, comma-separated")
	f.Int(&w.concurrency, "concurrency", "PLANBUS_CONCURRENCY", 16, "calls of each skill run at once by this worker")
	f.Duration(&w.ackWait, "ack-wait", "PLANBUS_ACK_WAIT", 0, "how long a call may go without a heartbeat before another worker gets it; a setting of each skill's consumer, shared by its workers (default: the consumer's, else 30s)")
	f.Duration(&w.drainTimeout, "drain-timeout", "PLANBUS_DRAIN_TIMEOUT", 30*time.Second, "on SIGTERM, how long running calls may finish")
	f.String(&w.shellAllow, "shell-allow", "PLANBUS_SHELL_ALLOW", "", "programs the shell skill may run: names or absolute paths, comma-separated, each with any subcommand but dangerous options refused; 'git=status,diff' (a group of its own, after ';' or a space) limits git to those subcommands (empty: none); see docs/skills.md")
	f.String(&w.shellDir, "shell-dir", "PLANBUS_SHELL_DIR", "", "working directory of the shell skill; path arguments must stay inside it (default: the current one)")
	f.String(&w.shellPassEnv, "shell-pass-env", "PLANBUS_SHELL_PASS_ENV", "HOME", "worker environment variables shell programs also see, comma-separated (besides PATH)")
	f.String(&w.shellEnv, "shell-env-allow", "PLANBUS_SHELL_ENV_ALLOW", "", "variables a shell call's env may set, comma-separated: NAME, PREFIX_* or * (empty: none); PATH, LD_*, GIT_*, HOME, BASH_ENV and others that run code are refused whatever this says")
	f.Duration(&w.shellCPU, "shell-max-cpu", "PLANBUS_SHELL_MAX_CPU", skills.DefaultShellMaxCPU, "CPU time each shell program may use, whole seconds (0: no limit)")
	f.Size(&w.shellMemory, "shell-max-memory", "PLANBUS_SHELL_MAX_MEMORY", skills.DefaultShellMaxMemory, "memory (RLIMIT_DATA) each shell program may map, like 512MiB or 4GiB (0: no limit)")
	f.Size(&w.shellFile, "shell-max-file-size", "PLANBUS_SHELL_MAX_FILE_SIZE", skills.DefaultShellMaxFileSize, "largest file a shell program may write, like 100MiB (0: no limit)")
	f.Int(&w.shellProcs, "shell-max-procs", "PLANBUS_SHELL_MAX_PROCS", skills.DefaultShellMaxProcs, "processes and threads of the worker's user past which shell programs cannot fork (RLIMIT_NPROC; not applied to root) (0: no limit)")
	f.String(&w.httpAllow, "http-allow", "PLANBUS_HTTP_ALLOW", "", "hosts the http skill may call, comma-separated, each host or host:port (empty: any host at a public address)")
	f.Bool(&w.httpPrivate, "http-allow-private", "PLANBUS_HTTP_ALLOW_PRIVATE", false, "let the http skill connect to loopback, private (RFC 1918, CGNAT, unique-local) addresses, and to link-local ones for hosts named in --http-allow (default: refused)")
	f.String(&w.simulate, "simulate", "PLANBUS_SIMULATE", "", "stand-in skills, space-separated: name(param,...) succeeds, name(param,...)=category always fails, name@3s takes 3s; an input's statePatch object patches the session")
	f.String(&w.id, "id", "PLANBUS_WORKER_ID", "", "worker id (default hostname-pid-n)")
}

// outputCap is the largest output of a call the worker accepts; the http
// skill cuts bodies to fit it.
const outputCap = 1 << 20

func (w *workerFlags) config() (worker.Config, error) {
	shell, err := w.shellConfig()
	if err != nil {
		return worker.Config{}, err
	}
	all := skills.Builtins(skills.BuiltinConfig{
		Shell: shell,
		HTTP:  skills.HTTPConfig{AllowHosts: splitList(w.httpAllow), AllowPrivate: w.httpPrivate, OutputCap: outputCap},
	})
	var chosen []skill.Skill
	var names []string
	for _, s := range all {
		names = append(names, s.Manifest.Name)
	}
	for _, name := range splitList(w.skills) {
		i := slices.IndexFunc(all, func(s skill.Skill) bool { return s.Manifest.Name == name })
		if i < 0 {
			return worker.Config{}, fmt.Errorf("--skills: unknown skill %q (built-in skills: %v)", name, names)
		}
		chosen = append(chosen, all[i])
	}
	for _, spec := range strings.Fields(w.simulate) {
		sk, err := skills.Simulated(spec)
		if err != nil {
			return worker.Config{}, fmt.Errorf("--simulate: %w", err)
		}
		if i := slices.IndexFunc(chosen, func(s skill.Skill) bool { return s.Manifest.Name == sk.Manifest.Name }); i >= 0 {
			chosen[i] = sk // a simulated skill stands in for the built-in of that name
		} else {
			chosen = append(chosen, sk)
		}
	}
	if len(chosen) == 0 {
		return worker.Config{}, fmt.Errorf("--skills: no skills given")
	}
	return worker.Config{ID: w.id, Skills: chosen, Concurrency: w.concurrency, AckWait: w.ackWait,
		DrainTimeout: w.drainTimeout, OutputCap: outputCap, Version: Version()}, nil
}

// shellConfig reads the shell skill's flags; a flag's 0 means no limit.
func (w *workerFlags) shellConfig() (skills.ShellConfig, error) {
	allow, err := skills.ParseShellAllow(w.shellAllow)
	if err != nil {
		return skills.ShellConfig{}, fmt.Errorf("--shell-allow: %w", err)
	}
	envAllow, err := skills.ParseShellEnvAllow(w.shellEnv)
	if err != nil {
		return skills.ShellConfig{}, fmt.Errorf("--shell-env-allow: %w", err)
	}
	noLimit := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	if w.shellCPU < 0 {
		return skills.ShellConfig{}, fmt.Errorf("--shell-max-cpu %s: want 0 (no limit) or more", w.shellCPU)
	}
	if w.shellProcs < 0 {
		return skills.ShellConfig{}, fmt.Errorf("--shell-max-procs %d: want 0 (no limit) or more", w.shellProcs)
	}
	return skills.ShellConfig{
		Allow: allow, Dir: w.shellDir, PassEnv: splitList(w.shellPassEnv), EnvAllow: envAllow,
		Limits: skills.ShellLimits{CPU: time.Duration(noLimit(int64(w.shellCPU))), Memory: noLimit(w.shellMemory),
			FileSize: noLimit(w.shellFile), Procs: noLimit(int64(w.shellProcs))},
	}, nil
}

// Toolworker is the toolworker command.
func Toolworker(ctx context.Context, args []string, io IO) int {
	var c common
	var wf workerFlags
	var mf metricsFlags
	f := newFlags("toolworker", io.Stderr, io.Env, toolworkerUsage)
	c.register(f, connects)
	wf.register(f)
	mf.register(f)
	if err := f.parse(args); err != nil {
		return usageErr(io.Stderr, err)
	}
	if err := mf.check("toolworker"); err != nil {
		return usageErr(io.Stderr, err)
	}
	log, err := c.logger(io.Stderr)
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	cfg, err := wf.config()
	if err != nil {
		return usageErr(io.Stderr, err)
	}
	if c.bus.URL == "" {
		return usageErr(io.Stderr, fmt.Errorf("toolworker: --nats-url (or $NATS_URL) is required; `planner serve` runs workers on an embedded server"))
	}
	reg := metrics.New()
	ms, err := mf.start(reg, log)
	if err != nil {
		return usageErr(io.Stderr, fmt.Errorf("toolworker: %w", err))
	}
	defer ms.Stop()
	return serveComponent(ctx, &c, log, io.Stderr, "toolworker", bus.RoleWorker, func(conn *bus.Conn) (runner, error) {
		reg.SetConn(conn.NC)
		w, err := worker.New(conn.NC, cfg, worker.WithLogger(logbridge.Slog(log)), worker.WithMiddleware(reg.Worker().Middleware()))
		if err != nil {
			return nil, err
		}
		return w.Run, nil
	})
}

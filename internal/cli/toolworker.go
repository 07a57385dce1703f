package cli

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/planbus/planbus/internal/llm"
	"github.com/planbus/planbus/internal/mcpskills"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// WorkerFlags are a tool worker's flags: the toolworker command's, and
// planner serve's for the workers of its node.
type WorkerFlags struct {
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
	// LLM is the model of the llm skill, served when its URL is set
	// (RegisterLLM; planner serve passes its planner's).
	LLM    llm.Endpoint
	llmKey func() string
	// mcp are the --mcp values (RegisterMCP); env reads the tokens of
	// MCP servers on HTTP.
	mcp []string
	env func(string) string
	// builtinsChosen: --skills (or $PLANBUS_SKILLS) was given, so an
	// --mcp worker serves the built-ins it names besides.
	builtinsChosen func() bool
}

// MCPTokenEnvPrefix begins the variable that holds the bearer token of
// an MCP server on HTTP (--mcp NAME=https://…): PLANBUS_MCP_TOKEN_NAME,
// the name in capitals with '-' as '_'.
const MCPTokenEnvPrefix = "PLANBUS_MCP_TOKEN_"

// RegisterMCP adds --mcp to f: the toolworker command's.
func (w *WorkerFlags) RegisterMCP(f *Flags) {
	f.Strings(&w.mcp, "mcp", "serve the tools of an MCP server as skills NAME.TOOL: NAME=COMMAND [ARGS] (a process on stdio, restarted if it dies; the command split at spaces) or NAME=https://HOST/PATH (streamable HTTP; a bearer token from $"+MCPTokenEnvPrefix+"NAME); repeat for more servers. With --mcp, built-in skills are served only when --skills names them")
	w.env = f.Env
	w.builtinsChosen = func() bool { return f.Given("skills") || f.Env("PLANBUS_SKILLS") != "" }
}

// MCPServers are the servers --mcp names. Its errors name the flag.
func (w *WorkerFlags) MCPServers() ([]mcpskills.Spec, error) {
	var specs []mcpskills.Spec
	for _, v := range w.mcp {
		spec, err := mcpskills.ParseSpec(v)
		if err != nil {
			return nil, fmt.Errorf("--mcp %w", err)
		}
		if slices.ContainsFunc(specs, func(s mcpskills.Spec) bool { return s.Name == spec.Name }) {
			return nil, fmt.Errorf("--mcp: the name %q is given twice", spec.Name)
		}
		if spec.URL != "" && w.env != nil {
			spec.Token = w.env(MCPTokenEnvPrefix + strings.ToUpper(strings.ReplaceAll(spec.Name, "-", "_")))
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// LLMKeyEnv holds the API key of --llm-url, for the planner and the llm
// skill: never a flag, which other users of the machine could read.
const LLMKeyEnv = "PLANBUS_LLM_API_KEY"

// RegisterLLM adds the llm skill's flags to f: the toolworker command's
// (planner serve's workers take the planner's --llm-url).
func (w *WorkerFlags) RegisterLLM(f *Flags) {
	f.String(&w.LLM.URL, "llm-url", "PLANBUS_LLM_URL", "", "serve the llm skill (one chat completion a call) with the model at this OpenAI-compatible base URL, such as http://127.0.0.1:11434/v1; the key from $"+LLMKeyEnv)
	f.String(&w.LLM.Model, "llm-model", "PLANBUS_LLM_MODEL", "", "with --llm-url: the model a call that names none asks")
	w.llmKey = func() string { return f.Env(LLMKeyEnv) }
}

// Register adds the flags to f.
func (w *WorkerFlags) Register(f *Flags) {
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

// Config is the worker configuration the flags give: the built-in skills
// chosen, simulated ones in their stead or beside them, and the shell
// skill's allow-lists and limits. Its errors name the flag.
func (w *WorkerFlags) Config() (worker.Config, error) {
	shell, err := w.shellConfig()
	if err != nil {
		return worker.Config{}, err
	}
	all := skills.Builtins(skills.BuiltinConfig{
		Shell: shell,
		HTTP:  skills.HTTPConfig{AllowHosts: SplitList(w.httpAllow), AllowPrivate: w.httpPrivate, OutputCap: outputCap},
	})
	var chosen []skill.Skill
	var names []string
	for _, s := range all {
		names = append(names, s.Manifest.Name)
	}
	builtins := SplitList(w.skills)
	if len(w.mcp) > 0 && w.builtinsChosen != nil && !w.builtinsChosen() {
		builtins = nil // an MCP worker serves its servers' tools alone
	}
	for _, name := range builtins {
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
	if w.LLM.URL != "" {
		if u, err := url.Parse(w.LLM.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return worker.Config{}, fmt.Errorf("--llm-url %q: want an http or https URL, such as http://127.0.0.1:11434/v1", w.LLM.URL)
		}
		ep := w.LLM
		if ep.APIKey == "" && w.llmKey != nil {
			ep.APIKey = w.llmKey()
		}
		if !slices.ContainsFunc(chosen, func(s skill.Skill) bool { return s.Manifest.Name == "llm" }) {
			chosen = append(chosen, skills.LLM(ep))
		}
	}
	if len(chosen) == 0 && len(w.mcp) == 0 {
		return worker.Config{}, fmt.Errorf("--skills: no skills given")
	}
	return worker.Config{ID: w.id, Skills: chosen, Concurrency: w.concurrency, AckWait: w.ackWait,
		DrainTimeout: w.drainTimeout, OutputCap: outputCap, Version: Version()}, nil
}

// shellConfig reads the shell skill's flags; a flag's 0 means no limit.
func (w *WorkerFlags) shellConfig() (skills.ShellConfig, error) {
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
		Allow: allow, Dir: w.shellDir, PassEnv: SplitList(w.shellPassEnv), EnvAllow: envAllow,
		Limits: skills.ShellLimits{CPU: time.Duration(noLimit(int64(w.shellCPU))), Memory: noLimit(w.shellMemory),
			FileSize: noLimit(w.shellFile), Procs: noLimit(int64(w.shellProcs))},
	}, nil
}

package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/rlimit"
	"github.com/planbus/planbus/skill"
)

// ShellConfig configures the shell skill.
type ShellConfig struct {
	// Allow lists the programs the skill may run, one rule per element:
	// a bare name looked up in the worker's PATH ("git") or an absolute
	// path ("/usr/bin/git"), allowed with any arguments but the dangerous
	// ones, or such a name with the subcommands it is limited to
	// ("git=status,diff,log": the first argument must be one of them).
	// ParseShellAllow reads the --shell-allow flag into this form. Empty
	// refuses every call.
	Allow []string
	// Dir is the directory commands run in, and the root that a call's
	// relative "dir", and every path in its arguments, must stay inside.
	// Default: the worker's working directory when Shell is called.
	Dir string
	// OutputCap caps captured stdout and stderr, each, in bytes. Default
	// 64 KiB.
	OutputCap int
	// PassEnv names worker environment variables programs also see, such
	// as HOME, which many programs need for their caches and settings.
	PassEnv []string
	// EnvAllow names the variables a call's "env" may set: a name, a
	// prefix ending in '*' ("MYAPP_*"), or "*" for any. Empty: a call may
	// set none. Whatever it says, a call may not set variables that load
	// code into a program or make it run commands (PATH, LD_*, GIT_*,
	// BASH_ENV, HOME...; see envDangers).
	EnvAllow []string
	// Limits are the resource limits every program runs under.
	Limits ShellLimits
}

// DefaultOutputCap is ShellConfig.OutputCap's default.
const DefaultOutputCap = 64 << 10

// shellWaitDelay is how long Wait keeps reading a program's output after it
// exits or is killed, for descendants that escaped its process group and
// still hold the pipes.
const shellWaitDelay = time.Second

const shellInputSchema = `{
	"type": "object",
	"required": ["argv"],
	"properties": {
		"argv": {"type": "array", "minItems": 1, "items": {"type": "string"},
			"description": "The program and its arguments, passed to it as they are: no shell is involved."},
		"dir": {"type": "string", "description": "A directory relative to the worker's shell root to run in."},
		"env": {"type": "object", "additionalProperties": {"type": "string"},
			"description": "Environment variables; the program sees these, the worker's PATH and the variables the worker passes on (--shell-pass-env), nothing else."},
		"stdin": {"type": "string", "description": "Text for the program's standard input."}
	},
	"additionalProperties": false
}`

// Shell runs one allowed program per call, directly with os/exec and never
// through a shell, so argv reaches the program exactly as given.
//
// Input: {"argv": ["prog", "arg", ...], "dir": "sub/dir", "env": {"K": "V"},
// "stdin": "text"}; only argv is required. argv[0] must be on cfg.Allow,
// either as the same string or as a path to the same file: "ls" allowed
// admits "/usr/bin/ls" if that is where PATH finds ls, and "/usr/bin/ls"
// allowed admits "ls". A path's last element is compared by name, not by
// following symlinks, since multi-call binaries act on the name they are
// run by. argv[0] may not be a relative path with a separator in it.
//
// The arguments must keep to the program's rule: its subcommands, if the
// rule lists them, as the first argument; none of the options that make
// git, find, tar or rsync run other commands or work elsewhere (git -c,
// --config-env, -C, --exec-path, --upload-pack, config, find -exec, tar
// --to-command...; see shellargs.go); and no argument, nor the value after
// an '=' or a short option in one, may be an absolute path (but /dev/null
// and a few other devices) or a relative one that leads outside cfg.Dir,
// lexically or through a symlink that exists when the call starts.
//
// The program runs in cfg.Dir, or in the call's "dir" below it; that dir
// must be relative and, symlinks resolved, stay inside cfg.Dir. Its
// environment is the worker's PATH, the worker variables named in
// PassEnv, and the call's "env", nothing else: the worker's other
// variables (credentials among them) do not leak to it. The call may set
// only the variables cfg.EnvAllow names, and never those that load code
// or run commands.
//
// The program runs under cfg.Limits (CPU time, memory, file size,
// processes; see ShellLimits), set before its first instruction by the
// worker's own binary started as a helper, and without core dumps. On
// unix it leads a process group of its own. When ctx ends the whole group
// is killed, and when the program exits anything it left running in the
// group is killed too: a call's processes do not outlive it, unless they
// leave the group, and then the limits still bound them.
//
// Output: {"exitCode": 0, "stdout": "...", "stderr": "...",
// "truncated": bool, "durationMs": N}; stdout and stderr keep at most
// cfg.OutputCap bytes each, and truncated says whether either lost some.
//
// Errors: an unusable input, a program, argument or variable that is not
// allowed, a program not found, and a bad dir are invalid input, naming
// what was refused and the flag that would allow it, if any. A non-zero
// exit is an *Error with code EXIT_NONZERO, category internal (retried),
// and the output above. A program killed at its CPU or file size limit is
// an *Error with code SHELL_CPU_LIMIT or SHELL_FILE_SIZE_LIMIT, category
// permanent, and the output. When ctx ends first, Shell returns
// ctx.Err().
//
// The handler keeps no state between calls and is safe for concurrent use.
func Shell(cfg ShellConfig) skill.Skill {
	s := &shell{root: cfg.Dir, outputCap: cfg.OutputCap, passEnv: cfg.PassEnv, envAllow: cfg.EnvAllow,
		limits: cfg.Limits.withDefaults()}
	for _, entry := range cfg.Allow {
		r, err := parseProgramRule(entry)
		if err != nil {
			s.configErr = err
			break
		}
		s.rules = append(s.rules, r)
	}
	for _, p := range cfg.EnvAllow {
		if err := validEnvPattern(p); err != nil {
			s.configErr = err
		}
	}
	if s.outputCap <= 0 {
		s.outputCap = DefaultOutputCap
	}
	if s.root == "" {
		s.root, s.rootErr = os.Getwd()
	} else {
		s.root, s.rootErr = filepath.Abs(s.root)
	}
	return skill.Skill{
		Manifest: skill.Manifest{
			Name:        "shell",
			Description: "Runs an allowed program with arguments, without a shell, and returns its exit code and output.",
			Version:     "1",
			Parameters:  []string{"argv"},
			InputSchema: json.RawMessage(shellInputSchema),
		},
		Handler: skill.HandlerFunc(s.handle),
	}
}

type shell struct {
	rules     []programRule
	configErr error
	root      string
	rootErr   error
	outputCap int
	passEnv   []string
	envAllow  []string
	limits    ShellLimits
}

type shellInput struct {
	Argv  []string          `json:"argv"`
	Dir   string            `json:"dir"`
	Env   map[string]string `json:"env"`
	Stdin string            `json:"stdin"`
}

type shellOutput struct {
	ExitCode   int    `json:"exitCode"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMs int64  `json:"durationMs"`
}

func (s *shell) handle(ctx context.Context, call *skill.Call) (skill.Result, error) {
	var in shellInput
	if err := skill.DecodeInput(call, &in); err != nil {
		return skill.Result{}, err
	}
	if err := in.validate(); err != nil {
		return skill.Result{}, err
	}
	if s.configErr != nil {
		return skill.Result{}, skill.Failf(planbus.CodeToolFailed, planbus.CategoryInternal, "shell: the worker's configuration: %v", s.configErr)
	}
	if len(s.rules) == 0 {
		return skill.Result{}, skill.InvalidInput("shell: no program is allowed on this worker; start it with --shell-allow naming the programs calls may run")
	}
	if err := s.checkEnv(in.Env); err != nil {
		return skill.Result{}, err
	}
	path, rule, err := s.program(in.Argv[0])
	if err != nil {
		return skill.Result{}, err
	}
	root, dir, err := s.workDir(in.Dir)
	if err != nil {
		return skill.Result{}, err
	}
	if err := s.checkArgs(rule, in.Argv[0], filepath.Base(path), in.Argv[1:], root, dir); err != nil {
		return skill.Result{}, err
	}
	return s.run(ctx, path, dir, in)
}

func (in *shellInput) validate() error {
	if len(in.Argv) == 0 || in.Argv[0] == "" {
		return skill.InvalidInput("shell: argv must name a program, as in {\"argv\": [\"ls\", \"-l\"]}")
	}
	for i, a := range in.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return skill.InvalidInput("shell: argv[%d] contains a NUL byte", i)
		}
	}
	if strings.IndexByte(in.Dir, 0) >= 0 {
		return skill.InvalidInput("shell: dir contains a NUL byte")
	}
	return nil
}

// program returns the absolute path to run for argv[0] and the rule that
// allows it, or an invalid-input error if none does or it cannot be found.
func (s *shell) program(name string) (string, programRule, error) {
	if !filepath.IsAbs(name) && strings.ContainsRune(name, filepath.Separator) {
		return "", programRule{}, skill.InvalidInput("shell: program %q: give a bare name to look up in PATH or an absolute path", name)
	}
	path, lookErr := exec.LookPath(name)
	if lookErr == nil && !filepath.IsAbs(path) {
		// LookPath only returns a relative path when PATH holds one, and
		// that would resolve against the worker's directory, not dir.
		lookErr = fmt.Errorf("found only relative to the worker's directory, as %s", path)
	}
	i := slices.IndexFunc(s.rules, func(r programRule) bool {
		if r.name == name {
			return true
		}
		if lookErr != nil {
			return false
		}
		ap, err := exec.LookPath(r.name)
		return err == nil && filepath.IsAbs(ap) && sameProgram(ap, path)
	})
	if i < 0 {
		names := make([]string, len(s.rules))
		for i, r := range s.rules {
			names[i] = r.String()
		}
		return "", programRule{}, skill.InvalidInput("shell: program %q is not allowed (allowed: %s); add it to the worker's --shell-allow",
			name, strings.Join(names, " "))
	}
	if lookErr != nil {
		return "", programRule{}, skill.InvalidInput("shell: program %q cannot be run: %v", name, lookErr)
	}
	return path, s.rules[i], nil
}

// sameProgram reports whether absolute paths a and b name the same
// directory entry: the same directory, symlinks resolved, and the same
// last element. The last element is not resolved, because a multi-call
// binary such as busybox decides what to do from the name it runs as.
func sameProgram(a, b string) bool {
	if a == b {
		return true
	}
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, err := filepath.EvalSymlinks(filepath.Dir(a))
	if err != nil {
		return false
	}
	db, err := filepath.EvalSymlinks(filepath.Dir(b))
	return err == nil && da == db
}

// workDir resolves the root and the call's dir below it, symlinks
// included, and refuses a dir that ends up outside the root.
func (s *shell) workDir(dir string) (root, real string, err error) {
	if s.rootErr != nil {
		return "", "", skill.Failf(planbus.CodeToolFailed, planbus.CategoryInternal, "shell: working directory: %v", s.rootErr)
	}
	if root, err = filepath.EvalSymlinks(s.root); err != nil {
		return "", "", skill.Failf(planbus.CodeToolFailed, planbus.CategoryInternal, "shell: working directory: %v", err)
	}
	real, err = subDir(root, dir)
	return root, real, err
}

func subDir(root, dir string) (string, error) {
	if dir == "" {
		return root, nil
	}
	if !filepath.IsLocal(dir) {
		return "", skill.InvalidInput("shell: dir %q must be a relative path that stays inside the worker's shell directory", dir)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return "", skill.InvalidInput("shell: dir %q does not exist", dir)
	}
	if err != nil {
		return "", skill.InvalidInput("shell: dir %q: %v", dir, err)
	}
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return "", skill.InvalidInput("shell: dir %q leads outside the worker's shell directory through a symlink", dir)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", skill.InvalidInput("shell: dir %q is not a directory", dir)
	}
	return real, nil
}

// shellEnv is the worker's PATH, the worker variables pass names, and the
// call's variables.
func shellEnv(pass []string, vars map[string]string) []string {
	env := make([]string, 0, len(vars)+len(pass)+1)
	if p, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+p)
	}
	for _, k := range pass {
		if _, set := vars[k]; set || k == "PATH" {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

func (s *shell) run(ctx context.Context, path, dir string, in shellInput) (skill.Result, error) {
	cmd := exec.CommandContext(ctx, path, in.Argv[1:]...)
	cmd.Args[0] = in.Argv[0]
	cmd.Dir = dir
	cmd.Env = shellEnv(s.passEnv, in.Env)
	if in.Stdin != "" {
		cmd.Stdin = strings.NewReader(in.Stdin)
	}
	stdout, stderr := &capWriter{max: s.outputCap}, &capWriter{max: s.outputCap}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = shellWaitDelay
	setProcessGroup(cmd)
	status, err := rlimit.Command(cmd, s.limits.rlimits())
	if err != nil {
		return skill.Result{}, skill.Failf(planbus.CodeToolFailed, planbus.CategoryInternal,
			"shell: %v; start the worker with --shell-max-cpu 0 --shell-max-memory 0 --shell-max-file-size 0 --shell-max-procs 0 to run programs without limits", err)
	}

	start := time.Now()
	err = cmd.Start()
	// Wait for the helper to exec the program, or to say why it could not.
	if serr := status.Started(); serr != nil && err == nil {
		_ = cmd.Wait()
		err = serr
	}
	if err != nil {
		if ctx.Err() != nil {
			return skill.Result{}, ctx.Err()
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			return skill.Result{}, skill.InvalidInput("shell: program %q cannot be run: %v", in.Argv[0], err)
		}
		return skill.Result{}, skill.Failf(planbus.CodeToolFailed, planbus.CategoryInternal, "shell: starting %q: %v", in.Argv[0], err)
	}
	err = cmd.Wait()
	killProcessGroup(cmd)
	if err != nil && ctx.Err() != nil {
		return skill.Result{}, ctx.Err()
	}

	out := shellOutput{
		Stdout:     string(stdout.buf),
		Stderr:     string(stderr.buf),
		Truncated:  stdout.truncated || stderr.truncated,
		DurationMs: time.Since(start).Milliseconds(),
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: the program succeeded but left something holding
		// its output open, which killProcessGroup has dealt with.
		b, err := json.Marshal(out)
		return skill.Result{Output: b}, err
	case errors.As(err, &exitErr):
		out.ExitCode = exitErr.ExitCode()
		b, merr := json.Marshal(out)
		if merr != nil {
			return skill.Result{}, merr
		}
		how := fmt.Sprintf("exited with code %d", out.ExitCode)
		if out.ExitCode < 0 {
			how = "ended by " + exitErr.String()
		}
		if code, what := limitKill(cmd.ProcessState, s.limits); code != "" {
			return skill.Result{}, &skill.Error{Code: code, Category: planbus.CategoryPermanent, Output: b,
				Message: fmt.Sprintf("shell: %s was killed (%s): %s", in.Argv[0], exitErr, what)}
		}
		msg := fmt.Sprintf("shell: %s %s", in.Argv[0], how)
		if line := firstLine(stderr.buf, 200); line != "" {
			msg += ": " + line
		}
		return skill.Result{}, &skill.Error{Code: planbus.CodeExitNonzero, Category: planbus.CategoryInternal, Message: msg, Output: b}
	default:
		return skill.Result{}, skill.Failf(planbus.CodeToolFailed, planbus.CategoryInternal, "shell: running %q: %v", in.Argv[0], err)
	}
}

package skills

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/planbus/planbus/skill"
)

// checkArgs refuses arguments that would let a call escape the program
// rule: a subcommand not on the rule's list, options that make a known
// program run other commands, and paths outside the shell directory. name
// is how the call named the program; base is the program's file name,
// which picks its option rules.
func (s *shell) checkArgs(rule programRule, name, base string, args []string, root, dir string) error {
	if rule.subcommands != nil {
		if len(args) == 0 {
			return skill.InvalidInput("shell: %s may only run the subcommands %s, and none was given; the worker's --shell-allow limits it",
				name, strings.Join(rule.subcommands, ", "))
		}
		if !slices.Contains(rule.subcommands, args[0]) {
			return skill.InvalidInput("shell: %s subcommand %q is not allowed (allowed: %s); the worker's --shell-allow limits it",
				name, clip(args[0]), strings.Join(rule.subcommands, ", "))
		}
	}
	if check := programChecks[base]; check != nil {
		if err := check(name, rule, args); err != nil {
			return err
		}
	}
	for i, a := range args {
		if err := checkPathArg(a, root, dir); err != nil {
			return skill.InvalidInput("shell: argv[%d] %q: %v", i+1, clip(a), err)
		}
	}
	return nil
}

// clip shortens an argument quoted in an error, so that a huge one does
// not make a huge message.
func clip(a string) string {
	const limit = 200
	if len(a) <= limit {
		return a
	}
	return strings.ToValidUTF8(a[:limit], "") + "..."
}

// devices are absolute paths any program may be given: they neither hold
// nor reveal anything.
var devices = []string{"/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/random", "/dev/urandom"}

// pathCandidates returns the parts of an argument that may be paths: the
// argument itself, whatever follows each '=' ("--output=x", "of=x"), and
// the value of a short option written together with it ("-o/x").
func pathCandidates(a string) []string {
	c := []string{a}
	for i := 0; i < len(a); i++ {
		if a[i] == '=' {
			c = append(c, a[i+1:])
		}
	}
	if len(a) > 2 && a[0] == '-' && a[1] != '-' {
		c = append(c, a[2:])
	}
	return c
}

// checkPathArg refuses an argument that names, or holds, an absolute path
// (other than a device) or a relative path that leads outside root from
// dir, lexically or through a symlink that exists now.
func checkPathArg(a, root, dir string) error {
	for _, p := range pathCandidates(a) {
		if p == "" {
			continue
		}
		if strings.HasPrefix(p, "~") {
			return errors.New("paths from a home directory are refused: name files relative to the shell directory")
		}
		if filepath.IsAbs(p) {
			if slices.Contains(devices, p) {
				continue
			}
			return errors.New("absolute paths are refused: name files relative to the shell directory")
		}
		full := filepath.Join(dir, p)
		if rel, err := filepath.Rel(root, full); err != nil || !filepath.IsLocal(rel) && rel != "." {
			return errors.New("the path leads outside the shell directory")
		}
		if !resolvesInside(root, full) {
			return errors.New("the path leads outside the shell directory through a symlink")
		}
	}
	return nil
}

// resolvesInside reports whether the longest existing prefix of path,
// symlinks resolved, is inside root (itself resolved).
func resolvesInside(root, path string) bool {
	for p := path; ; p = filepath.Dir(p) {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			rel, err := filepath.Rel(root, real)
			return err == nil && (rel == "." || filepath.IsLocal(rel))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			if _, lerr := os.Lstat(p); lerr == nil {
				return false // exists but cannot be resolved (a symlink loop): refuse
			}
		}
		if p == root || len(p) <= len(root) {
			return true
		}
	}
}

// programChecks holds the option rules of programs that can be made to run
// other commands through their arguments, by file name.
var programChecks = map[string]func(name string, rule programRule, args []string) error{
	"git":   checkGit,
	"find":  checkFind,
	"tar":   checkTar,
	"rsync": checkRsync,
}

// optionDanger says why an option is refused.
type optionDanger struct {
	long  []string // long option names without "--"; a prefix of one counts, as getopt accepts abbreviations
	short string   // short option letters, refused wherever they appear in a cluster
	why   string
	// options are harmless options of their own whose names are prefixes
	// of long ones: an exact name wins over an abbreviation.
	options []string
}

// matchOption returns the danger an argument matches, if any. Arguments
// after "--" are not options.
func matchOption(arg string, dangers []optionDanger) (optionDanger, bool) {
	switch {
	case strings.HasPrefix(arg, "--") && len(arg) > 2:
		name, _, _ := strings.Cut(arg[2:], "=")
		for _, d := range dangers {
			if slices.Contains(d.options, name) {
				continue
			}
			for _, l := range d.long {
				if strings.HasPrefix(l, name) {
					return d, true
				}
			}
		}
	case strings.HasPrefix(arg, "-") && len(arg) > 1 && arg != "--":
		for _, d := range dangers {
			if d.short != "" && strings.ContainsAny(arg[1:], d.short) {
				return d, true
			}
		}
	}
	return optionDanger{}, false
}

func checkOptions(name string, args []string, dangers []optionDanger) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if d, ok := matchOption(a, dangers); ok {
			return skill.InvalidInput("shell: %s option %q is refused: %s", name, clip(a), d.why)
		}
	}
	return nil
}

// gitGlobalSafe are the options allowed before git's subcommand; all
// others (-c, --config-env, -C, --git-dir, --work-tree, --exec-path...)
// are refused there.
var gitGlobalSafe = []string{"--no-pager", "-P", "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
	"--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--no-advice", "--bare", "--version", "--help", "-h"}

var gitGlobalWhy = map[string]string{
	"-c":             "it sets configuration, and configuration such as core.fsmonitor, core.sshCommand or an alias runs commands",
	"--config-env":   "it sets configuration, and configuration such as core.fsmonitor, core.sshCommand or an alias runs commands",
	"--exec-path":    "it makes git run its helper programs from another directory",
	"-C":             "it points git at another directory",
	"--git-dir":      "it points git at another repository",
	"--work-tree":    "it points git at another directory",
	"--namespace":    "it changes which references git sees",
	"-p":             "it runs a pager",
	"--paginate":     "it runs a pager",
	"--super-prefix": "it is internal to git",
	"--attr-source":  "it points git at other attributes",
}

// gitDangerousSubcommands run programs or write configuration that does;
// plain "git" on --shell-allow refuses them, "git=config" opens one by
// naming it.
var gitDangerousSubcommands = map[string]string{
	"config":            "it writes configuration, and configuration such as core.fsmonitor or an alias runs commands",
	"difftool":          "it runs external diff tools",
	"mergetool":         "it runs external merge tools",
	"filter-branch":     "it runs shell code from its arguments",
	"instaweb":          "it starts a web server and a browser",
	"web--browse":       "it runs a browser",
	"daemon":            "it serves repositories to the network",
	"send-email":        "it sends mail",
	"credential":        "it reveals stored credentials",
	"credential-store":  "it reveals stored credentials",
	"credential-cache":  "it reveals stored credentials",
	"fsmonitor--daemon": "it runs a file system monitor",
	"hook":              "it runs hooks",
	"upload-pack":       "it runs hooks and serves the repository",
	"receive-pack":      "it runs hooks",
	"upload-archive":    "it serves the repository",
	"shell":             "it runs commands",
	"remote-ext":        "it runs commands",
	"remote-fd":         "it talks over arbitrary descriptors",
	"archimport":        "it runs external tools",
	"cvsimport":         "it runs external tools",
	"cvsserver":         "it runs external tools",
	"cvsexportcommit":   "it runs external tools",
	"svn":               "it runs external tools",
	"p4":                "it runs external tools",
	"quiltimport":       "it runs external tools",
}

// gitOptionDangers are refused after any subcommand.
var gitOptionDangers = []optionDanger{
	{long: []string{"upload-pack", "receive-pack", "exec", "exec-path"}, why: "it names a command for git to run"},
	{long: []string{"config", "config-env"}, why: "it sets configuration, and configuration such as core.fsmonitor or core.sshCommand runs commands"},
	{long: []string{"template"}, why: "it copies hooks from another directory"},
	{long: []string{"open-files-in-pager"}, why: "it names a command for git to run"},
	{long: []string{"extcmd", "tool"}, why: "it names a command for git to run"},
}

// gitShortDangers are short options that run commands, by subcommand.
var gitShortDangers = map[string]optionDanger{
	"clone":     {short: "uc", why: "-u names a command for git to run and -c sets configuration that can"},
	"ls-remote": {short: "u", why: "-u names a command for git to run"},
	"grep":      {short: "O", why: "-O names a command for git to run"},
	"rebase":    {short: "x", why: "-x names a command for git to run"},
}

// checkGit refuses the options and subcommands that let git run other
// commands or work outside the shell directory.
func checkGit(name string, rule programRule, args []string) error {
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a := args[i]
		if slices.Contains(gitGlobalSafe, a) {
			continue
		}
		opt, _, _ := strings.Cut(a, "=")
		why := gitGlobalWhy[opt]
		if why == "" && len(opt) > 2 && opt[1] != '-' {
			why = gitGlobalWhy[opt[:2]] // -cname=value, -C/dir
		}
		if why == "" {
			why = "only " + strings.Join(gitGlobalSafe, ", ") + " are allowed before the subcommand"
		}
		return skill.InvalidInput("shell: %s option %q before the subcommand is refused: %s", name, clip(a), why)
	}
	if i == len(args) {
		return nil
	}
	sub, rest := args[i], args[i+1:]
	if why, bad := gitDangerousSubcommands[sub]; bad && !slices.Contains(rule.subcommands, sub) {
		return skill.InvalidInput("shell: %s %s is refused: %s; name it in the worker's --shell-allow (as in %s=%s) to allow it",
			name, sub, why, rule.name, sub)
	}
	switch {
	case sub == "bisect" && slices.Contains(rest, "run"):
		return skill.InvalidInput("shell: %s bisect run is refused: it runs the command it is given", name)
	case sub == "submodule" && slices.Contains(rest, "foreach"):
		return skill.InvalidInput("shell: %s submodule foreach is refused: it runs the command it is given", name)
	}
	dangers := gitOptionDangers
	if d, ok := gitShortDangers[sub]; ok {
		dangers = append(slices.Clip(dangers), d)
	}
	return checkOptions(name+" "+sub, rest, dangers)
}

func checkFind(name string, _ programRule, args []string) error {
	for _, a := range args {
		switch a {
		case "-exec", "-execdir", "-ok", "-okdir":
			return skill.InvalidInput("shell: %s option %q is refused: it runs commands", name, clip(a))
		}
	}
	return nil
}

var tarDangers = []optionDanger{
	{long: []string{"to-command", "checkpoint-action", "use-compress-program", "info-script", "new-volume-script",
		"rsh-command", "rmt-command"}, short: "IF", why: "it names a command for tar to run", options: []string{"checkpoint"}},
	{long: []string{"absolute-names"}, short: "P", why: "it lets tar write outside the shell directory"},
}

func checkTar(name string, _ programRule, args []string) error {
	// In the old style the first argument is a cluster of letters without
	// a dash: "xIf".
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if d, ok := matchOption("-"+args[0], tarDangers); ok {
			return skill.InvalidInput("shell: %s option %q is refused: %s", name, clip(args[0]), d.why)
		}
	}
	return checkOptions(name, args, tarDangers)
}

var rsyncDangers = []optionDanger{
	{long: []string{"rsh", "rsync-path"}, short: "e", why: "it names a command for rsync to run"},
}

func checkRsync(name string, _ programRule, args []string) error {
	return checkOptions(name, args, rsyncDangers)
}

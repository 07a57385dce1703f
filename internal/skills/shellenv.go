package skills

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/planbus/planbus/internal/rlimit"
	"github.com/planbus/planbus/skill"
)

// envDanger is a group of environment variables that let whoever sets
// them run code in, or redirect, an allowed program. A call may never set
// them, whatever ShellConfig.EnvAllow says; the worker's own variables
// passed with PassEnv are the operator's choice and are not checked.
type envDanger struct {
	why      string
	names    []string // exact, compared in upper case
	prefixes []string // upper case
	except   []string // names under a prefix that are harmless
}

var envDangers = []envDanger{
	{why: "programs are looked up in the worker's PATH", names: []string{"PATH"}},
	{why: "the worker uses it to start programs with their limits", names: []string{rlimit.Env}},
	{why: "the dynamic loader loads code named by it", prefixes: []string{"LD_", "DYLD_"}},
	{why: "the C library loads code or files named by it",
		names: []string{"GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "GLIBC_TUNABLES", "MALLOC_TRACE"}},
	{why: "shells run code from it",
		names:    []string{"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "ZDOTDIR", "SHELL"},
		prefixes: []string{"BASH_FUNC_"}},
	{why: "git runs commands or reads configuration and repositories named by it (GIT_CONFIG_*, GIT_SSH_COMMAND, GIT_EXEC_PATH, GIT_DIR...)",
		prefixes: []string{"GIT_"},
		except: []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
			"GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_MERGE_AUTOEDIT"}},
	{why: "programs read their configuration from it, and configuration can run commands (git's core.fsmonitor, aliases)",
		names: []string{"HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS", "GNUPGHOME",
			"CURL_HOME", "WGETRC", "NPM_CONFIG_USERCONFIG", "PIP_CONFIG_FILE", "INPUTRC", "SSH_AUTH_SOCK"}},
	{why: "programs run the command it names",
		names: []string{"EDITOR", "VISUAL", "PAGER", "MANPAGER", "MANOPT", "LESSOPEN", "LESSCLOSE", "BROWSER",
			"SSH_ASKPASS", "SUDO_ASKPASS", "TAR_OPTIONS", "RSYNC_RSH", "RSYNC_CONNECT_PROG", "CVS_RSH", "FCEDIT"}},
	{why: "interpreters load or run code named by it",
		names: []string{"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT", "PERL5LIB",
			"PERL5OPT", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS",
			"_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "LUA_INIT", "LUA_PATH", "LUA_CPATH", "PHPRC",
			"PHP_INI_SCAN_DIR", "TCLLIBPATH", "R_PROFILE", "R_PROFILE_USER", "R_ENVIRON", "R_ENVIRON_USER"},
		prefixes: []string{"LUA_INIT_"}},
	{why: "compilers and build tools run programs or fetch code named by it",
		names: []string{"GOFLAGS", "GOENV", "GOTOOLCHAIN", "GOROOT", "GOCACHEPROG", "GOAUTH", "GOPROXY", "GOSUMDB",
			"GONOSUMDB", "GONOSUMCHECK", "GOINSECURE", "GOPRIVATE", "GONOPROXY", "GOVCS", "CC", "CXX", "FC", "AR", "LD",
			"PKG_CONFIG", "MAKEFLAGS", "MFLAGS", "MAKEFILES", "RUSTC_WRAPPER", "RUSTC", "CARGO_HOME", "RUSTFLAGS"},
		prefixes: []string{"CGO_", "CARGO_TARGET_"}},
	{why: "libraries load modules or trust certificates named by it",
		names: []string{"OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "SSL_CERT_FILE", "SSL_CERT_DIR",
			"CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}},
	{why: "it sends the program's traffic through another host",
		names: []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"}},
}

// envRefusal returns why a call may not set the variable name, or "".
func envRefusal(name string) string {
	up := strings.ToUpper(name)
	for _, d := range envDangers {
		if slices.Contains(d.names, up) {
			return d.why
		}
		for _, p := range d.prefixes {
			if strings.HasPrefix(up, p) && !slices.Contains(d.except, up) {
				return d.why
			}
		}
	}
	return ""
}

// envAllowed reports whether pattern admits the variable name: pattern is
// a name, "PREFIX*" or "*".
func envAllowed(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}

// checkEnv refuses a call's variables that are malformed, dangerous or
// not on the allow-list, naming the first such variable.
func (s *shell) checkEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return skill.InvalidInput("shell: env name %q is not valid: it must be non-empty without '=' or NUL", clip(k))
		case strings.IndexByte(v, 0) >= 0:
			return skill.InvalidInput("shell: env %s contains a NUL byte", clip(k))
		}
		if why := envRefusal(k); why != "" {
			return skill.InvalidInput("shell: env may not set %s: %s; no flag allows it", clip(k), why)
		}
		if !envAllowed(s.envAllow, k) {
			allowed := "none"
			if len(s.envAllow) > 0 {
				allowed = strings.Join(s.envAllow, ", ")
			}
			return skill.InvalidInput("shell: env %s is not allowed (allowed: %s); add it to the worker's --shell-env-allow", clip(k), allowed)
		}
	}
	return nil
}

// ParseShellEnvAllow reads the text of --shell-env-allow into
// ShellConfig.EnvAllow: patterns separated by commas, each a variable
// name, a prefix ending in '*', or '*'. Errors name the bad pattern.
func ParseShellEnvAllow(text string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if err := validEnvPattern(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// validEnvPattern checks one ShellConfig.EnvAllow entry.
func validEnvPattern(p string) error {
	name, _ := strings.CutSuffix(p, "*")
	if strings.ContainsAny(name, "=*\x00 \t") || (name == "" && p != "*") {
		return fmt.Errorf("skills: shell env allow-list: %q: want a variable name, a prefix ending in '*', or '*'", p)
	}
	return nil
}

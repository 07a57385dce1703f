package skills

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ParseShellAllow reads the text of --shell-allow into ShellConfig.Allow
// entries.
//
// The text is groups separated by ';' or white space. A group is either
// programs separated by commas ("ls,cat,mkdir"), each allowed with any
// arguments but the dangerous ones, or one program limited to first
// arguments (subcommands) given after '=' and separated by commas
// ("git=status,diff,log"). So "ls,cat git=status,diff" allows ls, cat, and
// git for status and diff only. A program is a bare name looked up in
// PATH or an absolute path; a subcommand is letters, digits, '.', '_' and
// '-', not starting with '-'.
//
// Errors name the group and what is wrong with it.
func ParseShellAllow(text string) ([]string, error) {
	var entries []string
	seen := map[string]bool{}
	for _, group := range strings.FieldsFunc(text, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		var items []string
		if name, _, ok := strings.Cut(group, "="); ok {
			if strings.Contains(name, ",") {
				return nil, fmt.Errorf("skills: shell allow-list: group %q: a program with subcommands must be a group of its own, separated by ';' or a space, as in \"ls,cat;git=status,diff\"", group)
			}
			items = []string{group}
		} else {
			items = strings.Split(group, ",")
		}
		for _, item := range items {
			if item == "" {
				continue // "ls,,cat" or a trailing comma
			}
			r, err := parseProgramRule(item)
			if err != nil {
				return nil, err
			}
			if seen[r.name] {
				return nil, fmt.Errorf("skills: shell allow-list: program %q is listed twice", r.name)
			}
			seen[r.name] = true
			entries = append(entries, item)
		}
	}
	return entries, nil
}

// programRule is one ShellConfig.Allow entry.
type programRule struct {
	name string // as given: a bare name or an absolute path
	// subcommands, when not nil, are the only first arguments allowed.
	subcommands []string
}

// parseProgramRule reads "name" or "name=sub,sub".
func parseProgramRule(entry string) (programRule, error) {
	bad := func(format string, args ...any) (programRule, error) {
		return programRule{}, fmt.Errorf("skills: shell allow-list: %q: %s", entry, fmt.Sprintf(format, args...))
	}
	name, subs, hasSubs := strings.Cut(entry, "=")
	switch {
	case name == "":
		return bad("no program before '='")
	case strings.ContainsAny(name, "\x00=,; \t\r\n"):
		return bad("a program name may not hold NUL, '=', ',', ';' or white space")
	case !filepath.IsAbs(name) && strings.ContainsRune(name, '/'):
		return bad("give a bare name to look up in PATH or an absolute path")
	case filepath.IsAbs(name) && filepath.Clean(name) != name:
		return bad("the path is not clean; write %q", filepath.Clean(name))
	}
	r := programRule{name: name}
	if !hasSubs {
		return r, nil
	}
	r.subcommands = []string{}
	for _, sub := range strings.Split(subs, ",") {
		if !validSubcommand(sub) {
			return bad("subcommand %q: want letters, digits, '.', '_' or '-', not starting with '-'", sub)
		}
		if !slices.Contains(r.subcommands, sub) {
			r.subcommands = append(r.subcommands, sub)
		}
	}
	return r, nil
}

func validSubcommand(s string) bool {
	if s == "" || s[0] == '-' || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// String is the entry as ParseShellAllow would read it.
func (r programRule) String() string {
	if r.subcommands == nil {
		return r.name
	}
	return r.name + "=" + strings.Join(r.subcommands, ",")
}

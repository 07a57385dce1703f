package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgumentRules checks the option rules of each program on their
// own, without running anything: each refusal must name the option and
// why.
func TestArgumentRules(t *testing.T) {
	git := programRule{name: "git"}
	tests := []struct {
		base string
		rule programRule
		args string // split on spaces
		want string // part of the refusal; empty = allowed
	}{
		// git before the subcommand
		{"git", git, "status", ""},
		{"git", git, "--no-pager log --oneline", ""},
		{"git", git, "-P diff", ""},
		{"git", git, "--version", ""},
		{"git", git, "-c core.fsmonitor=touch.x status", `option "-c" before the subcommand is refused: it sets configuration`},
		{"git", git, "-ccore.fsmonitor=x status", `option "-ccore.fsmonitor=x" before the subcommand is refused: it sets configuration`},
		{"git", git, "--config-env=core.fsmonitor=X status", `"--config-env=core.fsmonitor=X" before the subcommand is refused`},
		{"git", git, "--exec-path=. status", "run its helper programs from another directory"},
		{"git", git, "-C .. status", "points git at another directory"},
		{"git", git, "-Csub status", "points git at another directory"},
		{"git", git, "--git-dir=x status", "another repository"},
		{"git", git, "--work-tree=x status", "another directory"},
		{"git", git, "--paginate log", "pager"},
		{"git", git, "--whatever status", "only --no-pager"},
		// git subcommands
		{"git", git, "config core.fsmonitor x", "git config is refused: it writes configuration"},
		{"git", programRule{name: "git", subcommands: []string{"config"}}, "config user.name x", ""},
		{"git", git, "difftool", "git difftool is refused"},
		{"git", git, "filter-branch --tree-filter x", "git filter-branch is refused"},
		{"git", git, "bisect run make", "git bisect run is refused"},
		{"git", git, "bisect start", ""},
		{"git", git, "submodule foreach x", "git submodule foreach is refused"},
		{"git", git, "submodule status", ""},
		// git options after the subcommand
		{"git", git, "ls-remote --upload-pack=x .", `git ls-remote option "--upload-pack=x" is refused: it names a command`},
		{"git", git, "ls-remote --upload-p=x .", `option "--upload-p=x" is refused`}, // an abbreviation git accepts
		{"git", git, "ls-remote -u x .", `option "-u" is refused`},
		{"git", git, "ls-remote -hu x .", `option "-hu" is refused`},
		{"git", git, "clone -u x a b", `option "-u" is refused`},
		{"git", git, "clone -c core.fsmonitor=x a b", `option "-c" is refused`},
		{"git", git, "clone --config core.fsmonitor=x a b", `option "--config" is refused`},
		{"git", git, "clone --template=t a b", `option "--template=t" is refused: it copies hooks`},
		{"git", git, "fetch --upload-pack x origin", `option "--upload-pack" is refused`},
		{"git", git, "fetch -u origin", ""}, // --update-head-ok, harmless
		{"git", git, "push --receive-pack=x origin", `option "--receive-pack=x" is refused`},
		{"git", git, "push --exec=x origin", `option "--exec=x" is refused`},
		{"git", git, "archive --exec=x --remote=r HEAD", `option "--exec=x" is refused`},
		{"git", git, "grep -Ox pattern", `option "-Ox" is refused`},
		{"git", git, "grep --open-files-in-pager=x pattern", "is refused"},
		{"git", git, "rebase -x make main", `option "-x" is refused`},
		{"git", git, "rebase --exec make main", `option "--exec" is refused`},
		{"git", git, "rebase --ex=make main", `option "--ex=make" is refused`},
		{"git", git, "log -c", ""}, // combined diff, not configuration
		{"git", git, "log --oneline -- --exec", ""},
		{"git", git, "diff --exit-code", ""},
		{"git", git, "merge --ff-only origin/main", ""},
		{"git", git, "push --set-upstream origin b", ""},
		{"git", git, "commit --message x", ""},
		// limited subcommands
		{"git", programRule{name: "git", subcommands: []string{"status", "log"}}, "status", ""},
		{"git", programRule{name: "git", subcommands: []string{"status", "log"}}, "push", `subcommand "push" is not allowed (allowed: status, log)`},
		{"git", programRule{name: "git", subcommands: []string{"status", "log"}}, "--no-pager log", `subcommand "--no-pager" is not allowed`},
		{"git", programRule{name: "git", subcommands: []string{"status", "log"}}, "", "none was given"},
		{"git", programRule{name: "git", subcommands: []string{"log"}}, "log --exec=x", `option "--exec=x" is refused`},
		// find, tar, rsync
		{"find", programRule{name: "find"}, ". -name *.go", ""},
		{"find", programRule{name: "find"}, ". -exec rm {} ;", `option "-exec" is refused: it runs commands`},
		{"find", programRule{name: "find"}, ". -execdir x ;", `"-execdir"`},
		{"find", programRule{name: "find"}, ". -okdir x ;", `"-okdir"`},
		{"tar", programRule{name: "tar"}, "-czf a.tgz src", ""},
		{"tar", programRule{name: "tar"}, "czf a.tgz src", ""},
		{"tar", programRule{name: "tar"}, "-xf a.tar --to-command=sh", `option "--to-command=sh" is refused`},
		{"tar", programRule{name: "tar"}, "-xf a.tar --to-c=sh", `option "--to-c=sh" is refused`},
		{"tar", programRule{name: "tar"}, "-cf a.tar --checkpoint=1 --checkpoint-action=exec=sh .", `"--checkpoint-action=exec=sh" is refused`},
		{"tar", programRule{name: "tar"}, "-I sh -xf a.tar", `option "-I" is refused`},
		{"tar", programRule{name: "tar"}, "xIf sh a.tar", `option "xIf" is refused`},
		{"tar", programRule{name: "tar"}, "-xPf a.tar", "write outside the shell directory"},
		{"rsync", programRule{name: "rsync"}, "-av src dst", ""},
		{"rsync", programRule{name: "rsync"}, "-ave sh src dst", `option "-ave" is refused`},
		{"rsync", programRule{name: "rsync"}, "--rsh=sh src dst", "is refused"},
		{"rsync", programRule{name: "rsync"}, "--rsync-path=sh src dst", "is refused"},
		// others keep only the path rule
		{"printf", programRule{name: "printf"}, "-c %s", ""},
	}
	root := t.TempDir()
	s := &shell{}
	for _, tt := range tests {
		t.Run(tt.base+" "+tt.args, func(t *testing.T) {
			err := s.checkArgs(tt.rule, tt.base, tt.base, strings.Fields(tt.args), root, root)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want allowed", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPathArguments(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop", filepath.Join(root, "loop")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg, dir string
		want     string // part of the refusal; empty = allowed
	}{
		{"file", root, ""},
		{"sub/file", root, ""},
		{"sub/../file", root, ""},
		{"../file", sub, ""}, // from sub, still inside
		{"in/new", root, ""},
		{"main..feature", root, ""},
		{"HEAD~1", root, ""},
		{"https://example.com/a/../b", root, ""},
		{"--format=%H/%s", root, ""},
		{"/dev/null", root, ""},
		{"--output=/dev/null", root, ""},
		{"-", root, ""},
		{"/etc/passwd", root, "absolute paths are refused"},
		{"/", root, "absolute paths are refused"},
		{"--output=/tmp/x", root, "absolute paths are refused"},
		{"of=/tmp/x", root, "absolute paths are refused"},
		{"-o/tmp/x", root, "absolute paths are refused"},
		{"a=b=/tmp/x", root, "absolute paths are refused"},
		{"../x", root, "leads outside the shell directory"},
		{"sub/../../x", root, "leads outside the shell directory"},
		{"../../x", sub, "leads outside the shell directory"},
		{"--output=../x", root, "leads outside the shell directory"},
		{"-C..", root, "leads outside the shell directory"},
		{"out/x", root, "through a symlink"},
		{"out", root, "through a symlink"},
		{"--file=out/x", root, "through a symlink"},
		{"loop/x", root, "through a symlink"},
		{"~/.ssh/id_rsa", root, "home directory"},
		{"--template=~/t", root, "home directory"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			err := checkPathArg(tt.arg, root, tt.dir)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want allowed", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// FuzzPathArguments checks that whatever checkPathArg allows stays inside
// the root lexically.
func FuzzPathArguments(f *testing.F) {
	for _, seed := range []string{"a", "../a", "a/../../b", "--o=/x", "-o..", "x=y=../z", "/dev/null", "~", "a//b/./../..", "..."} {
		f.Add(seed)
	}
	root := f.TempDir()
	dir := filepath.Join(root, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		if checkPathArg(arg, root, dir) != nil {
			return
		}
		for _, p := range pathCandidates(arg) {
			if filepath.IsAbs(p) {
				if !strings.HasPrefix(p, "/dev/") {
					t.Fatalf("%q: allowed the absolute path %q", arg, p)
				}
				continue
			}
			rel, err := filepath.Rel(root, filepath.Join(dir, p))
			if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
				t.Fatalf("%q: allowed %q, which leads to %q", arg, p, rel)
			}
		}
	})
}

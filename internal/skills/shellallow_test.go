package skills_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/planbus/planbus/internal/skills"
)

func TestParseShellAllow(t *testing.T) {
	tests := []struct {
		text    string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"ls", []string{"ls"}, ""},
		{"mkdir,tee,go", []string{"mkdir", "tee", "go"}, ""},
		{" ls , ,cat, ", []string{"ls", "cat"}, ""}, // groups "ls", ",", ",cat,"; blank items are skipped
		{"git=status,diff,log", []string{"git=status,diff,log"}, ""},
		{"ls,cat git=status,diff", []string{"ls", "cat", "git=status,diff"}, ""},
		{"ls,cat;git=status,diff;/usr/bin/make=test", []string{"ls", "cat", "git=status,diff", "/usr/bin/make=test"}, ""},
		{"git=status,status", []string{"git=status,status"}, ""},
		{"ls,git=status", nil, "must be a group of its own"},
		{"git=", nil, `subcommand ""`},
		{"git=--exec", nil, `subcommand "--exec"`},
		{"git=a/b", nil, `subcommand "a/b"`},
		{"=status", nil, "no program before '='"},
		{"./ls", nil, "give a bare name to look up in PATH or an absolute path"},
		{"bin/ls", nil, "give a bare name"},
		{"/usr/bin/../bin/ls", nil, "the path is not clean"},
		{"ls,ls", nil, `program "ls" is listed twice`},
		{"git;git=status", nil, `program "git" is listed twice`},
		{"git=a=b", nil, `subcommand "a=b"`},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := skills.ParseShellAllow(tt.text)
			if tt.wantErr != "" {
				if tt.want != nil {
					t.Fatal("bad test: both want and wantErr")
				}
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "skills: ") {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseShellAllow checks that ParseShellAllow never panics, that what
// it accepts a shell skill accepts too, and that its entries read back the
// same when joined again.
func FuzzParseShellAllow(f *testing.F) {
	for _, seed := range []string{"ls", "mkdir,tee,go", "git=status,diff,log", "ls;git=status", "a b\tc", "=x", "/bin/ls=x,y",
		"ls,git=x", "git=", ";;", "x=y=z", "\x00", "ls,,", "é=ü"} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		entries, err := skills.ParseShellAllow(text)
		if err != nil {
			return
		}
		again, err := skills.ParseShellAllow(strings.Join(entries, ";"))
		if err != nil || !slices.Equal(entries, again) {
			t.Fatalf("%q: entries %q read back as %q, %v", text, entries, again, err)
		}
		if len(entries) == 0 {
			return
		}
		// A config error would be an internal failure, not invalid input.
		_, err = skills.Shell(skills.ShellConfig{Allow: entries, Dir: dir}).Handler.Handle(t.Context(),
			newCall("shell", `{"argv":["planbus-no-such-program"]}`))
		if err == nil || !strings.Contains(err.Error(), "INVALID_INPUT") {
			t.Fatalf("%q: a call got %v, want invalid input", text, err)
		}
	})
}

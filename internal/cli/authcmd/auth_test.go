package authcmd

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
)

func TestAuthInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	o := runAuth(t, "init", dir)
	if o.code != cli.ExitOK || strings.Count(o.stdout, "created") != len(bus.Roles()) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want every seed created", o.code, o.stdout, o.stderr)
	}
	seeds := map[bus.Role][]byte{}
	for _, r := range bus.Roles() {
		path := filepath.Join(dir, string(r)+".nk")
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", path, err, st.Mode().Perm())
		}
		seeds[r], _ = os.ReadFile(path)
	}
	conf, s := written(t, dir)
	for _, r := range bus.Roles() {
		if !strings.Contains(string(conf), s.PublicKey(r)) {
			t.Errorf("auth.conf lacks %s's key", r)
		}
		if bytes.Contains(conf, bytes.TrimSpace(seeds[r])) {
			t.Errorf("auth.conf holds %s's seed", r)
		}
	}

	other := filepath.Join(t.TempDir(), "nats-auth.conf")
	o = runAuth(t, "init", "--nats-conf", other, dir)
	if o.code != cli.ExitOK || strings.Count(o.stdout, "kept") != len(bus.Roles()) {
		t.Fatalf("again: exit %d, stdout %q; want every seed kept", o.code, o.stdout)
	}
	for _, r := range bus.Roles() {
		if now, _ := os.ReadFile(filepath.Join(dir, string(r)+".nk")); !bytes.Equal(now, seeds[r]) {
			t.Errorf("%s: the seed changed", r)
		}
	}
	if again, _ := os.ReadFile(other); !bytes.Equal(again, conf) {
		t.Error("the same seeds gave another configuration")
	}

	for _, args := range [][]string{{}, {"rotate"}, {"init"}, {"init", "a", "b"}} {
		if o := runAuth(t, args...); o.code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want 2", args, o.code)
		}
	}
}

// written reads what auth init wrote to dir: the configuration and the
// seeds.
func written(t *testing.T, dir string) ([]byte, *bus.Seeds) {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := bus.EnsureSeeds(dir)
	if err != nil {
		t.Fatal(err)
	}
	return conf, s
}

// --worker adds worker groups: a seed each, their skills kept beside it
// (so a later run without --worker keeps them), and a user each in the
// configuration with the worker's grants for those skills alone.
func TestAuthInitWorkerGroups(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	o := runAuth(t, "init", "--worker", "web=http,echo", "--worker", "shell=shell", dir)
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "worker-web.nk  created") || !strings.Contains(o.stdout, "skills http, echo") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	seed, err := os.ReadFile(filepath.Join(dir, "worker-web.nk"))
	if st, _ := os.Stat(filepath.Join(dir, "worker-web.nk")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("worker-web.nk: %v", err)
	}
	if skills, _ := os.ReadFile(filepath.Join(dir, "worker-web.skills")); string(skills) != "http\necho\n" {
		t.Errorf("worker-web.skills = %q", skills)
	}
	conf, s := written(t, dir)
	if g := s.Groups(); len(g) != 2 || g[0].Name != "shell" || g[1].Name != "web" {
		t.Fatalf("groups %+v", g)
	}
	web := s.Groups()[1]
	for _, want := range []string{"# worker group web: skills http, echo", web.PublicKey, `"$KV.planbus-skills.http"`,
		`"$JS.API.CONSUMER.MSG.NEXT.PLANBUS_TOOLS.skill-echo"`, `"planbus.invoke.shell"`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("auth.conf lacks %s", want)
		}
	}
	if bytes.Contains(conf, bytes.TrimSpace(seed)) {
		t.Error("auth.conf holds a group's seed")
	}

	// Again without --worker: the groups stay, with their seeds.
	o = runAuth(t, "init", dir)
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "worker-web.nk  kept") {
		t.Fatalf("again: exit %d, stdout %q", o.code, o.stdout)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "auth.conf")); !bytes.Equal(again, conf) {
		t.Error("the same seeds and groups gave another configuration")
	}
	// Given again, a group's skills are replaced and its seed kept.
	o = runAuth(t, "init", "--worker", "web=echo", dir)
	if now, _ := os.ReadFile(filepath.Join(dir, "worker-web.nk")); o.code != cli.ExitOK || !bytes.Equal(now, seed) {
		t.Fatalf("exit %d, seed changed %v", o.code, !bytes.Equal(now, seed))
	}
	if skills, _ := os.ReadFile(filepath.Join(dir, "worker-web.skills")); string(skills) != "echo\n" {
		t.Errorf("worker-web.skills = %q after --worker web=echo", skills)
	}

	for _, tt := range []struct {
		arg, want string
		code      int
	}{
		{"web", "want NAME=SKILL", cli.ExitUsage},
		{"=echo", "want NAME=SKILL", cli.ExitUsage},
		{"a b=echo", `worker group "a b"`, cli.ExitUsage},
		{"web=echo,no/slash", `skill "no/slash"`, cli.ExitUsage},
		{"web=,", `skill ""`, cli.ExitUsage},
	} {
		bad := filepath.Join(t.TempDir(), "auth")
		o := runAuth(t, "init", "--worker", "fine=echo", "--worker", tt.arg, bad)
		if o.code != tt.code || !strings.Contains(o.stderr, tt.want) {
			t.Errorf("--worker %q: exit %d, stderr %q; want %d naming %s", tt.arg, o.code, o.stderr, tt.code, tt.want)
		}
		if _, err := os.Stat(bad); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("--worker %q: %s was written (%v); a refused run writes nothing", tt.arg, bad, err)
		}
	}
}

// planner auth add-client writes a client's seed and its user, with its
// own endpoints and inbox, to auth.conf; again, it keeps the seed.
func TestAuthAddClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	o := runAuth(t, "add-client", "--dir", dir, "alice")
	if o.code != cli.ExitOK || !strings.Contains(o.stdout, "client-alice.nk  created") || !strings.Contains(o.stdout, "restart 'planner serve --auth'") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	seed, err := os.ReadFile(filepath.Join(dir, "client-alice.nk"))
	if st, _ := os.Stat(filepath.Join(dir, "client-alice.nk")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client-alice.nk: %v", err)
	}
	conf, s := written(t, dir)
	if c := s.Clients(); len(c) != 1 || c[0].Name != "alice" {
		t.Fatalf("clients %+v", c)
	}
	for _, want := range []string{"# client alice", s.Clients()[0].PublicKey, `"planbus.client.alice.>"`, `"_INBOX_client_alice.>"`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("auth.conf lacks %s", want)
		}
	}
	if bytes.Contains(conf, bytes.TrimSpace(seed)) {
		t.Error("auth.conf holds a client's seed")
	}
	o = runAuth(t, "add-client", "--dir", dir, "alice")
	if now, _ := os.ReadFile(filepath.Join(dir, "client-alice.nk")); o.code != cli.ExitOK || !bytes.Equal(now, seed) || !strings.Contains(o.stdout, "kept") {
		t.Fatalf("again: exit %d, seed changed %v, stdout %q", o.code, !bytes.Equal(now, seed), o.stdout)
	}
	for _, bad := range [][]string{{"--dir", dir}, {"--dir", dir, "a b"}, {"--dir", dir, "a.b"}} {
		if o := runAuth(t, append([]string{"add-client"}, bad...)...); o.code != cli.ExitUsage {
			t.Errorf("add-client %q: exit %d (%s), want %d", bad, o.code, o.stderr, cli.ExitUsage)
		}
	}
}

package bus_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/embedded"
)

func TestEnsureSeedsWritesPrivateSeedsOnceAndKeepsThem(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	s, err := bus.EnsureSeeds(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %o, want 700", st.Mode().Perm())
	}
	keys := map[string]bus.Role{}
	before := map[bus.Role][]byte{}
	for _, r := range bus.Roles() {
		path := filepath.Join(dir, string(r)+".nk")
		if s.File(r) != path {
			t.Errorf("%s: file %s, want %s", r, s.File(r), path)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", path, err, st.Mode().Perm())
		}
		before[r], _ = os.ReadFile(path)
		if !nkeys.IsValidPublicUserKey(s.PublicKey(r)) {
			t.Errorf("%s: public key %q is not a user key", r, s.PublicKey(r))
		}
		if other, dup := keys[s.PublicKey(r)]; dup {
			t.Errorf("%s and %s share a key", r, other)
		}
		keys[s.PublicKey(r)] = r
	}
	again, err := bus.EnsureSeeds(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range bus.Roles() {
		now, _ := os.ReadFile(s.File(r))
		if !bytes.Equal(now, before[r]) || again.PublicKey(r) != s.PublicKey(r) {
			t.Errorf("%s: the seed changed on the second call", r)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".seed-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

// Processes starting at once on one directory end up with the same seeds.
func TestEnsureSeedsAgreesUnderConcurrency(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	got := make([]*bus.Seeds, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := bus.EnsureSeeds(dir)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for i := 1; i < n && got[0] != nil && got[i] != nil; i++ {
		for _, r := range bus.Roles() {
			if got[i].PublicKey(r) != got[0].PublicKey(r) {
				t.Errorf("call %d: %s key differs from call 0's", i, r)
			}
		}
	}
}

func TestEnsureSeedsRefusesBadSeedFiles(t *testing.T) {
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
		want    string
	}{
		{"readable by others", userSeed, 0o644, "chmod 600"},
		{"not a seed", []byte("hello"), 0o600, "not an nkey seed"},
		{"an account seed", accountSeed, 0o600, "not a user seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "client.nk")
			if err := os.WriteFile(path, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := bus.EnsureSeeds(dir)
			if !errors.Is(err, bus.ErrSeed) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrSeed naming %s and %q", err, path, tt.want)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, tt.content) {
				t.Error("the bad file was changed")
			}
		})
	}
}

// A directory made by hand for the seeds is closed to others.
func TestEnsureSeedsClosesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureSeeds(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %o, want 700", st.Mode().Perm())
	}
}

// The configuration block for nats-server gives a server configured by
// file exactly the users and permissions of the embedded one.
func TestNATSAuthConfigMatchesTheEmbeddedServer(t *testing.T) {
	s, err := bus.EnsureSeeds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth.conf"), bus.NATSAuthConfig(s), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte("listen: 127.0.0.1:-1\ninclude ./auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server does not take the block: %v\n%s", err, bus.NATSAuthConfig(s))
	}
	inProcess := &server.Options{}
	embedded.Auth(s)(inProcess)
	if diff := cmp.Diff(users(inProcess.Nkeys), users(fromFile.Nkeys)); diff != "" {
		t.Errorf("users differ (-embedded +file):\n%s", diff)
	}
	if len(fromFile.Nkeys) != len(bus.Roles()) {
		t.Errorf("%d users, want one per role", len(fromFile.Nkeys))
	}
}

// A worker that starts before anything is declared waits, saying so,
// until a dispatcher has declared what it needs.
func TestDeclareAsWorkerWaitsForTheStreams(t *testing.T) {
	seeds, err := bus.EnsureSeeds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := bustest.StartBare(t, embedded.Auth(seeds))
	var logs syncBuf
	as := func(r bus.Role) bus.Config {
		c := cfg
		c.Role, c.NKeySeedFile = r, seeds.File(r)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wc, err := bus.Dial(ctx, as(bus.RoleWorker), zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	declared := make(chan error, 1)
	go func() { declared <- wc.Declare(ctx) }()
	for !strings.Contains(logs.String(), "waiting for stream "+bus.StreamTools) {
		select {
		case err := <-declared:
			t.Fatalf("the worker's Declare returned %v before anything was declared", err)
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("no word of waiting; log:\n%s", logs.String())
		}
	}
	dc, err := bus.Dial(ctx, as(bus.RoleDispatcher), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if err := dc.Declare(ctx); err != nil {
		t.Fatalf("dispatcher: %v", err)
	}
	if err := <-declared; err != nil {
		t.Fatalf("worker: %v", err)
	}
}

// A planner declares everything but planbus-keys, which it may not touch.
func TestDeclareAsPlannerLeavesTheKeysBucket(t *testing.T) {
	seeds, err := bus.EnsureSeeds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := bustest.StartBare(t, embedded.Auth(seeds))
	pc := cfg
	pc.Role, pc.NKeySeedFile = bus.RolePlanner, seeds.File(bus.RolePlanner)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bustest.Dial(t, pc).Declare(ctx); err != nil {
		t.Fatal(err)
	}
	ac := cfg
	ac.NKeySeedFile, ac.Role = seeds.File(bus.RoleAdmin), bus.RoleAdmin
	admin := bustest.Dial(t, ac)
	for _, sc := range cfg.Streams() {
		if _, err := admin.JS.Stream(ctx, sc.Name); err != nil {
			t.Errorf("stream %s: %v", sc.Name, err)
		}
	}
	for _, kc := range cfg.Buckets() {
		_, err := admin.JS.KeyValue(ctx, kc.Bucket)
		if kc.Bucket == bus.BucketKeys {
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				t.Errorf("bucket %s: %v, want it left to the dispatchers", kc.Bucket, err)
			}
		} else if err != nil {
			t.Errorf("bucket %s: %v", kc.Bucket, err)
		}
	}
}

// A connection whose role is not known to planbus declares everything; on
// a server that refuses it, Declare fails at once with ErrDenied instead
// of retrying forever.
func TestDeclareRefusedIsDenied(t *testing.T) {
	seeds, err := bus.EnsureSeeds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := bustest.StartBare(t, embedded.Auth(seeds))
	cfg.NKeySeedFile = seeds.File(bus.RoleClient)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = bustest.Dial(t, cfg).Declare(ctx)
	if !errors.Is(err, bus.ErrDenied) || !strings.Contains(err.Error(), bus.StreamPlans) {
		t.Fatalf("err = %v, want ErrDenied naming %s", err, bus.StreamPlans)
	}
	if ctx.Err() != nil {
		t.Fatal("Declare retried until its context ended")
	}
}

// user is what a server knows of an nkey user, in comparable fields.
type user struct {
	Nkey                 string
	PubAllow, PubDeny    []string
	SubAllow, SubDeny    []string
	RespMax              int
	RespExpires          time.Duration
	HasResp, HasPub, Sub bool
}

func users(us []*server.NkeyUser) []user {
	var out []user
	for _, u := range us {
		x := user{Nkey: u.Nkey}
		if p := u.Permissions; p != nil {
			if p.Publish != nil {
				x.HasPub, x.PubAllow, x.PubDeny = true, p.Publish.Allow, p.Publish.Deny
			}
			if p.Subscribe != nil {
				x.Sub, x.SubAllow, x.SubDeny = true, p.Subscribe.Allow, p.Subscribe.Deny
			}
			if p.Response != nil {
				x.HasResp, x.RespMax, x.RespExpires = true, p.Response.MaxMsgs, p.Response.Expires
			}
		}
		out = append(out, x)
	}
	return out
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A seed file holds anything a user put there: ReadSeed never panics, and
// what it accepts is a user's seed.
func FuzzReadSeed(f *testing.F) {
	user, _ := nkeys.CreateUser()
	seed, _ := user.Seed()
	account, _ := nkeys.CreateAccount()
	aseed, _ := account.Seed()
	for _, s := range [][]byte{seed, append(seed, '\n'), aseed, []byte("SU"), {}, []byte("-----BEGIN USER NKEY SEED-----\n" + string(seed) + "\n------END USER NKEY SEED------\n")} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(dir, "fuzz.nk")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		pub, err := bus.ReadSeed(path)
		if err != nil {
			if !errors.Is(err, bus.ErrSeed) {
				t.Fatalf("error %v is not an ErrSeed", err)
			}
			return
		}
		if !nkeys.IsValidPublicUserKey(pub) {
			t.Fatalf("accepted %q with public key %q", content, pub)
		}
	})
}

// A component given another role's seed (a worker with client.nk, as a
// mis-mounted seed does) is refused its reply inbox and gets no answer to
// any request: Declare says so at once, naming the seed it needs, instead
// of waiting for ever as for a server not ready yet.
func TestDeclareWithAnotherRolesSeedNamesTheSeed(t *testing.T) {
	seeds, err := bus.EnsureSeeds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := bustest.StartBare(t, embedded.Auth(seeds))
	cfg.NKeySeedFile, cfg.Role = seeds.File(bus.RoleClient), bus.RoleWorker
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = bustest.Dial(t, cfg).Declare(ctx)
	if !errors.Is(err, bus.ErrDenied) || !strings.Contains(err.Error(), "the worker role's, worker.nk?") {
		t.Fatalf("err = %v, want ErrDenied naming worker.nk", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Declare retried until its context ended")
	}
}

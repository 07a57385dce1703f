package bus

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/planbus/planbus/internal/wire"
)

// ErrSeed is matched by every error about a role's seed file.
var ErrSeed = errors.New("bus: nkey seed")

// Seeds are the nkey seed files of the roles, one per role in one
// directory: <dir>/<role>.nk. Whoever holds a role's file is that role.
// The directory may also hold worker groups (AddWorkerGroup): workers
// narrowed to some skills, each with a seed of its own.
type Seeds struct {
	// Dir holds the files.
	Dir     string
	keys    map[Role]string
	groups  []WorkerGroup
	clients []NamedClient
}

// A NamedClient is a client identity of its own (AddClient): whoever holds
// its seed, client-<name>.nk, calls the endpoints as name (ClientGrants),
// and what it makes (requests, sessions) is name's: other clients may not
// cancel, approve or reset it, nor read its replies.
type NamedClient struct {
	Name string
	// PublicKey is the client's nkey user.
	PublicKey string
}

// ClientSeedFile is the name of a named client's seed file.
func ClientSeedFile(name string) string { return "client-" + name + ".nk" }

// ClientOfSeedFile is the named client whose seed file path is
// (client-<name>.nk), or "" for any other file.
func ClientOfSeedFile(path string) string {
	base := filepath.Base(path)
	name, ok := strings.CutPrefix(base, "client-")
	if !ok {
		return ""
	}
	name, ok = strings.CutSuffix(name, ".nk")
	if !ok || !validName(name, 64) {
		return ""
	}
	return name
}

// Clients are the named clients in the directory, by name.
func (s *Seeds) Clients() []NamedClient { return s.clients }

// ClientFile is the path of a named client's seed file.
func (s *Seeds) ClientFile(name string) string { return filepath.Join(s.Dir, ClientSeedFile(name)) }

// AddClient writes the seed of the named client name to dir (kept if it
// exists); EnsureSeeds then reads it with the roles' seeds. A name that is
// not 1 to 64 letters, digits, '_' or '-' is refused.
func AddClient(dir, name string) error {
	if !validName(name, 64) {
		return fmt.Errorf("%w: client %q: want 1 to 64 letters, digits, '_' or '-'", ErrSeed, name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: directory %s: %w", ErrSeed, dir, err)
	}
	_, err := ensureSeed(filepath.Join(dir, ClientSeedFile(name)))
	return err
}

// readClients reads the named clients of dir, by name.
func readClients(dir string) ([]NamedClient, error) {
	files, err := filepath.Glob(filepath.Join(dir, ClientSeedFile("*")))
	if err != nil {
		return nil, err
	}
	var out []NamedClient
	for _, f := range files { // Glob sorts them
		name := ClientOfSeedFile(f)
		if name == "" {
			return nil, fmt.Errorf("%w: %s: not a named client's seed (want client-<name>.nk)", ErrSeed, f)
		}
		pub, err := ReadSeed(f)
		if err != nil {
			return nil, err
		}
		out = append(out, NamedClient{Name: name, PublicKey: pub})
	}
	return out, nil
}

// A WorkerGroup is a worker identity narrowed to some skills (the worker
// role's grants for those skills alone, WorkerGrants): whoever holds its
// seed, worker-<name>.nk, may take the calls of its skills, advertise
// their manifests and answer their invocations, and no other skill's.
// Its skills are listed one per line in worker-<name>.skills beside the
// seed.
type WorkerGroup struct {
	Name   string
	Skills []string
	// PublicKey is the group's nkey user.
	PublicKey string
}

// GroupSeedFile is the name of a worker group's seed file.
func GroupSeedFile(name string) string { return "worker-" + name + ".nk" }

// groupSkillsFile is the name of the file listing a worker group's skills.
func groupSkillsFile(name string) string { return "worker-" + name + ".skills" }

// Groups are the worker groups in the directory, by name.
func (s *Seeds) Groups() []WorkerGroup { return s.groups }

// GroupFile is the path of a worker group's seed file.
func (s *Seeds) GroupFile(name string) string { return filepath.Join(s.Dir, GroupSeedFile(name)) }

// validName reports whether s is 1 to max letters, digits, '_' or '-' (the
// skill pattern of the schemas): group and skill names end up in file
// names and subjects.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckWorkerGroup checks a worker group's name and skills, each 1 to 64
// letters, digits, '_' or '-', and returns the skills without repeats.
func CheckWorkerGroup(name string, skills []string) ([]string, error) {
	if !validName(name, 64) {
		return nil, fmt.Errorf("%w: worker group %q: want 1 to 64 letters, digits, '_' or '-'", ErrSeed, name)
	}
	if len(skills) == 0 {
		return nil, fmt.Errorf("%w: worker group %s: no skills", ErrSeed, name)
	}
	seen := map[string]bool{}
	var list []string
	for _, sk := range skills {
		if !wire.IsSkill(sk) {
			return nil, fmt.Errorf("%w: worker group %s: skill %q: want 1 to 64 letters, digits, '_' or '-', optionally after a namespace and a dot", ErrSeed, name, sk)
		}
		if !seen[sk] {
			seen[sk] = true
			list = append(list, sk)
		}
	}
	return list, nil
}

// AddWorkerGroup writes a worker group to dir: its skills file (replacing
// the list of a group of that name) and its seed (kept if it exists).
// EnsureSeeds then reads it with the roles' seeds. A name or skill that
// is not 1 to 64 letters, digits, '_' or '-' is refused.
func AddWorkerGroup(dir, name string, skills []string) error {
	list, err := CheckWorkerGroup(name, skills)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: directory %s: %w", ErrSeed, dir, err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, groupSkillsFile(name)), []byte(strings.Join(list, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrSeed, err)
	}
	_, err = ensureSeed(filepath.Join(dir, GroupSeedFile(name)))
	return err
}

// WriteFileAtomic replaces path with data: a reader sees the old file or
// the new one, never half of it.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Chmod(mode), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readGroups reads the worker groups of dir, by name.
func readGroups(dir string) ([]WorkerGroup, error) {
	files, err := filepath.Glob(filepath.Join(dir, groupSkillsFile("*")))
	if err != nil {
		return nil, err
	}
	var groups []WorkerGroup
	for _, f := range files { // Glob sorts them
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "worker-"), ".skills")
		if !validName(name, 64) {
			return nil, fmt.Errorf("%w: %s: not a worker group's file (want worker-<name>.skills)", ErrSeed, f)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSeed, err)
		}
		g := WorkerGroup{Name: name}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if !wire.IsSkill(line) {
				return nil, fmt.Errorf("%w: %s: skill %q: want 1 to 64 letters, digits, '_' or '-', optionally after a namespace and a dot", ErrSeed, f, line)
			}
			g.Skills = append(g.Skills, line)
		}
		if len(g.Skills) == 0 {
			return nil, fmt.Errorf("%w: %s lists no skills", ErrSeed, f)
		}
		if g.PublicKey, err = ensureSeed(filepath.Join(dir, GroupSeedFile(name))); err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// SeedFileName is the name of a role's seed file.
func SeedFileName(r Role) string { return string(r) + ".nk" }

// File is the path of the role's seed file.
func (s *Seeds) File(r Role) string { return filepath.Join(s.Dir, SeedFileName(r)) }

// PublicKey is the role's nkey user, the identity the server knows it by.
func (s *Seeds) PublicKey(r Role) string { return s.keys[r] }

// EnsureSeeds reads every role's seed from dir, first creating the
// directory (mode 0700) and the seeds that are missing (mode 0600).
// Seeds that exist are read and never overwritten, so a node keeps its
// identities across restarts and processes holding a seed stay valid. A
// seed is written under a temporary name and linked into place, so no one
// reads half a seed and two processes starting at once agree on one. A
// seed file that is not a user seed, or that others than its owner may
// read, is refused with an error naming it.
func EnsureSeeds(dir string) (*Seeds, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: directory %s: %w", ErrSeed, dir, err)
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: directory %s: %w", ErrSeed, dir, err)
	} else if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		// A directory made by hand (mkdir -p): only its owner needs it.
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("%w: directory %s is open to others (mode %o) and cannot be closed: %w", ErrSeed, dir, st.Mode().Perm(), err)
		}
	}
	s := &Seeds{Dir: dir, keys: map[Role]string{}}
	for _, r := range Roles() {
		pub, err := ensureSeed(s.File(r))
		if err != nil {
			return nil, err
		}
		s.keys[r] = pub
	}
	groups, err := readGroups(dir)
	if err != nil {
		return nil, err
	}
	s.groups = groups
	if s.clients, err = readClients(dir); err != nil {
		return nil, err
	}
	return s, nil
}

// ensureSeed returns the public key of the seed in path, creating it first
// if there is none.
func ensureSeed(path string) (string, error) {
	pub, err := ReadSeed(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return pub, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrSeed, path, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrSeed, path, err)
	}
	if err := createOnce(path, append(seed, '\n')); err != nil {
		return "", err
	}
	// Another process may have linked its seed first: use whatever is there.
	return ReadSeed(path)
}

// createOnce writes a secret to path (mode 0600) unless a file is there:
// under a temporary name, then linked into place, so no one reads half of
// it and two processes writing at once agree on one (the first linked).
func createOnce(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSeed, path, err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600.
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSeed, path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s: %w", ErrSeed, path, err)
	}
	return nil
}

// ReadSeed returns the public key of the user seed in path. The error
// wraps fs.ErrNotExist when there is no file.
func ReadSeed(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSeed, err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s may be read by others (mode %o): run chmod 600 %s", ErrSeed, path, st.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSeed, err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		return "", fmt.Errorf("%w: %s: not an nkey seed: %w", ErrSeed, path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("%w: %s: not a user seed (one starting with SU)", ErrSeed, path)
	}
	return pub, nil
}

// NATSAuthConfig is a nats-server configuration block with the same users
// and permissions as an embedded server's with authorization (embedded.Auth), for a server configured by file (the
// compose cluster includes it). It holds public keys only.
func NATSAuthConfig(s *Seeds) []byte {
	var b strings.Builder
	b.WriteString("# planbus roles and their permissions, one nkey user per role. Generated by\n" +
		"# `planner auth init` from the seeds next to this file; run it again rather\n" +
		"# than editing. Public keys only: the seeds stay with their holders.\n")
	b.WriteString("authorization {\n  users: [\n")
	user := func(comment, key string, g Grants) {
		fmt.Fprintf(&b, "    # %s\n    {\n      nkey: %s\n      permissions: {\n", comment, quote(key))
		fmt.Fprintf(&b, "        publish: { allow: %s }\n", quoteList(g.Publish))
		if len(g.SubscribeDeny) > 0 {
			fmt.Fprintf(&b, "        subscribe: { allow: %s, deny: %s }\n", quoteList(g.Subscribe), quoteList(g.SubscribeDeny))
		} else {
			fmt.Fprintf(&b, "        subscribe: { allow: %s }\n", quoteList(g.Subscribe))
		}
		if g.Respond {
			fmt.Fprintf(&b, "        allow_responses: { max: 1, expires: %s }\n", quote(g.ResponseExpiry.String()))
		}
		b.WriteString("      }\n    }\n")
	}
	for _, r := range Roles() {
		user(string(r), s.PublicKey(r), r.Grants())
	}
	for _, g := range s.groups {
		user(fmt.Sprintf("worker group %s: skills %s", g.Name, strings.Join(g.Skills, ", ")), g.PublicKey, WorkerGrants(g.Skills))
	}
	for _, c := range s.clients {
		user("client "+c.Name, c.PublicKey, ClientGrants(c.Name))
	}
	b.WriteString("  ]\n}\n")
	return []byte(b.String())
}

// quote makes a NATS config string. Subjects and keys are printable
// ASCII, for which strconv's quoting and the config parser's agree.
func quote(s string) string { return strconv.Quote(s) }

// quoteList is a list of strings, one per line, indented under its key.
func quoteList(ss []string) string {
	if len(ss) <= 1 {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	var b strings.Builder
	b.WriteString("[\n")
	for _, s := range ss {
		b.WriteString("          " + quote(s) + "\n")
	}
	b.WriteString("        ]")
	return b.String()
}

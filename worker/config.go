package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/skill"
)

// ErrInvalidConfig is matched by every error New returns for a bad
// Config; the error names the field.
var ErrInvalidConfig = errors.New("worker: invalid config")

// Config of a worker. Only Skills is required; a zero field takes its
// default.
type Config struct {
	// ID names this worker in results, events and `nats micro info`.
	// Default <hostname>-<pid>-<n>.
	ID string
	// Skills to serve; at least one. Each needs a handler and a manifest
	// valid under schemas/skill-manifest.schema.json (a name of 1 to 64
	// letters, digits, '_' or '-', since it becomes a subject token), and
	// no two may share a name.
	Skills []skill.Skill
	// Concurrency is how many calls of each skill run at once in this
	// worker. Default 16.
	Concurrency int
	// AckWait is how long a call may go without a heartbeat before JetStream
	// gives it to another worker; it bounds how soon the call of a dead
	// worker runs again. It is a setting of each skill's shared consumer,
	// which all the skill's workers use. Default: the consumer's when it
	// exists, so a worker joins the others, else 30s. A value given that
	// differs changes the consumer for every worker of the skill (the
	// worker logs it), and every worker heartbeats to the consumer's
	// current value, which it reads again every few seconds.
	AckWait time.Duration
	// MaxDeliver is how many deliveries of one attempt are tried before the
	// worker reports it failed with WORKER_CRASH, so a call that kills its
	// workers cannot loop forever. Default 5.
	MaxDeliver int
	// DrainTimeout is how long a stopping worker lets running calls finish;
	// those still running then are handed back for redelivery. Default 30s.
	DrainTimeout time.Duration
	// OutputCap is the largest output a call may return, in bytes; a larger
	// one fails the call with OUTPUT_TOO_LARGE. Default 1 MiB, or less
	// when the server's max payload is smaller. A cap given must leave
	// resultHeadroom (64 KiB) of the server's max payload for the rest of
	// the result.
	OutputCap int
	// Version is reported by the micro service. Default "0.0.0-dev".
	Version string
}

var workerSeq atomic.Int64

func (c Config) withDefaults() Config {
	if c.ID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "worker"
		}
		c.ID = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(workerSeq.Add(1), 10)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 16
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 5
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.OutputCap == 0 {
		c.OutputCap = 1 << 20
	}
	if c.Version == "" {
		c.Version = "0.0.0-dev"
	}
	return c
}

func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if len(c.Skills) == 0 {
		return bad("Skills", "no skills to serve")
	}
	seen := map[string]bool{}
	for i, s := range c.Skills {
		if s.Manifest.Name == "" || s.Handler == nil {
			return bad(fmt.Sprintf("Skills[%d]", i), "a skill has no name or no handler")
		}
		if seen[s.Manifest.Name] {
			return bad("Skills", "skill %q listed twice", s.Manifest.Name)
		}
		seen[s.Manifest.Name] = true
		b, err := json.Marshal(s.Manifest)
		if err == nil {
			err = schemas.Validate(schemas.SkillManifest, b)
		}
		if err != nil {
			return bad(fmt.Sprintf("Skills[%d]", i), "skill %q: manifest %v", s.Manifest.Name, err)
		}
	}
	if c.Concurrency < 1 {
		return bad("Concurrency", "%d, want at least 1", c.Concurrency)
	}
	if c.AckWait < 100*time.Millisecond {
		return bad("AckWait", "%s, want at least 100ms", c.AckWait)
	}
	if c.MaxDeliver < 1 {
		return bad("MaxDeliver", "%d, want at least 1", c.MaxDeliver)
	}
	if c.DrainTimeout < 0 {
		return bad("DrainTimeout", "%s, want 0 (the default) or more", c.DrainTimeout)
	}
	if c.OutputCap < 0 {
		return bad("OutputCap", "%d, want 0 (the default) or more", c.OutputCap)
	}
	return nil
}

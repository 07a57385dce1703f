package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// adopt fills the system-wide settings of c.Config that were left unset
// (zero Replicas, Retention, Partitions, KeepEvents) with the values the
// system's streams already have, so that a process joining a running
// system takes its settings instead of the defaults: a dispatcher started
// without --replicas next to a three-node cluster's planner must not
// shrink every stream to one replica when it declares them. With no
// streams yet the defaults apply. A setting given that differs from the
// system's is logged, since declaring the streams changes them.
//
// On a server with authorization, a role reads only the streams it may
// declare: it leaves the others as they are.
func (c *Conn) adopt(ctx context.Context) error {
	plans, err := c.streamConfig(ctx, StreamPlans)
	if err != nil {
		return err
	}
	if plans != nil {
		sys := Config{Replicas: plans.Replicas, Retention: plans.MaxAge}
		if plans.SubjectTransform != nil {
			sys.Partitions = partitionsOf(plans.SubjectTransform.Destination)
		}
		take(c, "replicas", &c.Config.Replicas, sys.Replicas)
		take(c, "retention", &c.Config.Retention, sys.Retention)
		take(c, "partitions", &c.Config.Partitions, sys.Partitions)
	}
	events, err := c.streamConfig(ctx, StreamEvents)
	if err != nil {
		return err
	}
	if events != nil {
		sys := KeepOutcomeEvents
		if slices.Equal(events.Subjects, EventSubjectsKept(KeepAllEvents)) {
			sys = KeepAllEvents
		}
		take(c, "keep-events", &c.Config.KeepEvents, sys)
	}
	return nil
}

// take sets *field to the system's value when it was left unset, and
// logs a given value that will change the system's.
func take[T comparable](c *Conn, name string, field *T, sys T) {
	var unset T
	switch {
	case sys == unset:
	case *field == unset:
		*field = sys
	case *field != sys:
		c.log.Warn().Str("setting", name).Str("system", fmt.Sprint(sys)).Str("given", fmt.Sprint(*field)).
			Msgf("--%s differs from the running system's: declaring the streams changes it for every process (leave it out to keep the system's)", name)
	}
}

// streamConfig is the configuration of stream name, nil when it does not
// exist yet or the connection's role may not declare it.
func (c *Conn) streamConfig(ctx context.Context, name string) (*jetstream.StreamConfig, error) {
	if role := c.Config.Role; role != "" && c.NC.AuthRequired() && !role.mayDeclare(name) {
		return nil, nil
	}
	var cfg *jetstream.StreamConfig
	err := c.retryTransient(ctx, name, func(ctx context.Context) error {
		s, err := c.JS.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return nil
		case err != nil:
			return err
		}
		sc := s.CachedInfo().Config
		cfg = &sc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bus: read stream %s: %w", name, err)
	}
	return cfg, nil
}

// partitionsRE is compiled on first use rather than at every command's start.
var partitionsRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{partition\((\d+),`) })

// partitionsOf reads the partition count of a subject transform's
// destination (Partitioned.Transform); 0 when it has none.
func partitionsOf(dest string) int {
	m := partitionsRE().FindStringSubmatch(dest)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

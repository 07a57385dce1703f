package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/schemas"
	"github.com/planbus/planbus/skill"
)

// A skill's manifest in the skills bucket is what planners validate
// requests against and plan with: whoever may write its key can make
// every request for the skill refused (an input schema of {"not": {}}),
// or planned with a schema the skill does not keep. A worker keeps the
// manifests of its skills: it watches their keys and puts its own back
// when one is changed under it.
//
// Another worker that advertises a different manifest for the same skill
// (another version, another program) would then take turns with this one
// for ever: a worker puts its own back at most keepRestores times within
// keepWindow of a well-formed manifest of the skill, then leaves it and
// says so at error level, until its own is seen there again. A value that
// is not a manifest of the skill (not JSON, another name, deleted) is put
// back every time.
const (
	keepRestores = 3
	keepWindow   = time.Minute
	// keepJitter spreads the workers of a skill, which all see the change:
	// the first to put its manifest back spares the others.
	keepJitter = 250 * time.Millisecond
)

// keepManifests watches the manifests of the worker's skills until ctx
// ends, putting its own back when one is changed under it.
func (w *Worker) keepManifests(ctx context.Context, kv jetstream.KeyValue) {
	for _, s := range w.skills {
		m := s.skill.Manifest
		mine, _ := json.Marshal(m)
		watcher, err := kv.Watch(ctx, m.Name, jetstream.UpdatesOnly())
		if err != nil {
			w.log.Warn("cannot watch the skill's manifest; a change of it will not be undone", slog.Any("error", err), slog.String("skill", m.Name))
			continue
		}
		k := &keeper{w: w, kv: kv, m: m, mine: mine}
		w.keepers.Go(func() {
			defer func() { _ = watcher.Stop() }()
			k.run(ctx, watcher)
		})
	}
}

// keeper keeps one skill's manifest.
type keeper struct {
	w        *Worker
	kv       jetstream.KeyValue
	m        skill.Manifest
	mine     []byte
	restores []time.Time // when a rival manifest was replaced, within keepWindow
	yielded  bool        // gave way to a rival until its own comes back
}

func (k *keeper) run(ctx context.Context, watcher jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-watcher.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			k.changed(ctx, e)
		}
	}
}

// changed answers a change of the key.
func (k *keeper) changed(ctx context.Context, e jetstream.KeyValueEntry) {
	if e.Operation() == jetstream.KeyValuePut && bytes.Equal(e.Value(), k.mine) {
		k.yielded = false
		return
	}
	log := k.w.log.With(slog.String("skill", k.m.Name))
	rival := e.Operation() == jetstream.KeyValuePut && isManifestOf(e.Value(), k.m.Name)
	if rival {
		if k.yielded {
			return
		}
		now := time.Now()
		kept := k.restores[:0]
		for _, t := range k.restores {
			if now.Sub(t) < keepWindow {
				kept = append(kept, t)
			}
		}
		k.restores = kept
		if len(k.restores) >= keepRestores {
			k.yielded = true
			log.Error(fmt.Sprintf("another manifest of the skill keeps being advertised (%d times in %s): another worker serves a skill of this name differently; leaving its manifest in place. Give one of them another name, or run one version", keepRestores+1, keepWindow),
				slog.String("advertised", clipBytes(e.Value(), 300)))
			return
		}
		k.restores = append(k.restores, now)
	}
	// The workers of the skill all see the change: wait a little, and put
	// it back only if none did.
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(keepJitter)):
	}
	if cur, err := k.kv.Get(ctx, k.m.Name); err == nil && bytes.Equal(cur.Value(), k.mine) {
		return
	}
	if _, err := k.kv.Put(ctx, k.m.Name, k.mine); err != nil {
		if !errors.Is(err, context.Canceled) {
			log.Error("cannot put the skill's manifest back", slog.Any("error", err))
		}
		return
	}
	what := "changed to " + clipBytes(e.Value(), 300)
	if e.Operation() != jetstream.KeyValuePut {
		what = "deleted"
	}
	log.Warn("the skill's manifest was changed under this worker; put its own back", slog.String("was", what))
}

// isManifestOf tells whether data is a well-formed manifest of the skill
// name, as a worker would advertise it.
func isManifestOf(data []byte, name string) bool {
	var m skill.Manifest
	if err := json.Unmarshal(data, &m); err != nil || m.Name != name {
		return false
	}
	return schemas.Validate(schemas.SkillManifest, data) == nil
}

// clipBytes is b as text, at most n bytes of it.
func clipBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

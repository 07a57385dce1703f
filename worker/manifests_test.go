package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
	"github.com/planbus/planbus/internal/skills"
	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/worker"
)

// manifestWatch watches the skills bucket's key of a skill.
type manifestWatch struct {
	t  *testing.T
	kv jetstream.KeyValue
	w  jetstream.KeyWatcher
}

func (e *env) watchManifest(ctx context.Context, name string) *manifestWatch {
	e.t.Helper()
	kv, err := e.conn.JS.KeyValue(ctx, bus.BucketSkills)
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := kv.Watch(ctx, name, jetstream.UpdatesOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = w.Stop() })
	return &manifestWatch{t: e.t, kv: kv, w: w}
}

// until waits for a put of the key whose value satisfies ok.
func (m *manifestWatch) until(ctx context.Context, what string, ok func([]byte) bool) {
	m.t.Helper()
	for {
		select {
		case e := <-m.w.Updates():
			if e != nil && e.Operation() == jetstream.KeyValuePut && ok(e.Value()) {
				return
			}
		case <-ctx.Done():
			m.t.Fatalf("the manifest never became %s", what)
		}
	}
}

// A worker puts its skill's manifest back when it is changed under it:
// a value that is not a manifest of the skill, or a delete (issue 23: a
// worker seed's put of {"inputSchema":{"not":{}}} had every request for
// the skill refused, still 20 s later).
func TestWorkerPutsItsManifestBack(t *testing.T) {
	e := newEnv(t)
	echo := skills.Echo()
	mine, _ := json.Marshal(echo.Manifest)
	e.startWorker(worker.Config{Skills: []skill.Skill{echo}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m := e.watchManifest(ctx, "echo")
	isMine := func(b []byte) bool { return string(b) == string(mine) }

	for _, hostile := range []string{`{"inputSchema":{"not":{}}}`, `{"name":"echo","inputSchema":{"not":{}},"description":"x","version":"1",`, `"echo"`} {
		if _, err := m.kv.Put(ctx, "echo", []byte(hostile)); err != nil {
			t.Fatal(err)
		}
		m.until(ctx, "the worker's again after "+hostile, isMine)
	}
	if err := m.kv.Delete(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	m.until(ctx, "the worker's again after a delete", isMine)
}

// Another worker with another manifest of the skill (another version,
// another program) is not fought for ever: the worker puts its own back
// three times in a minute, then leaves the other's and says so.
func TestWorkerLeavesARivalManifestAfterThreeTries(t *testing.T) {
	e := newEnv(t)
	var logs bustest.SyncBuffer
	echo := skills.Echo()
	mine, _ := json.Marshal(echo.Manifest)
	e.startWorker(worker.Config{Skills: []skill.Skill{echo}}, worker.WithLogger(jsonLog(&logs, slog.LevelDebug)))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m := e.watchManifest(ctx, "echo")
	rival := echo.Manifest
	rival.Version = "9.9.9"
	theirs, _ := json.Marshal(rival)
	for range 3 {
		if _, err := m.kv.Put(ctx, "echo", theirs); err != nil {
			t.Fatal(err)
		}
		m.until(ctx, "the worker's again", func(b []byte) bool { return string(b) == string(mine) })
	}
	if _, err := m.kv.Put(ctx, "echo", theirs); err != nil {
		t.Fatal(err)
	}
	// The log line is the event waited for; it comes with no change of
	// the key, so the log is looked at every few milliseconds.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(logs.String(), "another manifest of the skill keeps being advertised") {
		select {
		case <-ctx.Done():
			t.Fatalf("no error said it gives way; log:\n%s", logs.String())
		case <-tick.C:
		}
	}
	if cur, err := m.kv.Get(ctx, "echo"); err != nil || string(cur.Value()) != string(theirs) {
		t.Errorf("manifest %s (%v), want the rival's left in place", cur.Value(), err)
	}
}

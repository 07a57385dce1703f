package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
)

// bucket is a bucket in memory, with revisions, as a state is stored in.
// ReadStored reads chunks at once: get may be called concurrently.
type bucket struct {
	mu   sync.Mutex
	vals map[string][]byte
	revs map[string]uint64
	rev  uint64
	// gets counts the reads of each key.
	gets map[string]int
}

func newBucket() *bucket {
	return &bucket{vals: map[string][]byte{}, revs: map[string]uint64{}, gets: map[string]int{}}
}

func (b *bucket) get(_ context.Context, key string) ([]byte, uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gets[key]++
	v, ok := b.vals[key]
	if !ok {
		return nil, 0, nil
	}
	return v, b.revs[key], nil
}

func (b *bucket) put(key string, v []byte) {
	b.rev++
	b.vals[key], b.revs[key] = slices.Clone(v), b.rev
}

// store carries out w as a dispatcher does, the head stored unless lose.
func (b *bucket) store(t interface{ Fatalf(string, ...any) }, st *State, head string, w *StateWrite, lose bool) {
	for _, c := range w.Chunks {
		if _, ok := b.vals[c.Key]; ok {
			t.Fatalf("chunk key %s written twice", c.Key)
		}
		b.put(c.Key, c.Value)
	}
	if lose {
		for _, c := range w.Chunks {
			delete(b.vals, c.Key)
		}
		return
	}
	b.put(head, w.Head)
	st.Wrote(w)
	for _, k := range w.Superseded {
		if _, ok := b.vals[k]; !ok {
			t.Fatalf("superseded chunk %s is not stored", k)
		}
		delete(b.vals, k)
	}
}

// A chunked state, written after every step of a random run (some writes
// lost to another writer, as a lost compare-and-set is), reads back as
// the state's whole stored form; the bucket then holds the head and the
// chunks it names and nothing else; and a write puts only the chunks of
// tools that changed.
func TestPropertyChunkedStateReadsBackWhole(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(3, 14).Draw(t, "n")
		size := rapid.IntRange(1, n/3).Draw(t, "chunkTools")
		type tool struct {
			ToolID       string           `json:"toolId"`
			Skill        string           `json:"skill"`
			Dependencies []string         `json:"dependencies"`
			Required     bool             `json:"required"`
			RetryPolicy  plan.RetryPolicy `json:"retryPolicy"`
			Approval     *plan.Approval   `json:"approval,omitempty"`
		}
		tools := make([]tool, n)
		for i := range tools {
			tools[i] = tool{ToolID: fmt.Sprintf("t%d", i), Skill: "s", Dependencies: []string{},
				Required:    rapid.Bool().Draw(t, "required"),
				RetryPolicy: plan.RetryPolicy{MaxAttempts: rapid.IntRange(1, 3).Draw(t, "attempts"), BackoffMs: 10}}
			if rapid.IntRange(0, 4).Draw(t, "approval") == 0 {
				tools[i].Approval = &plan.Approval{Prompt: "ok?"}
			}
			for j := range i {
				if rapid.IntRange(0, 3).Draw(t, "edge") == 0 {
					tools[i].Dependencies = append(tools[i].Dependencies, tools[j].ToolID)
				}
			}
		}
		doc, _ := json.Marshal(map[string]any{"planId": "p", "requestId": "r", "timeoutMs": 60000, "parallel": true,
			"maxConcurrency": rapid.IntRange(1, 4).Draw(t, "maxConcurrency"), "tools": tools})
		p, err := plan.Decode(doc)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		e, fx := Start(p, now, 8, nil)
		e.st.ChunkBy(size)
		if !e.st.Chunked() {
			t.Fatalf("%d tools in chunks of %d are not chunked", n, size)
		}
		b := newBucket()
		const head = "p.state"
		writes := 0
		// write stores the state's changes as a dispatcher does, or, when
		// it may and the draw says so, loses the write to another writer.
		write := func(mayLose bool) (lost bool) {
			// The stored form as it was, to see what changed.
			var before *Stored
			if writes > 0 {
				if before, _, err = ReadStored(context.Background(), head, b.get); err != nil {
					t.Fatal(err)
				}
			}
			w, err := e.st.Write(head, fmt.Sprintf("w%d", writes), nil)
			if err != nil {
				t.Fatal(err)
			}
			writes++
			want := e.st.Store()
			if before != nil {
				changed := map[int]bool{}
				for i := range want.Tools {
					if !cmp.Equal(want.Tools[i], before.Tools[i]) || (before.Status == planbus.PlanRunning && want.Status != planbus.PlanRunning) {
						changed[i/size] = true
					}
				}
				for _, c := range w.Chunks {
					var k int
					if _, err := fmt.Sscanf(strings.TrimPrefix(c.Key, head), ".c%d.", &k); err != nil {
						t.Fatalf("chunk key %s: %v", c.Key, err)
					}
					delete(changed, k)
				}
				if len(changed) > 0 {
					t.Fatalf("chunks %v changed but were not written", slices.Sorted(maps.Keys(changed)))
				}
			}
			lost = mayLose && rapid.IntRange(0, 4).Draw(t, "lose") == 0
			b.store(t, e.st, head, w, lost)
			if lost {
				return true // the next write catches up
			}
			got, _, err := ReadStored(context.Background(), head, b.get)
			if err != nil {
				t.Fatal(err)
			}
			want.ChunkTools, want.Chunks = size, got.Chunks
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("state read back (-want +got):\n%s", diff)
			}
			keys := []string{head}
			for k, id := range got.Chunks {
				keys = append(keys, ChunkKey(head, k, id))
			}
			if stored := slices.Sorted(maps.Keys(b.vals)); !slices.Equal(stored, slices.Sorted(slices.Values(keys))) {
				t.Fatalf("bucket holds %v, want %v", stored, keys)
			}
			return false
		}
		var running []Release
		var timers []Timer
		handle := func(fx Effects) {
			running = append(running, fx.Releases...)
			timers = append(timers, fx.Timers...)
			write(writes > 0)
		}
		handle(fx)
		for steps := 0; !e.Done(); steps++ {
			if steps > 1000 {
				t.Fatal("run does not end")
			}
			var waiting []int
			for i, ts := range e.st.Tools {
				if ts.State == planbus.ToolWaitingApproval {
					waiting = append(waiting, i)
				}
			}
			switch k := rapid.IntRange(0, 9).Draw(t, "event"); {
			case k == 0:
				handle(e.Cancel("enough", now))
			case k <= 2 && len(waiting) > 0:
				i := rapid.SampledFrom(waiting).Draw(t, "waiting")
				kind := rapid.SampledFrom([]string{TimerApprove, TimerReject}).Draw(t, "decision")
				handle(e.OnTimer(Timer{Kind: kind, Index: i, FireAt: now}, now))
			case k <= 4 && len(timers) > 0:
				j := rapid.IntRange(0, len(timers)-1).Draw(t, "timer")
				tm := timers[j]
				timers = slices.Delete(timers, j, j+1)
				now = later(now, tm.FireAt)
				handle(e.OnTimer(tm, now))
			case len(running) > 0:
				j := rapid.IntRange(0, len(running)-1).Draw(t, "finish")
				r := running[j]
				running = slices.Delete(running, j, j+1)
				res := &planbus.ToolResult{ToolID: p.Tools[r.Index].ToolID, Attempt: r.Attempt, State: planbus.ToolSucceeded}
				if rapid.IntRange(0, 3).Draw(t, "fails") == 0 {
					res.State = planbus.ToolFailed
					res.Error = &planbus.ErrorInfo{Code: "X", Category: planbus.CategoryNetwork, Message: "x"}
				}
				now = now.Add(time.Millisecond)
				handle(e.OnResultSeq(res, uint64(steps+1), now))
			case len(timers) > 0:
				tm := timers[0]
				timers = timers[1:]
				now = later(now, tm.FireAt)
				handle(e.OnTimer(tm, now))
			default:
				// Only approvals are left to give.
				if len(waiting) == 0 {
					t.Fatalf("stuck: nothing running, no timers, no approvals, plan %s", e.st.Status)
				}
				handle(e.OnTimer(Timer{Kind: TimerApprove, Index: waiting[0], FireAt: now}, now))
			}
		}
		// The write after the plan ended rewrote every chunk.
		for write(true) {
		}
		got, _, err := ReadStored(context.Background(), head, b.get)
		if err != nil {
			t.Fatal(err)
		}
		for k, id := range got.Chunks {
			if id != got.Chunks[0] {
				t.Fatalf("chunk %d of an ended plan is from write %s, chunk 0 from %s", k, id, got.Chunks[0])
			}
		}
	})
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// chunkedPlan starts a plan of n independent tools, its state in chunks
// of size.
func chunkedPlan(t testing.TB, n, size int) *Engine {
	t.Helper()
	tools := make([]map[string]any, n)
	for i := range tools {
		tools[i] = map[string]any{"toolId": fmt.Sprintf("t%d", i), "skill": "s"}
	}
	doc, _ := json.Marshal(map[string]any{"planId": "p", "requestId": "r", "parallel": true, "maxConcurrency": n, "tools": tools})
	p, err := plan.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Start(p, t0, 8, nil)
	e.st.ChunkBy(size)
	return e
}

// A reader that finds a chunk gone because a writer replaced it reads the
// new head and its chunks; a chunk gone while its head stays is an error
// naming it.
func TestReadStoredFollowsAHeadThatMovedOn(t *testing.T) {
	const head = "p.state"
	e := chunkedPlan(t, 7, 2)
	b := newBucket()
	w, err := e.st.Write(head, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Chunks) != 4 || len(w.Superseded) != 0 {
		t.Fatalf("first write: %d chunks, %d superseded; want 4 and 0", len(w.Chunks), len(w.Superseded))
	}
	b.store(t, e.st, head, w, false)

	// A reader has the head; a writer then replaces chunk 1.
	old := b.vals[head]
	e.OnResultSeq(&planbus.ToolResult{ToolID: "t2", Attempt: 1, State: planbus.ToolSucceeded}, 9, t0)
	w, err = e.st.Write(head, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Chunks) != 1 || w.Chunks[0].Key != "p.state.c1.b" || !slices.Equal(w.Superseded, []string{"p.state.c1.a"}) {
		t.Fatalf("second write puts %v and supersedes %v; want chunk 1 only", w.Chunks, w.Superseded)
	}
	b.store(t, e.st, head, w, false)
	fresh := b.vals[head]
	reads := 0
	get := func(ctx context.Context, key string) ([]byte, uint64, error) {
		if key == head {
			reads++
			if reads == 1 {
				return old, 1, nil
			}
		}
		return b.get(ctx, key)
	}
	got, rev, err := ReadStored(context.Background(), head, get)
	if err != nil {
		t.Fatal(err)
	}
	if reads != 2 || rev != b.revs[head] || got.Tools[2].State != planbus.ToolSucceeded || got.Tools[2].Result != 9 {
		t.Fatalf("read the head %d times, revision %d (stored %d), tool t2 %+v; want the second head's state", reads, rev, b.revs[head], got.Tools[2])
	}
	if string(fresh) != string(b.vals[head]) {
		t.Fatal("reading changed the head")
	}

	delete(b.vals, "p.state.c3.a")
	if _, _, err := ReadStored(context.Background(), head, b.get); !errors.Is(err, ErrChunkMissing) || !strings.Contains(err.Error(), "p.state.c3.a") {
		t.Fatalf("a chunk gone under a head that stays: %v, want ErrChunkMissing naming p.state.c3.a", err)
	}
}

// Heads and chunks that do not fit together are errors naming the key.
func TestReadStoredRefusesMalformedChunks(t *testing.T) {
	const head = "p.state"
	for _, c := range []struct{ name, head, chunk, want string }{
		{"no chunk size", `{"chunks":["a"],"tools":[]}`, `[["p",0,0,null]]`, "chunkTools 0"},
		{"tools in a head", `{"chunkTools":1,"chunks":["a"],"tools":[["p",0,0,null]]}`, `[["p",0,0,null]]`, "1 tools of its own"},
		{"chunk too big", `{"chunkTools":1,"chunks":["a"],"tools":[]}`, `[["p",0,0,null],["p",0,0,null]]`, "p.state.c0.a: 2 tools"},
		{"empty chunk", `{"chunkTools":1,"chunks":["a"],"tools":[]}`, `[]`, "p.state.c0.a: 0 tools"},
		{"not an array", `{"chunkTools":1,"chunks":["a"],"tools":[]}`, `{}`, "p.state.c0.a: json"},
		{"bad code", `{"chunkTools":2,"chunks":["a"],"tools":[]}`, `[["p",0,0,null],["?",0,0,null]]`, "stored tool 1: unknown state code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBucket()
			b.put(head, []byte(c.head))
			b.put(ChunkKey(head, 0, "a"), []byte(c.chunk))
			_, _, err := ReadStored(context.Background(), head, b.get)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if s, rev, err := ReadStored(context.Background(), head, newBucket().get); s != nil || rev != 0 || err != nil {
		t.Fatalf("no head: %v, %d, %v; want nothing", s, rev, err)
	}
}

// A plan of at most twice the chunk size is stored whole, as before.
func TestSmallStatesAreStoredWhole(t *testing.T) {
	e := chunkedPlan(t, 4, 2)
	if e.st.Chunked() {
		t.Fatal("4 tools in chunks of 2 are chunked")
	}
	w, err := e.st.Write("p.state", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := e.st.AppendStored(nil)
	if len(w.Chunks) != 0 || len(w.Superseded) != 0 || string(w.Head) != string(whole) {
		t.Fatalf("write %+v, want the whole state %s", w, whole)
	}
}

// FuzzReadStored: any head and chunks, however malformed, give a state or
// an error, never a panic; a state read whole or from chunks has its
// chunks' tools, in order, and encodes again to what reads back the same.
func FuzzReadStored(f *testing.F) {
	f.Add([]byte(`{"planId":"p","status":"running","startedAt":5,"tools":[["p",0,0,null],["s",1,3,2]]}`), []byte(`[]`), []byte(`[]`))
	f.Add([]byte(`{"planId":"p","status":"running","chunkTools":2,"chunks":["a","a"],"tools":[]}`),
		[]byte(`[["r",1,0,4],["w",2,0,9,"x",{"code":"C","category":"network","message":"m"}]]`), []byte(`[["u",1,7,-3]]`))
	f.Add([]byte(`{"chunkTools":1,"chunks":["a","b"],"tools":[]}`), []byte(`[["y",0,0,null]]`), []byte(`[["k",0,0,1,"why"]]`))
	f.Fuzz(func(t *testing.T, head, c0, c1 []byte) {
		b := newBucket()
		b.put("p.state", head)
		b.put(ChunkKey("p.state", 0, "a"), c0)
		b.put(ChunkKey("p.state", 1, "a"), c1)
		b.put(ChunkKey("p.state", 1, "b"), c1)
		s, _, err := ReadStored(context.Background(), "p.state", b.get)
		if err != nil {
			return
		}
		if len(s.Chunks) > 0 && (len(s.Tools) <= (len(s.Chunks)-1)*s.ChunkTools || len(s.Tools) > len(s.Chunks)*s.ChunkTools) {
			t.Fatalf("%d tools from %d chunks of %d", len(s.Tools), len(s.Chunks), s.ChunkTools)
		}
		s.ChunkTools, s.Chunks = 0, nil
		doc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("a state read cannot be written: %v", err)
		}
		var back Stored
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatalf("%s does not read back: %v", doc, err)
		}
		if diff := cmp.Diff(s.Tools, back.Tools, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("tools written as %s read back otherwise (-read +again):\n%s", doc, diff)
		}
	})
}

// decodeChunk reads every chunk as encoding/json reads it: the same tools,
// or an error for both. The rows here are those its walk (parseRow) reads
// itself and those next to them it must leave to encoding/json.
func TestDecodeChunkReadsAsEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`[["s",1,9,3]]`, `[["p",0,0,null],["r",12,0,-4],["u",1,7,-3],["y",0,0,null]]`,
		`[["w",2,0,9,"x",{"code":"C","category":"network","message":"m"}],["s",1,2,3]]`,
		`[["k",0,0,1,"why"]]`, `[["s",-0,0,0]]`, `[["s",1,-0,0]]`, `[["s",01,0,0]]`, `[["s",1,0,1.5]]`,
		`[["s",1,0,1e3]]`, `[["s",1,18446744073709551615,0]]`, `[["s",1,18446744073709551616,0]]`,
		`[["s",9223372036854775807,0,0]]`, `[["s",9223372036854775808,0,0]]`, `[["s",1,0,-9223372036854775808]]`,
		`[["s",1,0,0,null]]`, `[["s",1,0,0,null,null]]`, `[["s",1,0,0,"",{"code":"C","code":"D"}]]`,
		`[["s", 1,0,0]]`, `[ ["s",1,0,0] ]`, `[["s",1,0]]`, `[["s",1,0,0,]]`, `[["x",1,0,0]]`, `[["ss",1,0,0]]`,
		`[["s",null,0,0]]`, `[["s",1,null,0]]`, `[["s",true,0,0]]`, `[["\u0073",1,0,0]]`, `[["s",1,0,0]] x`,
		`[["s",1,0,0]]]`, `[null]`, `null`, `[]`, `{}`, `[["s",1,0,0],]`, "[[\"s\",1,0,0,\"\xff\"]]", ``,
	} {
		slow, slowErr := decodeChunkSlow([]byte(doc), 0, 100)
		fast, fastErr := decodeChunk([]byte(doc), 0, 100)
		if (slowErr == nil) != (fastErr == nil) {
			t.Errorf("%s: encoding/json: %v; decodeChunk: %v", doc, slowErr, fastErr)
			continue
		}
		if diff := cmp.Diff(slow, fast, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s read otherwise (-encoding/json +decodeChunk):\n%s", doc, diff)
		}
	}
}

// FuzzDecodeChunk: decodeChunk and encoding/json agree on every document.
func FuzzDecodeChunk(f *testing.F) {
	f.Add([]byte(`[["p",0,0,null],["s",1,3,2],["u",1,7,-3],["y",0,0,null]]`), int64(5))
	f.Add([]byte(`[["w",2,0,9,"x",{"code":"C","category":"network","message":"m"}],["s",1,2,3]]`), int64(0))
	f.Add([]byte(`[["s",01,0,0],["s",1,-0,0],["s",1,0,1e3]]`), int64(-1))
	f.Fuzz(func(t *testing.T, doc []byte, startedAt int64) {
		slow, slowErr := decodeChunkSlow(doc, 0, startedAt)
		fast, fastErr := decodeChunk(doc, 0, startedAt)
		if (slowErr == nil) != (fastErr == nil) {
			t.Fatalf("%q: encoding/json: %v; decodeChunk: %v", doc, slowErr, fastErr)
		}
		if diff := cmp.Diff(slow, fast, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%q read otherwise (-encoding/json +decodeChunk):\n%s", doc, diff)
		}
	})
}

// BenchmarkReadStored50k reads back the state of a 50,000-tool plan, in
// 49 chunks, from a bucket in memory: the decoding a dispatcher does when
// it rebuilds such a plan's engine, without the server's round trips.
func BenchmarkReadStored50k(b *testing.B) {
	const head = "p.state"
	e := chunkedPlan(b, 50_000, DefaultChunkTools)
	for i := range 40_000 {
		e.OnResultSeq(&planbus.ToolResult{ToolID: fmt.Sprintf("t%d", i), Attempt: 1, State: planbus.ToolSucceeded}, uint64(i+1), t0)
	}
	bk := newBucket()
	w, err := e.st.Write(head, "a", nil)
	if err != nil {
		b.Fatal(err)
	}
	bk.store(b, e.st, head, w, false)
	b.ReportAllocs()
	for b.Loop() {
		s, _, err := ReadStored(context.Background(), head, bk.get)
		if err != nil || len(s.Tools) != 50_000 {
			b.Fatalf("read %v tools, %v", s, err)
		}
	}
}

// Once a chunk is refused, the chunks after it are not read: they cannot
// change the answer, which is the first chunk in order gone or refused.
// With one reader at a time, the reads are chunk 0, chunk 1 (refused),
// and chunk 2 when its read was already waiting for the reader as chunk 1
// failed (whether it was depends on how soon chunk 1's read ends: a CI run
// under -race saw both); never a chunk after 2.
func TestReadStoredStopsReadingAfterARefusedChunk(t *testing.T) {
	const head = "p.state"
	e := chunkedPlan(t, 80, 2)
	b := newBucket()
	w, err := e.st.Write(head, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.store(t, e.st, head, w, false)
	place := map[string]int{}
	for k, c := range w.Chunks {
		place[c.Key] = k
	}
	defer func(n int) { chunkReaders = n }(chunkReaders)
	chunkReaders = 1
	refused := errors.New("chunk 1 refused")
	var mu sync.Mutex
	var read []int
	get := func(ctx context.Context, key string) ([]byte, uint64, error) {
		k, ok := place[key]
		if !ok {
			return b.get(ctx, key) // the head
		}
		mu.Lock()
		read = append(read, k)
		mu.Unlock()
		if k == 1 {
			return nil, 0, refused
		}
		return b.get(ctx, key)
	}
	if _, _, err := ReadStored(context.Background(), head, get); !errors.Is(err, refused) {
		t.Fatalf("error %v, want chunk 1's refusal", err)
	}
	if !slices.Equal(read, []int{0, 1, 2}) && !slices.Equal(read, []int{0, 1}) {
		t.Fatalf("read chunks %v of %d; want 0, 1 and at most 2", read, len(w.Chunks))
	}
}

// A big state written again and again while it is read is still read,
// and as stored at the revision returned: a round after a writer moved the
// head on reads only the chunks it replaced. (Each round used to read
// every chunk again, and a writer replacing a chunk every few reads made
// every round fail: planner status of a running 60,000-tool plan gave up
// after 20 rounds.)
func TestReadStoredOfAStateWrittenWhileItIsRead(t *testing.T) {
	const head = "p.state"
	e := chunkedPlan(t, 80, 2) // 40 chunks
	b := newBucket()
	w, err := e.st.Write(head, "w0", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.store(t, e.st, head, w, false)
	var mu sync.Mutex
	gets, writes := 0, 0
	ended := map[uint64]int{b.revs[head]: 0} // tools ended, by head revision
	get := func(ctx context.Context, key string) ([]byte, uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if key != head {
			gets++
			if gets%11 == 0 && writes < 80 {
				// A writer ends one more tool, from the last on, replacing
				// a chunk the reader has not come to yet.
				i := 79 - writes
				writes++
				e.OnResultSeq(&planbus.ToolResult{ToolID: fmt.Sprintf("t%d", i), Attempt: 1, State: planbus.ToolSucceeded}, uint64(100+i), t0)
				w, err := e.st.Write(head, fmt.Sprintf("w%d", writes), nil)
				if err != nil {
					return nil, 0, err
				}
				b.store(t, e.st, head, w, false)
				ended[b.revs[head]] = writes
			}
		}
		return b.get(ctx, key)
	}
	got, rev, err := ReadStored(context.Background(), head, get)
	if err != nil {
		t.Fatalf("read while written %d times: %v", writes, err)
	}
	done := 0
	for _, tool := range got.Tools {
		if tool.State == planbus.ToolSucceeded {
			done++
		}
	}
	want, ok := ended[rev]
	if len(got.Tools) != 80 || !ok || done != want || writes == 0 || rev == 1 {
		t.Fatalf("%d tools, %d ended, at revision %d after %d writes; want 80 tools, %d ended, a revision the writer stored after the first",
			len(got.Tools), done, rev, writes, want)
	}
}

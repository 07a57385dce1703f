package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// A plan of many tools keeps its state in chunks, so that the write after
// a batch costs what the batch changed, not the whole plan. The state is
// then a head and chunks, all keys of one bucket:
//
//   - the head, under the state's key, is the state without its tools, and
//     names the chunks (Stored.ChunkTools, Stored.Chunks);
//   - chunk k holds tools k·ChunkTools and on, as appendTool writes them,
//     under the key ChunkKey(head, k, id), where id is unique to the write
//     that made it. A chunk's key is never written twice.
//
// A write puts the chunks that changed under new keys, which nothing
// reads yet, then stores the head with compare-and-set: that is the
// commit, and the only key that two writers contend for. The writer that
// loses deletes the chunks it put (nothing names them); the one that wins
// deletes the chunks its head no longer names. A reader reads the head,
// then its chunks, and starts again from the head if a chunk was deleted
// meanwhile. A writer that dies between the two leaves chunks nothing
// names, which expire with the bucket's TTL.
//
// Every chunk is rewritten when the plan ends, so a finished plan's state
// stays whole for as long as its head: a bucket's TTL counts from each
// key's last write.

// DefaultChunkTools is how many tools a chunk holds by default. A state
// is stored in chunks when its plan has more than twice as many tools.
const DefaultChunkTools = 1024

// chunks is where a chunked state is stored.
type chunks struct {
	size  int      // tools a chunk holds; 0: the state is stored whole
	ids   []string // the write id of each chunk as stored ("": never stored)
	dirty []bool   // the chunks changed since they were stored
}

// ChunkBy has a new state stored in chunks of size tools (DefaultChunkTools
// if size ≤ 0) when it has more than twice that many, and whole
// otherwise. Every chunk is to be written.
func (st *State) ChunkBy(size int) {
	if size <= 0 {
		size = DefaultChunkTools
	}
	if len(st.Tools) <= 2*size {
		st.chunks = chunks{}
		return
	}
	n := (len(st.Tools) + size - 1) / size
	st.chunks = chunks{size: size, ids: make([]string, n), dirty: make([]bool, n)}
	st.touchAll()
}

// Chunked reports whether st is stored in chunks.
func (st *State) Chunked() bool { return st.chunks.size > 0 }

// touch marks tool i's chunk as changed.
func (st *State) touch(i int) {
	if st.chunks.size > 0 {
		st.chunks.dirty[i/st.chunks.size] = true
	}
}

// touchAll marks every chunk as changed.
func (st *State) touchAll() {
	for k := range st.chunks.dirty {
		st.chunks.dirty[k] = true
	}
}

// ChunkKey is the key of chunk k of the state stored under head, as
// written by write id.
func ChunkKey(head string, k int, id string) string {
	return head + ".c" + strconv.Itoa(k) + "." + id
}

// KeyValue is a key and the value to put there.
type KeyValue struct {
	Key   string
	Value []byte
}

// StateWrite is what storing a state's changes takes, in this order:
//
//  1. put Chunks (new keys, so nothing reads them yet);
//  2. store Head under the state's key, with compare-and-set (or create);
//  3. if that succeeded, call State.Wrote and delete Superseded; if it
//     was refused (another writer stored first, or the key exists),
//     delete the keys of Chunks instead. After any other error, delete
//     nothing: the head may have been stored.
//
// A state stored whole is just its Head.
type StateWrite struct {
	Chunks     []KeyValue
	Head       []byte
	Superseded []string
	ids        []string // the chunk ids Head names
}

// Write encodes what storing st's changes since it was last stored
// (Wrote) takes, for the state's key head; id names the chunks it writes
// and must be unique to this write (a NUID, say) and a valid key token.
// The head is appended to buf[:0].
func (st *State) Write(head, id string, buf []byte) (*StateWrite, error) {
	if st.chunks.size == 0 {
		b, err := st.AppendStored(buf[:0])
		if err != nil {
			return nil, err
		}
		return &StateWrite{Head: b}, nil
	}
	c := &st.chunks
	w := &StateWrite{ids: make([]string, len(c.ids))}
	for k := range c.ids {
		if !c.dirty[k] && c.ids[k] != "" {
			w.ids[k] = c.ids[k]
			continue
		}
		w.ids[k] = id
		lo, hi := k*c.size, min((k+1)*c.size, len(st.Tools))
		b := make([]byte, 0, 2+24*(hi-lo))
		b = append(b, '[')
		for i := lo; i < hi; i++ {
			sv := st.Tools[i].stored()
			var err error
			if b, err = appendTool(b, i-lo, &sv, st.StartedAt); err != nil {
				return nil, err
			}
		}
		w.Chunks = append(w.Chunks, KeyValue{Key: ChunkKey(head, k, id), Value: append(b, ']')})
		if c.ids[k] != "" {
			w.Superseded = append(w.Superseded, ChunkKey(head, k, c.ids[k]))
		}
	}
	h := Stored{PlanID: st.PlanID, RequestID: st.RequestID, SessionID: st.SessionID, Status: st.Status,
		MaxConcurrency: st.MaxConcurrency, StartedAt: st.StartedAt, Deadline: st.Deadline, WaitingSince: st.WaitingSince, FinishedAt: st.FinishedAt,
		Error: st.Error, Trace: st.Trace, ChunkTools: c.size, Chunks: w.ids}
	b, err := h.appendHead(buf[:0])
	if err != nil {
		return nil, err
	}
	w.Head = append(b, "]}"...)
	return w, nil
}

// Wrote records that w, from st.Write, was stored: its chunks are now
// st's, and none has changed since.
func (st *State) Wrote(w *StateWrite) {
	if st.chunks.size == 0 {
		return
	}
	copy(st.chunks.ids, w.ids)
	clear(st.chunks.dirty)
}

// Getter reads a key of the bucket a state is stored in: its value and
// revision, or a nil value if the key has none. ReadStored calls it from
// several goroutines at once.
type Getter func(ctx context.Context, key string) (value []byte, revision uint64, err error)

// readRounds bounds how often ReadStored starts again from a head that
// moved on while its chunks were read.
const readRounds = 20

// ErrChunkMissing is matched by ReadStored's error when a chunk its head
// names is gone and the head has not moved on: the state is incomplete
// (it expired, or a bucket lost it).
var ErrChunkMissing = errors.New("execution: a chunk of the state is missing")

// ReadStored reads the state stored under key head with get, and for a
// chunked state the chunks its head names: the returned Stored has every
// tool, with its ChunkTools and Chunks as stored. It returns nil if the
// state has no head, and the head's revision.
func ReadStored(ctx context.Context, head string, get Getter) (*Stored, uint64, error) {
	var last uint64
	// A chunk's key is never written twice, so what a round read stays
	// true: a round after a writer moved the head on reads only the chunks
	// that writer replaced, and a big state being written often is read
	// in a few rounds.
	read := map[string][]StoredTool{}
	for range readRounds {
		doc, rev, err := get(ctx, head)
		if err != nil || doc == nil {
			return nil, 0, err
		}
		var s Stored
		if err := json.Unmarshal(doc, &s); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", head, err)
		}
		if len(s.Chunks) == 0 {
			return &s, rev, nil
		}
		if s.ChunkTools < 1 || len(s.Tools) > 0 {
			return nil, 0, fmt.Errorf("%s: a head of %d chunks with chunkTools %d and %d tools of its own", head, len(s.Chunks), s.ChunkTools, len(s.Tools))
		}
		missing, err := readChunks(ctx, head, &s, get, read)
		if err != nil {
			return nil, 0, err
		}
		if missing == "" {
			return &s, rev, nil
		}
		if rev == last {
			return nil, 0, fmt.Errorf("%w: %s, named by revision %d of %s", ErrChunkMissing, missing, rev, head)
		}
		last = rev // a writer replaced the chunk: read the new head
	}
	return nil, 0, fmt.Errorf("execution: %s changed %d times while it was read", head, readRounds)
}

// chunkReaders bounds the chunks read at once: each read is a round trip
// to the server (to a replica of a cluster), and a plan of 50,000 tools
// has 49 of them.
var chunkReaders = 8 // a variable for tests

// readChunks reads the chunks s names into s.Tools, up to chunkReaders at
// once, or returns the key of the first that is gone. Chunks in read, by
// key, are not read again; those read are added to it.
func readChunks(ctx context.Context, head string, s *Stored, get Getter, read map[string][]StoredTool) (missing string, err error) {
	parts := make([][]StoredTool, len(s.Chunks))
	errs := make([]error, len(s.Chunks))
	gone := make([]bool, len(s.Chunks))
	var g errgroup.Group // each read keeps its own outcome, for the order below
	g.SetLimit(chunkReaders)
	// bad is the first chunk found gone or refused so far: chunks after it
	// cannot change the answer, so they are not read.
	var bad atomic.Int64
	bad.Store(int64(len(s.Chunks)))
	for k, id := range s.Chunks {
		if int64(k) > bad.Load() {
			break
		}
		key := ChunkKey(head, k, id)
		if tools, ok := read[key]; ok {
			parts[k] = tools
			continue
		}
		g.Go(func() error {
			doc, _, err := get(ctx, key)
			switch {
			case err != nil:
				errs[k] = err
			case doc == nil:
				gone[k] = true
			default:
				parts[k], errs[k] = readChunk(key, doc, k, s)
			}
			if gone[k] || errs[k] != nil {
				for b := bad.Load(); int64(k) < b && !bad.CompareAndSwap(b, int64(k)); b = bad.Load() {
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	for k, tools := range parts {
		if tools != nil {
			read[ChunkKey(head, k, s.Chunks[k])] = tools
		}
	}
	// As if read in order: the first chunk gone or refused is the answer.
	for k := range s.Chunks {
		if gone[k] {
			return ChunkKey(head, k, s.Chunks[k]), nil
		}
		if errs[k] != nil {
			return "", errs[k]
		}
	}
	n := 0
	for _, tools := range parts {
		n += len(tools)
	}
	s.Tools = make([]StoredTool, 0, n)
	for _, tools := range parts {
		s.Tools = append(s.Tools, tools...)
	}
	return "", nil
}

// readChunk decodes chunk k of s, stored under key, and checks it holds
// as many tools as its place says.
func readChunk(key string, doc []byte, k int, s *Stored) ([]StoredTool, error) {
	tools, err := decodeChunk(doc, k*s.ChunkTools, s.StartedAt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if n := len(tools); n > s.ChunkTools || n == 0 || (n < s.ChunkTools && k < len(s.Chunks)-1) {
		return nil, fmt.Errorf("%s: %d tools, chunk %d of %d holds %d", key, n, k, len(s.Chunks), s.ChunkTools)
	}
	return tools, nil
}

package execution

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/planbus/planbus"
)

// A StoredTool is written as a short array, so the state of a plan of a
// thousand tools stays small enough to rewrite on every batch:
//
//	[code, attempt, result sequence, time, reason?, error?]
//
// code is one letter per state (stateCodes), or for a pending tool a
// person approved "y", for a succeeded tool that reused an earlier result
// "u"; time is in ms since the plan started (negative for a reused
// result's), or null when there is none; reason and error appear only
// when set.
var stateCodes = map[planbus.ToolState]string{
	planbus.ToolPending: "p", planbus.ToolRunning: "r", planbus.ToolRetrying: "w", planbus.ToolSucceeded: "s",
	planbus.ToolFailed: "f", planbus.ToolTimeout: "t", planbus.ToolSkipped: "k", planbus.ToolCancelled: "c",
	planbus.ToolWaitingApproval: "a",
}

// Codes of a state with a flag.
const (
	codeApproved = "y" // pending, Approved
	codeReused   = "u" // succeeded, Reused
)

var codeStates = func() map[string]planbus.ToolState {
	m := map[string]planbus.ToolState{}
	for s, c := range stateCodes {
		m[c] = s
	}
	return m
}()

// MarshalJSON writes the tools as arrays, times relative to StartedAt.
func (s *Stored) MarshalJSON() ([]byte, error) {
	b, err := s.appendHead(make([]byte, 0, 128+24*len(s.Tools)))
	if err != nil {
		return nil, err
	}
	for i := range s.Tools {
		if b, err = appendTool(b, i, &s.Tools[i], s.StartedAt); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// AppendStored appends st's stored form, as st.Store().MarshalJSON()
// writes it, to b, without building the Stored value: a dispatcher writes
// it after every batch, and for a plan of tens of thousands of tools the
// intermediate copy and its garbage cost more than the encoding.
func (st *State) AppendStored(b []byte) ([]byte, error) {
	head := Stored{PlanID: st.PlanID, RequestID: st.RequestID, SessionID: st.SessionID, Status: st.Status,
		MaxConcurrency: st.MaxConcurrency, StartedAt: st.StartedAt, Deadline: st.Deadline, WaitingSince: st.WaitingSince, FinishedAt: st.FinishedAt,
		Error: st.Error, GateSteps: st.GateSteps, Trace: st.Trace}
	b, err := head.appendHead(b)
	if err != nil {
		return nil, err
	}
	for i := range st.Tools {
		sv := st.Tools[i].stored()
		if b, err = appendTool(b, i, &sv, st.StartedAt); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// appendHead appends everything of s but its tools, and opens the tools'
// array.
func (s *Stored) appendHead(b []byte) ([]byte, error) {
	type head Stored // without the methods: Tools are not in it
	hb, err := json.Marshal(head(*s))
	if err != nil {
		return nil, err
	}
	b = append(b, hb[:len(hb)-1]...) // reopen the object
	if len(hb) > 2 {
		b = append(b, ',')
	}
	return append(b, `"tools":[`...), nil
}

// appendTool appends tool i as its short array.
func appendTool(b []byte, i int, t *StoredTool, startedAt int64) ([]byte, error) {
	if i > 0 {
		b = append(b, ',')
	}
	code := stateCode(t.State)
	if code == "" {
		return nil, fmt.Errorf("execution: unknown tool state %q", t.State)
	}
	switch {
	case t.Approved && t.State == planbus.ToolPending:
		code = codeApproved
	case t.Reused && t.State == planbus.ToolSucceeded:
		code = codeReused
	}
	b = append(b, `["`...)
	b = append(b, code...)
	b = append(b, `",`...)
	b = strconv.AppendInt(b, int64(t.Attempt), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, t.Result, 10)
	b = append(b, ',')
	if t.At == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, t.At-startedAt, 10)
	}
	if t.Reason != "" || t.Error != nil {
		b = append(b, ',')
		b = strconv.AppendQuote(b, string(t.Reason))
	}
	if t.Error != nil {
		e, err := json.Marshal(t.Error)
		if err != nil {
			return nil, err
		}
		b = append(b, ',')
		b = append(b, e...)
	}
	return append(b, ']'), nil
}

// stateCode is stateCodes[state] without hashing the string: it runs for
// every tool of a plan on every write.
func stateCode(state planbus.ToolState) string {
	switch state {
	case planbus.ToolPending:
		return "p"
	case planbus.ToolRunning:
		return "r"
	case planbus.ToolRetrying:
		return "w"
	case planbus.ToolSucceeded:
		return "s"
	case planbus.ToolFailed:
		return "f"
	case planbus.ToolTimeout:
		return "t"
	case planbus.ToolSkipped:
		return "k"
	case planbus.ToolCancelled:
		return "c"
	case planbus.ToolWaitingApproval:
		return "a"
	}
	return ""
}

// UnmarshalJSON reads what MarshalJSON writes, and a chunked state's
// head (whose tools are in its chunks).
func (s *Stored) UnmarshalJSON(data []byte) error {
	type head Stored
	var h struct {
		head
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return err
	}
	*s = Stored(h.head)
	if len(h.Tools) == 0 {
		s.Tools = []StoredTool{}
		return nil
	}
	tools, err := decodeChunk(h.Tools, 0, s.StartedAt)
	if err != nil {
		return err
	}
	s.Tools = tools
	return nil
}

// decodeTools reads tools written by appendTool; first is the index of
// the first of them in the plan, for errors.
func decodeTools(rows [][]json.RawMessage, first int, startedAt int64) ([]StoredTool, error) {
	tools := make([]StoredTool, len(rows))
	for j, row := range rows {
		if err := decodeTool(row, first+j, startedAt, &tools[j]); err != nil {
			return nil, err
		}
	}
	return tools, nil
}

// setCode sets t's state, and its Approved or Reused flag, from its
// stored code; false for a code that names no state.
func (t *StoredTool) setCode(code string) bool {
	switch code {
	case codeApproved:
		code, t.Approved = stateCodes[planbus.ToolPending], true
	case codeReused:
		code, t.Reused = stateCodes[planbus.ToolSucceeded], true
	}
	state, ok := codeStates[code]
	t.State = state
	return ok
}

// decodeTool reads tool i from the fields of its array.
func decodeTool(row []json.RawMessage, i int, startedAt int64, t *StoredTool) error {
	if len(row) < 4 {
		return fmt.Errorf("execution: stored tool %d: %d fields, want at least 4", i, len(row))
	}
	var code string
	if err := json.Unmarshal(row[0], &code); err != nil {
		return fmt.Errorf("execution: stored tool %d: %w", i, err)
	}
	if !t.setCode(code) {
		return fmt.Errorf("execution: stored tool %d: unknown state code %q", i, code)
	}
	var at *int64
	for k, dst := range []any{&t.Attempt, &t.Result, &at} {
		if err := json.Unmarshal(row[k+1], dst); err != nil {
			return fmt.Errorf("execution: stored tool %d: %w", i, err)
		}
	}
	if at != nil {
		t.At = startedAt + *at
	}
	if len(row) > 4 {
		if err := json.Unmarshal(row[4], &t.Reason); err != nil {
			return fmt.Errorf("execution: stored tool %d: %w", i, err)
		}
	}
	if len(row) > 5 {
		t.Error = &planbus.ErrorInfo{}
		if err := json.Unmarshal(row[5], t.Error); err != nil {
			return fmt.Errorf("execution: stored tool %d: %w", i, err)
		}
	}
	return nil
}

// decodeChunk reads a chunk's tools, an array of the arrays appendTool
// writes; first is the index of its first tool in the plan. It walks the
// array with the JSON v2 tokenizer and reads each row as parseRow does,
// the rows it cannot (a reason, an error) and the whole chunk when the
// tokenizer refuses it (invalid UTF-8, duplicate names) as encoding/json
// does: the same tools and the same refusals as decodeTools, several times
// faster (a dispatcher reads every chunk when it rebuilds a plan's engine,
// 49 of them for 50,000 tools).
func decodeChunk(doc []byte, first int, startedAt int64) ([]StoredTool, error) {
	if tools, ok := decodeChunkFast(doc, first, startedAt); ok {
		return tools, nil
	}
	return decodeChunkSlow(doc, first, startedAt)
}

// decodeChunkSlow reads a chunk with encoding/json throughout, as chunks
// were read before decodeChunk's walk.
func decodeChunkSlow(doc []byte, first int, startedAt int64) ([]StoredTool, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(doc, &rows); err != nil {
		return nil, err
	}
	return decodeTools(rows, first, startedAt)
}

// decodeChunkFast is decodeChunk's walk; ok is false when it cannot vouch
// for its reading, an error included (decodeChunk then reads the chunk
// the general way, which names it).
func decodeChunkFast(doc []byte, first int, startedAt int64) ([]StoredTool, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, false
	}
	tools := make([]StoredTool, 0, bytes.Count(doc, []byte("],["))+1)
	for dec.PeekKind() != ']' {
		row, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		tools = append(tools, StoredTool{})
		t := &tools[len(tools)-1]
		if parseRow(row, startedAt, t) {
			continue
		}
		var fields []json.RawMessage
		if json.Unmarshal(row, &fields) != nil || decodeTool(fields, first+len(tools)-1, startedAt, t) != nil {
			return nil, false
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false // more after the array
	}
	return tools, true
}

// parseRow reads a row in the form appendTool writes for a tool with no
// reason and no error, ["c",attempt,result,time|null] with no spaces, into
// t as decodeTool would; it returns false for any other row.
func parseRow(row []byte, startedAt int64, t *StoredTool) bool {
	if len(row) < len(`["s",0,0,0]`) || row[0] != '[' || row[1] != '"' || row[3] != '"' || row[4] != ',' || row[len(row)-1] != ']' {
		return false
	}
	if !t.setCode(string(row[2:3])) {
		return false
	}
	attemptField, rest, ok1 := bytes.Cut(row[5:len(row)-1], []byte{','})
	resultField, atField, ok2 := bytes.Cut(rest, []byte{','})
	if !ok1 || !ok2 || bytes.IndexByte(atField, ',') >= 0 {
		return false
	}
	attempt, ok := jsonInt(attemptField)
	if !ok || attempt != int64(int(attempt)) {
		return false
	}
	if len(resultField) == 0 || resultField[0] == '-' {
		return false
	}
	result, ok := jsonInt(resultField)
	if !ok {
		return false
	}
	t.Attempt, t.Result = int(attempt), uint64(result)
	if string(atField) != "null" {
		at, ok := jsonInt(atField)
		if !ok {
			return false
		}
		t.At = startedAt + at
	}
	return true
}

// jsonInt reads a JSON integer that fits an int64: an optional minus, then
// 0 or digits without a leading zero.
func jsonInt(b []byte) (int64, bool) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) > 18 { // past what 18 digits cannot overflow
		var err error
		if n, err = strconv.ParseInt(string(b), 10, 64); err != nil {
			return 0, false
		}
		return n, true
	}
	if b[0] == '-' {
		n = -n
	}
	return n, true
}

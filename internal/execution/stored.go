package execution

import (
	"fmt"
	"slices"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/gate"
	"github.com/planbus/planbus/internal/plan"
)

// Stored is the form of State kept in KV: everything the engine needs to
// carry on, and for each tool with a result, the RESULTS stream sequence of
// that result instead of its output. Writing it costs a few dozen bytes a
// tool however large the outputs are, and the results are already durable
// in their stream.
type Stored struct {
	PlanID         string             `json:"planId"`
	RequestID      string             `json:"requestId"`
	SessionID      string             `json:"sessionId,omitempty"`
	Status         planbus.PlanState  `json:"status"`
	MaxConcurrency int                `json:"maxConcurrency"`
	StartedAt      int64              `json:"startedAt"`
	Deadline       int64              `json:"deadline"`
	WaitingSince   int64              `json:"waitingSince,omitempty"`
	FinishedAt     int64              `json:"finishedAt,omitempty"`
	Error          *planbus.ErrorInfo `json:"error,omitempty"`
	// GateSteps is State.GateSteps.
	GateSteps int64 `json:"gateSteps,omitempty"`
	// Tools are written last, under "tools", compactly (see
	// storedjson.go); in a chunked state's head the array is empty and the
	// tools are in its chunks.
	Tools []StoredTool `json:"-"`
	// Trace is State.Trace.
	Trace map[string]string `json:"trace,omitempty"`
	// ChunkTools and Chunks are set in the head of a state stored in
	// chunks (see chunks.go): the tools each chunk holds, and the write id
	// each chunk is stored under.
	ChunkTools int      `json:"chunkTools,omitempty"`
	Chunks     []string `json:"chunks,omitempty"`
}

// StoredTool is one tool in Stored, in plan order.
type StoredTool struct {
	State   planbus.ToolState
	Attempt int
	// Result is the RESULTS stream sequence of the result that set State.
	Result uint64
	// At is when the running attempt was released, when a retry is due,
	// or when the tool ended (Unix ms).
	At     int64
	Reason planbus.Reason
	// Error is kept for tools that ended without a result of their own
	// (cancelled by a plan timeout, rejected), and for those whose gate
	// refused their result (the verdict, so that no gate runs again when
	// the state is read back).
	Error *planbus.ErrorInfo
	// Approved is kept for pending tools: one a person approved.
	Approved bool
	// Reused is kept for succeeded tools: one that took an earlier
	// plan's result (Result) instead of running.
	Reused bool
}

// Store returns the stored form of st.
func (st *State) Store() *Stored {
	s := &Stored{PlanID: st.PlanID, RequestID: st.RequestID, SessionID: st.SessionID, Status: st.Status,
		MaxConcurrency: st.MaxConcurrency, StartedAt: st.StartedAt, Deadline: st.Deadline, WaitingSince: st.WaitingSince, FinishedAt: st.FinishedAt,
		Error: st.Error, GateSteps: st.GateSteps, Tools: make([]StoredTool, len(st.Tools)), Trace: st.Trace}
	for i := range st.Tools {
		s.Tools[i] = st.Tools[i].stored()
	}
	return s
}

// stored is the tool's part of Stored.
func (t *ToolState) stored() StoredTool {
	sv := StoredTool{State: t.State, Attempt: t.Attempt, Result: t.ResultSeq, Reason: t.Reason,
		Approved: t.Approved && t.State == planbus.ToolPending, Reused: t.Reused && t.State == planbus.ToolSucceeded}
	switch {
	case t.State == planbus.ToolRetrying:
		sv.At = t.RetryAt
	case t.State == planbus.ToolRunning:
		sv.At = t.ReleasedAt
	default:
		sv.At = t.FinishedAt
	}
	if t.ResultSeq == 0 || t.Refused {
		sv.Error = t.Error
	}
	return sv
}

// Load rebuilds a State from its stored form and the plan (a chunked
// one as ReadStored returns it, with its tools). The details
// that live in results (outputs, errors, workers, times) are filled in by
// result, called for every tool with a Result sequence; it may return nil
// for a result that is gone, leaving those details empty. A result is
// taken as the engine applied it: an output its gate refused has the
// stored verdict (VERIFY_FAILED) as its error; no gate runs again, except
// for a state stored before verdicts were (a failed tool whose result
// succeeded, without an error).
func Load(p *plan.Plan, s *Stored, result func(seq uint64) (*planbus.ToolResult, error)) (*State, error) {
	if len(s.Tools) != len(p.Tools) {
		return nil, fmt.Errorf("execution: plan %s: state has %d tools, plan has %d", p.PlanID, len(s.Tools), len(p.Tools))
	}
	st := &State{PlanID: s.PlanID, RequestID: s.RequestID, SessionID: s.SessionID, Status: s.Status,
		MaxConcurrency: s.MaxConcurrency, StartedAt: s.StartedAt, Deadline: s.Deadline, WaitingSince: s.WaitingSince, FinishedAt: s.FinishedAt,
		Error: s.Error, GateSteps: s.GateSteps, Tools: make([]ToolState, len(s.Tools)), Trace: s.Trace}
	if s.ChunkTools > 0 {
		st.chunks = chunks{size: s.ChunkTools, ids: slices.Clone(s.Chunks), dirty: make([]bool, len(s.Chunks))}
	}
	for i, sv := range s.Tools {
		t := ToolState{ID: p.Tools[i].ToolID, State: sv.State, Attempt: sv.Attempt, ResultSeq: sv.Result, Reason: sv.Reason, Error: sv.Error,
			Approved: sv.Approved, Reused: sv.Reused}
		switch sv.State {
		case planbus.ToolRetrying:
			t.RetryAt = sv.At
		case planbus.ToolRunning:
			t.ReleasedAt = sv.At
		default:
			t.FinishedAt = sv.At
		}
		if sv.Result > 0 {
			r, err := result(sv.Result)
			if err != nil {
				return nil, err
			}
			if r != nil {
				t.setResult(r)
				switch {
				case sv.Error != nil:
					t.Error, t.Refused = sv.Error, true
				case r.State == planbus.ToolSucceeded && sv.State != planbus.ToolSucceeded && sv.State != planbus.ToolRunning:
					// Stored before verdicts were: the gate refused it.
					if out, ok, _ := gate.VerifyResult(*r, p.Tools[i].Gate(max(r.Attempt, 1)), gate.DefaultSteps); !ok {
						t.Error, t.Refused = out.Error, true
					}
				}
			}
		}
		st.Tools[i] = t
	}
	return st, nil
}

// setResult copies a result's details into the tool's state.
func (t *ToolState) setResult(r *planbus.ToolResult) {
	t.Output, t.Error, t.WorkerID, t.DurationMs = r.Output, r.Error, r.WorkerID, r.DurationMs
	if !r.StartedAt.IsZero() {
		t.StartedAt = r.StartedAt.UnixMilli()
	}
}

package plannercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/cli"
	"github.com/planbus/planbus/internal/execution"
	"github.com/planbus/planbus/internal/plan"
)

const statusUsage = `Usage: planner status --nats-url URL ID

Shows a plan (by planId) or a request (by requestId) as the system has it
now: a request's loop and attempts, a plan's state and every tool's state,
attempt and time. An ID that is neither names a session: its GOAP agent is
shown as 'planner agent status' shows it. --json prints the stored
documents (an agent's status) instead.`

// plannerStatus reads a plan's or a request's state from KV.
func plannerStatus(ctx context.Context, args []string, io cli.IO) int {
	var c common
	var asJSON bool
	f := cli.NewFlags("planner status", io.Stderr, io.Env, statusUsage)
	c.Register(f, cli.AsClient)
	c.RegisterClient(f)
	f.Bool(&asJSON, "json", "", false, "print the stored JSON documents")
	if err := f.Parse(args); err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	if f.NArg() != 1 || !plan.ValidID(f.Arg(0)) {
		fmt.Fprintln(io.Stderr, "planner status: want one plan or request id"+f.LateFlags())
		return cli.ExitUsage
	}
	if c.Bus.URL == "" {
		fmt.Fprintln(io.Stderr, "planner status: --nats-url (or $NATS_URL) is required: status reads a running system (planner serve listens on nats://127.0.0.1:4222; --nats-url goes before the id)")
		return cli.ExitUsage
	}
	log, err := c.Logger(io.Stderr)
	if err != nil {
		return cli.UsageErr(io.Stderr, err)
	}
	conn, err := c.dialAsClient(ctx, log)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner status: %v\n", err)
		return cli.ExitFailed
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	id := f.Arg(0)
	found := false
	planID := id
	if req, err := kvGet(ctx, conn, bus.BucketRequests, id); err != nil {
		fmt.Fprintf(io.Stderr, "planner status: %v\n", err)
		return cli.ExitFailed
	} else if req != nil {
		found = true
		if asJSON {
			fmt.Fprintln(io.Stdout, string(req))
		} else if pid := printRequest(io.Stdout, id, req); pid != "" {
			planID = pid
		}
	}
	state, err := planState(ctx, conn, planID)
	if err != nil {
		fmt.Fprintf(io.Stderr, "planner status: %v\n", err)
		return cli.ExitFailed
	}
	if state != nil {
		found = true
		if asJSON {
			// A state stored in chunks is printed whole, as a smaller
			// plan's is stored.
			state.ChunkTools, state.Chunks = 0, nil
			doc, err := json.Marshal(state)
			if err != nil {
				fmt.Fprintf(io.Stderr, "planner status: %v\n", err)
				return cli.ExitFailed
			}
			fmt.Fprintln(io.Stdout, string(doc))
		} else if err := printPlan(ctx, conn, io.Stdout, planID, state); err != nil {
			fmt.Fprintf(io.Stderr, "planner status: %v\n", err)
			return cli.ExitFailed
		}
	}
	if !found {
		// A session id: its agent, if it has one.
		if code, ok := statusOfAgent(ctx, conn, io, id, asJSON); ok {
			return code
		}
		fmt.Fprintf(io.Stderr, "planner status: no plan or request %q (they are kept for a day), and no session of that id has an agent\n", id)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func kvGet(ctx context.Context, conn *bus.Conn, bucket, key string) ([]byte, error) {
	kv, err := conn.JS.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", bucket, key, err)
	}
	return e.Value(), nil
}

// printRequest summarises a request's loop and returns the plan of its
// latest attempt.
func printRequest(w io.Writer, id string, doc []byte) string {
	var l struct {
		Request struct {
			Kind      string `json:"kind"`
			SessionID string `json:"sessionId"`
		} `json:"request"`
		Status   string   `json:"status"`
		Attempt  int      `json:"attempt"`
		PlanID   string   `json:"planId"`
		Disabled []string `json:"disabledSkills"`
		History  []struct {
			Attempt int                `json:"attempt"`
			PlanID  string             `json:"planId"`
			State   string             `json:"state"`
			Error   *planbus.ErrorInfo `json:"error"`
		} `json:"history"`
		Outcome *struct {
			Status    string `json:"status"`
			Narrative string `json:"narrative"`
		} `json:"outcome"`
		Updated time.Time `json:"updatedAt"`
	}
	if err := json.Unmarshal(doc, &l); err != nil {
		fmt.Fprintf(w, "request %s: unreadable loop state: %v\n", id, err)
		return ""
	}
	status := l.Status
	if l.Outcome != nil {
		status = l.Outcome.Status
	}
	fmt.Fprintf(w, "request %s (%s, session %s): %s, attempt %d, updated %s\n", id, l.Request.Kind, l.Request.SessionID,
		status, l.Attempt, l.Updated.Local().Format(time.DateTime))
	if len(l.Disabled) > 0 {
		fmt.Fprintf(w, "  disabled skills: %s\n", strings.Join(l.Disabled, ", "))
	}
	for _, a := range l.History {
		line := fmt.Sprintf("  attempt %d: %s", a.Attempt, a.State)
		if a.PlanID != "" {
			line += " (plan " + a.PlanID + ")"
		}
		if a.Error != nil {
			line += ": " + string(a.Error.Code) + " " + a.Error.Message
		}
		fmt.Fprintln(w, line)
	}
	if l.Outcome != nil && l.Outcome.Narrative != "" {
		fmt.Fprintf(w, "  fallback: %s\n", l.Outcome.Narrative)
	}
	fmt.Fprintln(w)
	return l.PlanID
}

// planState reads a plan's stored state, with its chunks; nil if it has
// none.
func planState(ctx context.Context, conn *bus.Conn, planID string) (*execution.Stored, error) {
	kv, err := conn.JS.KeyValue(ctx, bus.BucketPlans)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bus.BucketPlans, err)
	}
	st, _, err := execution.ReadStored(ctx, bus.StateKey(planID), bus.KVRead(kv))
	if err != nil {
		return nil, fmt.Errorf("state of plan %s: %w", planID, err)
	}
	return st, nil
}

// printPlan shows a plan's state as a table of its tools.
func printPlan(ctx context.Context, conn *bus.Conn, w io.Writer, planID string, st *execution.Stored) error {
	pdoc, err := kvGet(ctx, conn, bus.BucketPlans, bus.PlanKey(planID))
	if err != nil || pdoc == nil {
		return fmt.Errorf("plan %s: its definition is missing (%v)", planID, err)
	}
	p, err := plan.Decode(pdoc)
	if err != nil {
		return fmt.Errorf("plan %s: %w", planID, err)
	}
	if len(p.Tools) != len(st.Tools) {
		return fmt.Errorf("plan %s has %d tools, its state %d", planID, len(p.Tools), len(st.Tools))
	}
	started := time.UnixMilli(st.StartedAt)
	line := fmt.Sprintf("plan %s (request %s): %s, started %s", planID, st.RequestID, st.Status, started.Local().Format(time.DateTime))
	if st.FinishedAt > 0 {
		line += fmt.Sprintf(", took %s", time.Duration(st.FinishedAt-st.StartedAt)*time.Millisecond)
	}
	fmt.Fprintln(w, line)
	if st.Error != nil {
		fmt.Fprintf(w, "  %s: %s\n", st.Error.Code, st.Error.Message)
	}
	counts := map[planbus.ToolState]int{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOOL\tSKILL\tSTATE\tATTEMPT\tAT\tNOTE")
	for i, t := range st.Tools {
		counts[t.State]++
		at := ""
		if t.At > 0 {
			at = "+" + (time.Duration(t.At-st.StartedAt) * time.Millisecond).String()
		}
		note := string(t.Reason)
		switch {
		case t.Error != nil:
			note = string(t.Error.Code)
		case t.Reused:
			note = "reused"
		case t.State == planbus.ToolWaitingApproval && p.Tools[i].Approval != nil:
			note = fmt.Sprintf("%q: planner approve %s %s", p.Tools[i].Approval.Prompt, st.RequestID, p.Tools[i].ToolID)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", p.Tools[i].ToolID, p.Tools[i].Skill, t.State, t.Attempt, at, note)
	}
	_ = tw.Flush()
	var parts []string
	for _, s := range []planbus.ToolState{planbus.ToolSucceeded, planbus.ToolRunning, planbus.ToolRetrying, planbus.ToolWaitingApproval, planbus.ToolPending, planbus.ToolFailed,
		planbus.ToolTimeout, planbus.ToolSkipped, planbus.ToolCancelled} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(parts, ", "))
	return nil
}

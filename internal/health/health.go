package health

import "github.com/planbus/planbus"

// Health states of a skill.
const (
	Healthy          = "healthy"
	Degraded         = "degraded"
	TemporaryFailure = "temporaryFailure"
	PermanentFailure = "permanentFailure"
)

// FailuresToDegrade and FailuresToDisable are the consecutive failures that
// move a healthy skill to degraded and a degraded one to permanentFailure.
const (
	FailuresToDegrade = 3
	FailuresToDisable = 3
)

// DegradedTimeoutFactor multiplies the timeout of calls to a degraded skill
// in the hope that a slow skill still answers.
const DegradedTimeoutFactor = 2

// Record is a skill's health within one session, as stored in KV.
type Record struct {
	Skill string `json:"skill"`
	State string `json:"state"`
	// Failures counts consecutive failures in the current state.
	Failures int `json:"failures"`
	// LastError is the error of the last failure.
	LastError string `json:"lastError,omitempty"`
	// Seen holds the idempotency keys of the last results applied, so a
	// result handled twice changes nothing the second time.
	Seen []string `json:"seen,omitempty"`
}

// Outcome is what one tool attempt tells about its skill.
type Outcome struct {
	Key       string // the attempt's idempotency key
	Succeeded bool
	// Category of the error when it failed.
	Category planbus.Category
	Error    string
	// Retry: the attempt was a retry (attempt > 1).
	Retry bool
	// Final: the attempt failed and no retry is left.
	Final bool
}

// Usable reports whether planners may select the skill.
func (h Record) Usable() bool { return h.State != PermanentFailure }

// Apply returns the health after an outcome, following this table:
//
//	healthy          --timeout/network error-->   temporaryFailure
//	healthy          --3 consecutive failures-->  degraded
//	degraded         --success-->                 healthy
//	degraded         --3 more failures-->         permanentFailure
//	temporaryFailure --retry success-->           healthy
//	temporaryFailure --max retries exceeded-->    permanentFailure
//	permanentFailure --session restart-->         healthy (see Reset)
//
// Cases the table leaves open: a success that is not a retry also heals a
// temporarily failed skill (the skill works); a failure in temporaryFailure
// with retries left keeps it there; other failures in healthy count toward
// degraded. An outcome whose key was applied before changes nothing.
func (h Record) Apply(o Outcome) Record {
	if h.State == "" {
		h.State = Healthy
	}
	for _, k := range h.Seen {
		if k == o.Key && o.Key != "" {
			return h
		}
	}
	if o.Key != "" {
		h.Seen = append(h.Seen, o.Key)
		if len(h.Seen) > 16 {
			h.Seen = h.Seen[len(h.Seen)-16:]
		}
	}
	if o.Succeeded {
		switch h.State {
		case Degraded, TemporaryFailure:
			h.State = Healthy
		}
		if h.State == Healthy {
			h.Failures, h.LastError = 0, ""
		}
		return h
	}
	h.LastError = o.Error
	switch h.State {
	case Healthy:
		if o.Category == planbus.CategoryTimeout || o.Category == planbus.CategoryNetwork {
			h.State, h.Failures = TemporaryFailure, 0
			if o.Final {
				// The error both moved it and exhausted the retries.
				h.State = PermanentFailure
			}
			return h
		}
		h.Failures++
		if h.Failures >= FailuresToDegrade {
			h.State, h.Failures = Degraded, 0
		}
	case Degraded:
		h.Failures++
		if h.Failures >= FailuresToDisable {
			h.State, h.Failures = PermanentFailure, 0
		}
	case TemporaryFailure:
		if o.Final {
			h.State, h.Failures = PermanentFailure, 0
		}
	}
	return h
}

// Reset is the "session restart" edge: every state back to healthy.
func (h Record) Reset() Record {
	return Record{Skill: h.Skill, State: Healthy}
}

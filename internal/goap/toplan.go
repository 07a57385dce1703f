package goap

import (
	"encoding/json"
	"fmt"

	"github.com/planbus/planbus/internal/plan"
)

// Metadata is what ToPlan records under the plan's metadata key "goap".
type Metadata struct {
	Domain string         `json:"domain"`
	Goal   string         `json:"goal"`
	Cost   float64        `json:"cost"`
	Start  State          `json:"start"`
	Steps  []StepMetadata `json:"steps"`
}

// StepMetadata is one step of Metadata.
type StepMetadata struct {
	Tool   string  `json:"tool"`
	Action string  `json:"action"`
	Cost   float64 `json:"cost"`
	// State is the predicted state after the step.
	State State `json:"state"`
}

// ToolID is the toolId ToPlan gives step i (0-based) of a plan: "1-chop".
func ToolID(i int, action string) string { return fmt.Sprintf("%d-%s", i+1, action) }

// ToPlan turns a plan result into Plan JSON: one tool per step, each
// depending on the one before (the steps' predicted states follow each
// other), with the action's skill, its expanded input and, as
// description, the action's description or name. The plan's metadata
// holds a Metadata under "goap". The plan is decoded with plan.Decode, so
// it is valid; an error means a result that did not come from Plan.
func ToPlan(r *Result) (*plan.Plan, error) {
	type tool struct {
		ToolID       string          `json:"toolId"`
		Skill        string          `json:"skill"`
		Description  string          `json:"description"`
		Input        json.RawMessage `json:"input"`
		Dependencies []string        `json:"dependencies"`
	}
	meta := Metadata{Domain: r.Domain, Goal: r.Goal, Cost: r.Cost, Start: r.Start, Steps: []StepMetadata{}}
	tools := []tool{}
	prev := ""
	for i, s := range r.Steps {
		id := ToolID(i, s.Action)
		deps := []string{}
		if prev != "" {
			deps = append(deps, prev)
		}
		input := s.Input
		if input == nil {
			input = json.RawMessage(`{}`)
		}
		tools = append(tools, tool{ToolID: id, Skill: s.Skill, Description: s.Description, Input: input, Dependencies: deps})
		meta.Steps = append(meta.Steps, StepMetadata{Tool: id, Action: s.Action, Cost: s.Cost, State: s.State})
		prev = id
	}
	doc, err := json.Marshal(map[string]any{
		"description": fmt.Sprintf("goap %s: goal %s", r.Domain, r.Goal),
		"tools":       tools,
		"metadata":    map[string]any{"goap": meta},
	})
	if err != nil {
		return nil, fmt.Errorf("goap: plan for goal %s: %w", r.Goal, err)
	}
	p, err := plan.Decode(doc)
	if err != nil {
		return nil, fmt.Errorf("goap: plan for goal %s: %w", r.Goal, err)
	}
	return p, nil
}

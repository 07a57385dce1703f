package plan

import (
	"slices"

	"github.com/planbus/planbus"
)

// The messages of the bus are defined in the public package planbus;
// these aliases keep the names the machinery uses.
type (
	ErrorInfo       = planbus.ErrorInfo
	ToolCall        = planbus.ToolCall
	ToolResult      = planbus.ToolResult
	Cancel          = planbus.Cancel
	ToolOutcome     = planbus.ToolOutcome
	ExecutionResult = planbus.ExecutionResult
	Event           = planbus.Event
)

const (
	CategoryTimeout        = planbus.CategoryTimeout
	CategoryNetwork        = planbus.CategoryNetwork
	CategoryTransient      = planbus.CategoryTransient
	CategoryInvalidInput   = planbus.CategoryInvalidInput
	CategoryPermanent      = planbus.CategoryPermanent
	CategoryInternal       = planbus.CategoryInternal
	CategoryCancelled      = planbus.CategoryCancelled
	CategoryDependency     = planbus.CategoryDependency
	CodeToolTimeout        = planbus.CodeToolTimeout
	CodeToolFailed         = planbus.CodeToolFailed
	CodePlanTimeout        = planbus.CodePlanTimeout
	CodeInvalidPlan        = planbus.CodeInvalidPlan
	CodeInvalidInput       = planbus.CodeInvalidInput
	CodeUnknownSkill       = planbus.CodeUnknownSkill
	CodeWorkerCrash        = planbus.CodeWorkerCrash
	CodeToolPanic          = planbus.CodeToolPanic
	CodeCancelled          = planbus.CodeCancelled
	CodeRequiredTools      = planbus.CodeRequiredTools
	CodeVerifyFailed       = planbus.CodeVerifyFailed
	CodeRejected           = planbus.CodeRejected
	ToolWaitingApproval    = planbus.ToolWaitingApproval
	EventToolWaiting       = planbus.EventToolWaiting
	EventToolApproved      = planbus.EventToolApproved
	EventToolRejected      = planbus.EventToolRejected
	EventToolReused        = planbus.EventToolReused
	ToolPending            = planbus.ToolPending
	ToolRunning            = planbus.ToolRunning
	ToolRetrying           = planbus.ToolRetrying
	ToolSucceeded          = planbus.ToolSucceeded
	ToolFailed             = planbus.ToolFailed
	ToolTimeout            = planbus.ToolTimeout
	ToolSkipped            = planbus.ToolSkipped
	ToolCancelled          = planbus.ToolCancelled
	PlanRunning            = planbus.PlanRunning
	PlanSucceeded          = planbus.PlanSucceeded
	PlanFailed             = planbus.PlanFailed
	PlanTimeout            = planbus.PlanTimeout
	PlanRejected           = planbus.PlanRejected
	PlanCancelled          = planbus.PlanCancelled
	ReasonDependencyFailed = planbus.ReasonDependencyFailed
	ReasonPlanFailed       = planbus.ReasonPlanFailed
	ReasonPlanTimeout      = planbus.ReasonPlanTimeout
	ReasonCancelled        = planbus.ReasonCancelled
	EventPlanStarted       = planbus.EventPlanStarted
	EventPlanRejected      = planbus.EventPlanRejected
	EventPlanSucceeded     = planbus.EventPlanSucceeded
	EventPlanFailed        = planbus.EventPlanFailed
	EventPlanTimeout       = planbus.EventPlanTimeout
	EventPlanCancelled     = planbus.EventPlanCancelled
	EventToolReleased      = planbus.EventToolReleased
	EventToolStarted       = planbus.EventToolStarted
	EventToolSucceeded     = planbus.EventToolSucceeded
	EventToolFailed        = planbus.EventToolFailed
	EventToolRetrying      = planbus.EventToolRetrying
	EventToolTimeout       = planbus.EventToolTimeout
	EventToolSkipped       = planbus.EventToolSkipped
	EventToolCancelled     = planbus.EventToolCancelled
	EventSkillHealth       = planbus.EventSkillHealth
)

// Retryable is planbus.Retryable.
func Retryable(category string) bool { return planbus.Retryable(category) }

// IdempotencyKey is planbus.IdempotencyKey.
func IdempotencyKey(planID, toolID string, attempt int) string {
	return planbus.IdempotencyKey(planID, toolID, attempt)
}

// BlamedSkills are the skills of an execution's failed tools, but for
// tools whose skill ran and whose output a verification gate refused: the
// step went wrong, not the skill, and another plan may well use it.
func BlamedSkills(res *ExecutionResult) []string {
	var out []string
	for _, t := range res.Tools {
		if t.State != ToolFailed && t.State != ToolTimeout {
			continue
		}
		if t.Error != nil && t.Error.Code == CodeVerifyFailed {
			continue
		}
		if !slices.Contains(out, t.Skill) {
			out = append(out, t.Skill)
		}
	}
	return out
}

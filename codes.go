package planbus

import "strconv"

// Code names a failure for programs (ErrorInfo.Code, ReplyError.Code),
// in upper snake case: TOOL_TIMEOUT, NO_PLAN. Every code planbus itself
// produces is a constant in this file, grouped by who reports it; skills
// may report codes of their own (a skill.Error's Code), which travel as
// they are. The category (Category), not the code, decides whether a
// failure is retried.
type Code string

// Codes of a tool's attempt, in a ToolResult's error and the ToolOutcome
// and events that follow from it. Workers and dispatchers report them.
const (
	// CodeToolTimeout: the attempt ran past its timeoutMs (category
	// timeout).
	CodeToolTimeout Code = "TOOL_TIMEOUT"
	// CodeToolFailed: the handler failed without a code of its own
	// (category internal, unless the skill said otherwise).
	CodeToolFailed Code = "TOOL_FAILED"
	// CodeInvalidInput: the call's input broke the skill's input schema,
	// or the handler refused it (skill.InvalidInput); never retried.
	CodeInvalidInput Code = "INVALID_INPUT"
	// CodeWorkerCrash: the call was delivered again and again without a
	// result: the workers it went to died, hung or were stopped while
	// running it (category internal).
	CodeWorkerCrash Code = "WORKER_CRASH"
	// CodeToolPanic: the handler panicked; the worker recovered and
	// reported the attempt failed (category internal).
	CodeToolPanic Code = "TOOL_PANIC"
	// CodeCancelled: the attempt was stopped because its plan was
	// cancelled (category cancelled).
	CodeCancelled Code = "CANCELLED"
	// CodeVerifyFailed: the tool succeeded but its verification gate
	// refused the output; the attempt counts as failed (category
	// transient, so the tool's retry policy applies).
	CodeVerifyFailed Code = "VERIFY_FAILED"
	// CodeRejected: a person rejected a tool that waited for approval
	// (planbus.plan.approve with approve false); the tool failed without
	// running (category permanent), and a plan it fails is not replanned.
	CodeRejected Code = "REJECTED"
	// CodeInvalidCall: the worker could not decode the tool call (its
	// input holds text a strict JSON decoder refuses, such as a lone
	// surrogate escape); the attempt failed without running (category
	// invalid_input, so it is not retried).
	CodeInvalidCall Code = "INVALID_CALL"
	// CodeInvalidResult: the worker's result could not be decoded (its
	// output holds text a strict JSON decoder refuses); the attempt
	// failed (category internal: the skill's bug).
	CodeInvalidResult Code = "INVALID_RESULT"
	// CodeOutputInvalid: the skill's output broke the output schema of its
	// manifest; the attempt failed (category permanent: the skill ran, and
	// running it again would most likely return the same).
	CodeOutputInvalid Code = "OUTPUT_INVALID"
	// CodeOutputNotJSON: the skill returned output that is not JSON
	// (category internal).
	CodeOutputNotJSON Code = "OUTPUT_NOT_JSON"
	// CodeOutputTooLarge: the output or state patch is larger than the
	// worker's output cap, or the result larger than the server's max
	// payload (category permanent).
	CodeOutputTooLarge Code = "OUTPUT_TOO_LARGE"
	// CodeInvalidStatePatch: the skill returned a state patch that is not
	// a JSON object (category internal).
	CodeInvalidStatePatch Code = "INVALID_STATE_PATCH"
	// CodeInputTooLarge: the call, its input's references resolved, is
	// larger than a message may be; the tool failed without running
	// (category permanent).
	CodeInputTooLarge Code = "INPUT_TOO_LARGE"
)

// Codes of a plan's execution (ExecutionResult.Error), reported by the
// dispatchers.
const (
	// CodePlanTimeout: the plan ran past its timeoutMs.
	CodePlanTimeout Code = "PLAN_TIMEOUT"
	// CodeInvalidPlan: the plan was rejected before it ran (it breaks
	// the plan schema or a rule: a cycle, an unknown dependency), or a
	// generator made such a plan.
	CodeInvalidPlan Code = "INVALID_PLAN"
	// CodeRequiredTools: a required tool failed, and with it the plan.
	CodeRequiredTools Code = "REQUIRED_TOOL_FAILED"
	// CodeDeliveryLimit: the dispatchers (for a plan) or the planner (for
	// a request) gave up on it: its message was delivered the delivery
	// limit times and could not be handled (category internal).
	CodeDeliveryLimit Code = "DELIVERY_LIMIT"
)

// Codes of a request's generation, in Attempt.Error and Outcome.Error,
// reported by the planner and its generators.
const (
	// CodeGenerationTimeout: no plan within the generation budget, or no
	// answer from an external planner in time (category timeout).
	CodeGenerationTimeout Code = "GENERATION_TIMEOUT"
	// CodeGenerationFailed: the generator failed in a way it did not name
	// (category internal).
	CodeGenerationFailed Code = "GENERATION_FAILED"
	// CodePlannerUnavailable: no external planner answers on the
	// request's subject, or the request to it failed (category network).
	CodePlannerUnavailable Code = "PLANNER_UNAVAILABLE"
	// CodeUnsupportedKind: this planner has no generator for the
	// request's kind (category invalid_input).
	CodeUnsupportedKind Code = "UNSUPPORTED_KIND"
	// CodeUnknownSkill: a generated plan uses a skill no worker
	// advertises (category transient).
	CodeUnknownSkill Code = "UNKNOWN_SKILL"
	// CodeSkillDisabled: the plan needs a skill that is disabled in the
	// session, or that failed in an earlier attempt of the request.
	CodeSkillDisabled Code = "SKILL_DISABLED"
	// CodeNoPlan: the HTN or GOAP search found no plan for the goal
	// (category permanent); the message says how far it got.
	CodeNoPlan Code = "NO_PLAN"
	// CodeNoGoal: the GOAP domain has no goal that is valid and not yet
	// satisfied (category permanent).
	CodeNoGoal Code = "NO_GOAL"
	// CodeNoTemplate: no template of the library matches the request.
	CodeNoTemplate Code = "NO_TEMPLATE"
	// CodeTemplateVars: the matching template's variables could not be
	// filled in (category permanent).
	CodeTemplateVars Code = "TEMPLATE_VARS"
	// CodeInvalidDomain: the HTN or GOAP domain cannot be used (category
	// invalid_input; permanent for an agent's domain).
	CodeInvalidDomain Code = "INVALID_DOMAIN"
	// CodeInvalidGoal: the HTN goal does not parse (category
	// invalid_input).
	CodeInvalidGoal Code = "INVALID_GOAL"
	// CodeHTNError and CodeGOAPError: the planner's search failed
	// otherwise (category permanent).
	CodeHTNError  Code = "HTN_ERROR"
	CodeGOAPError Code = "GOAP_ERROR"
	// CodeRequestTooLarge: the request does not fit in the planner's store
	// (published around the endpoint); it ends at once (category
	// invalid_input).
	CodeRequestTooLarge Code = "REQUEST_TOO_LARGE"
	// CodePlanTooLarge: the generated plan does not fit in the planner's
	// store beside its request (category permanent).
	CodePlanTooLarge Code = "PLAN_TOO_LARGE"
)

// Codes of generations stopped by a budget, all of category permanent: a
// deterministic planner given the same input runs out the same way. The
// time budgets are the planner's generation budget, for the kinds it runs
// itself (htn, goap, template, plan).
const (
	CodeHTNMemoryBudget    Code = "HTN_MEMORY_BUDGET"
	CodeHTNNodeBudget      Code = "HTN_NODE_BUDGET"
	CodeHTNStepBudget      Code = "HTN_STEP_BUDGET"
	CodeHTNTimeBudget      Code = "HTN_TIME_BUDGET"
	CodeGOAPMemoryBudget   Code = "GOAP_MEMORY_BUDGET"
	CodeGOAPNodeBudget     Code = "GOAP_NODE_BUDGET"
	CodeGOAPTimeBudget     Code = "GOAP_TIME_BUDGET"
	CodeTemplateTimeBudget Code = "TEMPLATE_TIME_BUDGET"
	CodePlanTimeBudget     Code = "PLAN_TIME_BUDGET"
)

// Codes of an agent's end (AgentStatus.Error); CodeInvalidDomain too.
const (
	// CodeAgentGaveUp: several decisions in a row found no plan for any
	// goal; the agent ended, status failed.
	CodeAgentGaveUp Code = "AGENT_GAVE_UP"
)

// Codes of the built-in skills of toolworker (docs/skills.md).
const (
	// CodeExitNonzero: shell's program exited with a status other than 0
	// or was killed by a signal (category internal).
	CodeExitNonzero Code = "EXIT_NONZERO"
	// CodeShellCPULimit and CodeShellFileSizeLimit: shell's program was
	// killed at its CPU time or file size limit.
	CodeShellCPULimit      Code = "SHELL_CPU_LIMIT"
	CodeShellFileSizeLimit Code = "SHELL_FILE_SIZE_LIMIT"
	// CodeHTTPNetwork: http could not reach the server (category
	// network). A response with a status of 400 or more is
	// CodeHTTPStatus of it instead.
	CodeHTTPNetwork Code = "HTTP_NETWORK"
	// CodeHTTPTLS: the server's certificate was refused (category
	// permanent).
	CodeHTTPTLS Code = "HTTP_TLS"
	// CodeHTTPRedirectRefused: a redirect went to a host not allowed, or
	// past the redirect limit (category permanent).
	CodeHTTPRedirectRefused Code = "HTTP_REDIRECT_REFUSED"
	// CodeHTTPAddressRefused: the host resolved to an address the address
	// rule refuses (category permanent).
	CodeHTTPAddressRefused Code = "HTTP_ADDRESS_REFUSED"
	// CodeInjectedFailure: the fail skill failed as asked, with no code
	// given.
	CodeInjectedFailure Code = "INJECTED_FAILURE"
	// CodeSimulatedFailure: a simulated skill (toolworker --simulate)
	// failed as configured.
	CodeSimulatedFailure Code = "SIMULATED_FAILURE"
	// CodeMCPToolError: a tool of an MCP server (toolworker --mcp)
	// answered with isError; the message is its text (category
	// permanent: the server ran the tool and said no).
	CodeMCPToolError Code = "MCP_TOOL_ERROR"
	// CodeMCPUnavailable: the MCP server could not be reached, or its
	// process died during the call (category network: the call is retried
	// by its policy while the worker restarts the server).
	CodeMCPUnavailable Code = "MCP_UNAVAILABLE"
)

// CodeHTTPStatus is the code of the http skill's error for a response of
// this status: HTTP_404, HTTP_503 (category transient for 429 and 5xx,
// permanent for other 4xx).
func CodeHTTPStatus(status int) Code { return Code("HTTP_" + strconv.Itoa(status)) }

// Reply codes of Rejected replies (ReplyError.Code) from the planner's
// endpoints.
const (
	// CodeInvalidRequest: the request breaks its schema or a rule; Field
	// names where.
	CodeInvalidRequest Code = "INVALID_REQUEST"
	// CodeNotFound: no request or plan has the id given (they are kept for
	// a day).
	CodeNotFound Code = "NOT_FOUND"
	// CodeUnavailable: the planner could not read or write its store; try
	// again.
	CodeUnavailable Code = "UNAVAILABLE"
	// CodeNotWaiting: the tool named in an ApproveRequest is not waiting
	// for approval (it has no approval step, is not ready yet, was
	// decided on already, or its plan has ended).
	CodeNotWaiting Code = "NOT_WAITING"
	// CodeForbidden: the request, plan or session named belongs to another
	// named client (planner auth add-client): only it, or an admin on its
	// subjects, may act on it.
	CodeForbidden Code = "FORBIDDEN"
)

package generator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/plan"
	"github.com/planbus/planbus/internal/request"
	"github.com/planbus/planbus/internal/templates"
)

// Template is kind template: a plan from the planner's template
// library, named or matched against the request's text. A replan takes
// the template the failed plan falls back to, if its steps say so;
// otherwise the same template again, unless it needs a disabled skill.
type Template struct {
	Library *templates.Library // nil: the planner has none
}

func (tp Template) selection(r *request.Request) (templates.Selection, error) {
	if tp.Library == nil {
		return templates.Selection{}, &request.Error{Field: "/kind", Msg: "this planner has no template library; start it with --templates FILE"}
	}
	t := r.Template
	sel := templates.Selection{Template: t.ID, Domain: t.Domain, Text: t.Text, Vars: t.Vars, MinScore: t.MinScore}
	if sel.Text == "" {
		var s string
		if json.Unmarshal(r.Input, &s) == nil {
			sel.Text = s
		}
	}
	if sel.Template == "" && sel.Text == "" {
		return sel, &request.Error{Field: "/template", Msg: "name a template (id) or give text to match (template.text, or a string input)"}
	}
	return sel, nil
}

// Check refuses a request no template would serve.
func (tp Template) Check(r *request.Request) error {
	sel, err := tp.selection(r)
	if err != nil {
		return err
	}
	if _, err := templates.Select(tp.Library, sel); err != nil {
		field := "/template"
		if sel.Template != "" {
			field = "/template/id"
		}
		return &request.Error{Field: field, Msg: err.Error()}
	}
	return nil
}

func (tp Template) Generate(_ context.Context, in Input) (*plan.Plan, error) {
	sel, err := tp.selection(in.Request)
	if err != nil {
		return nil, &Error{Code: planbus.CodeNoTemplate, Category: planbus.CategoryInvalidInput, Message: err.Error()}
	}
	if in.LastPlan != nil && in.LastExecution != nil {
		if next, ok := templates.FallbackPlan(in.LastPlan, in.LastExecution.FailedTools); ok {
			sel.Template = next
		}
	}
	inst, err := templates.Select(tp.Library, sel)
	if err != nil {
		code := planbus.CodeNoTemplate
		if errors.Is(err, templates.ErrVars) {
			code = planbus.CodeTemplateVars
		}
		return nil, &Error{Code: code, Category: planbus.CategoryPermanent, Message: err.Error()}
	}
	p, err := inst.Plan()
	if err != nil {
		return nil, &Error{Code: planbus.CodeInvalidPlan, Category: planbus.CategoryInternal, Message: err.Error()}
	}
	for _, t := range p.Tools {
		if slices.Contains(in.DisabledSkills, t.Skill) {
			return nil, &Error{Code: planbus.CodeSkillDisabled, Category: planbus.CategoryPermanent,
				Message: fmt.Sprintf("template %q needs skill %q (step %q), which is disabled, and names no fallback plan", inst.Template.ID, t.Skill, t.ToolID)}
		}
	}
	return p, nil
}

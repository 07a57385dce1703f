package skills

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/llm"
	"github.com/planbus/planbus/skill"
)

// LLMInput is a call of the llm skill.
type LLMInput struct {
	Prompt string `json:"prompt" jsonschema:"the user message"`
	System string `json:"system,omitempty" jsonschema:"a system message before it"`
	Model  string `json:"model,omitempty" jsonschema:"the model to ask (default: the worker's --llm-model)"`
	// Schema asks for structured output: the answer must be JSON that
	// satisfies it, returned decoded in the output's json.
	Schema map[string]any `json:"schema,omitempty" jsonschema:"a JSON Schema the answer must satisfy (structured output); the output's json holds it decoded"`
}

// LLMOutput is what the llm skill returns.
type LLMOutput struct {
	Text  string `json:"text" jsonschema:"the model's answer"`
	JSON  any    `json:"json,omitempty" jsonschema:"with schema: the answer decoded"`
	Model string `json:"model" jsonschema:"the model that answered"`
}

// LLM is the llm skill: one chat completion per call, from the model at
// ep (an OpenAI-compatible Chat Completions endpoint). The call's
// deadline bounds it. A timeout fails with category timeout, an API that
// cannot be reached or is overloaded with network, one that refuses the
// request (a 4xx) with permanent; an answer that is not the JSON the
// schema asked for fails with OUTPUT_INVALID (transient: a retry may do
// better).
func LLM(ep llm.Endpoint) skill.Skill {
	c := ep.Client()
	s := skill.Func("llm", "One chat completion from the worker's language model: a prompt in, its answer out (optionally as JSON satisfying a schema).",
		func(ctx context.Context, in LLMInput) (LLMOutput, error) {
			model := in.Model
			if model == "" {
				model = ep.Model
			}
			if model == "" {
				return LLMOutput{}, skill.InvalidInput("no model: give model in the input, or start the worker with --llm-model")
			}
			var msgs []openai.ChatCompletionMessageParamUnion
			if in.System != "" {
				msgs = append(msgs, openai.SystemMessage(in.System))
			}
			msgs = append(msgs, openai.UserMessage(in.Prompt))
			params := openai.ChatCompletionNewParams{Model: model, Messages: msgs}
			if in.Schema != nil {
				params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Schema: in.Schema}}}
			}
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				cat, msg := ep.Classify(ctx, err)
				return LLMOutput{}, skill.Failf(planbus.CodeToolFailed, cat, "%s", msg)
			}
			if len(resp.Choices) == 0 {
				return LLMOutput{}, skill.Transient(planbus.CodeToolFailed, "the model at %s answered no choices", ep.URL)
			}
			out := LLMOutput{Text: resp.Choices[0].Message.Content, Model: resp.Model}
			if in.Schema != nil {
				if err := json.Unmarshal([]byte(strings.TrimSpace(out.Text)), &out.JSON); err != nil {
					return LLMOutput{}, skill.Transient(planbus.CodeOutputInvalid, "the model's answer is not the JSON asked for: %v", err)
				}
			}
			return out, nil
		})
	s.Manifest.TimeoutMs = 120_000
	return s
}

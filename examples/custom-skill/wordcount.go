package main

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/planbus/planbus/skill"
)

// maxText bounds the text one call may count: the input schema says so,
// and the worker refuses a call that breaks it before the handler runs.
const maxText = 1 << 20

// wordcountInput is what a call of wordcount takes.
type wordcountInput struct {
	Text string `json:"text"`
}

// wordcountOutput is what it returns.
type wordcountOutput struct {
	Words      int `json:"words"`
	Lines      int `json:"lines"`
	Characters int `json:"characters"`
}

// wordcount is the skill: its manifest, which the worker advertises to
// planbus (planners and dispatchers read it), and its handler.
func wordcount() skill.Skill {
	return skill.Skill{
		Manifest: skill.Manifest{
			Name:        "wordcount",
			Description: "Counts the words, lines and characters of a text.",
			Version:     "1",
			// The HTN planner maps an operator wordcount(text) to the
			// input {"text": ...}.
			Parameters: []string{"text"},
			InputSchema: json.RawMessage(`{
				"type": "object",
				"required": ["text"],
				"properties": {"text": {"type": "string", "maxLength": 1048576}},
				"additionalProperties": false
			}`),
			TimeoutMs: 5000,
		},
		Handler: skill.HandlerFunc(countWords),
	}
}

// countWords runs one call. The input has passed the schema, so decoding
// fails only on a bug; DecodeInput would say which field anyway.
func countWords(ctx context.Context, call *skill.Call) (skill.Result, error) {
	var in wordcountInput
	if err := skill.DecodeInput(call, &in); err != nil {
		return skill.Result{}, err
	}
	if len(in.Text) > maxText {
		return skill.Result{}, skill.InvalidInput("wordcount: text of %d bytes, at most %d", len(in.Text), maxText)
	}
	out := wordcountOutput{
		Words:      len(strings.Fields(in.Text)),
		Lines:      strings.Count(in.Text, "\n"),
		Characters: utf8.RuneCountInString(in.Text),
	}
	if in.Text != "" && !strings.HasSuffix(in.Text, "\n") {
		out.Lines++
	}
	// The worker puts a logger for this call in ctx: the line carries the
	// plan, tool, skill and attempt.
	zerolog.Ctx(ctx).Info().Int("words", out.Words).Msg("counted")
	b, err := json.Marshal(out)
	if err != nil {
		return skill.Result{}, err
	}
	return skill.Result{Output: b}, nil
}

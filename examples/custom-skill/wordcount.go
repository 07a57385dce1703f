package main

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/planbus/planbus/skill"
)

// maxText bounds the text one call may count.
const maxText = 1 << 20

// wordcountInput is what a call of wordcount takes.
type wordcountInput struct {
	Text string `json:"text" jsonschema:"the text to count"`
}

// wordcountOutput is what it returns.
type wordcountOutput struct {
	Words      int `json:"words"`
	Lines      int `json:"lines"`
	Characters int `json:"characters"`
}

// wordcount is the skill: skill.Func derives its manifest's input and
// output schemas from the Go types (the worker advertises the manifest to
// planbus; planners and dispatchers read it) and decodes each call's input
// into wordcountInput. The rest of the manifest is set by hand.
func wordcount() skill.Skill {
	s := skill.Func("wordcount", "Counts the words, lines and characters of a text.", countWords)
	s.Manifest.Version = "1"
	// The HTN planner maps an operator wordcount(text) to the input
	// {"text": ...}.
	s.Manifest.Parameters = []string{"text"}
	s.Manifest.TimeoutMs = 5000
	return s
}

// countWords runs one call. The input has passed the schema (text is
// required, nothing else is allowed) before it is decoded.
func countWords(ctx context.Context, in wordcountInput) (wordcountOutput, error) {
	if len(in.Text) > maxText {
		return wordcountOutput{}, skill.InvalidInput("wordcount: text of %d bytes, at most %d", len(in.Text), maxText)
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
	skill.Log(ctx).Info("counted", "words", out.Words)
	return out, nil
}

package templates

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// DomainBonus is added to the score of a template that lists the request's
// domain.
const DomainBonus = 1

// MatchInput is what a request offers the matcher.
type MatchInput struct {
	// Domain is the request's domain, such as "git_ops". Templates that
	// list domains match only a request whose domain is one of them, so a
	// request without a domain matches only templates that list none.
	Domain string
	// Text is what the user asked for.
	Text string
}

// Candidate is a template that matches a request.
type Candidate struct {
	Template *Template
	// Score is the number of matched triggers, plus DomainBonus when the
	// template lists the request's domain.
	Score int
	// Hits are the triggers that matched, in the template's order.
	Hits []string
	// Domain says whether the template lists the request's domain.
	Domain bool
	// Vars are the variables the template's captures found in the text,
	// and input, the text itself.
	Vars map[string]string
}

// token is one word of a trigger; prefix means it ended in '*'.
type token struct {
	word   string
	prefix bool
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) }

// words splits text into lower-case words: runs of letters, digits and
// combining marks. Everything else separates words.
func words(text string) []string {
	var out []string
	start := -1
	for i, r := range text {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, strings.ToLower(text[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, strings.ToLower(text[start:]))
	}
	return out
}

// tokenizeTrigger splits a trigger into words, noting those followed
// directly by '*'.
func tokenizeTrigger(trigger string) []token {
	var out []token
	start := -1
	flush := func(end int) {
		if start >= 0 {
			out = append(out, token{word: strings.ToLower(trigger[start:end])})
			start = -1
		}
	}
	for i, r := range trigger {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		wasWord := start >= 0
		flush(i)
		if r == '*' && wasWord {
			out[len(out)-1].prefix = true
		}
	}
	flush(len(trigger))
	return out
}

func tokensKey(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.word)
		if t.prefix {
			b.WriteByte('*')
		}
	}
	return b.String()
}

func (t token) matches(word string) bool {
	if t.prefix {
		return strings.HasPrefix(word, t.word)
	}
	return word == t.word
}

// phraseIn reports whether the trigger's words occur one after another in
// text's words.
func phraseIn(trigger []token, text []string, present map[string]bool) bool {
	if !trigger[0].prefix && !present[trigger[0].word] {
		return false
	}
	for i := 0; i+len(trigger) <= len(text); i++ {
		ok := true
		for j, t := range trigger {
			if !t.matches(text[i+j]) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// Match returns the templates that match a request, best first. A
// template matches when it lists no domains or lists the request's
// domain, and at least TriggerThreshold of its triggers occur in the text
// as whole words, ignoring case, punctuation and spacing. Templates
// without triggers are only chosen by id. The score is the number of
// matched triggers plus DomainBonus for a listed domain; ties go to the
// template earlier in the library, so the order is deterministic.
func Match(lib *Library, in MatchInput) []Candidate {
	text := words(in.Text)
	if len(text) == 0 {
		return nil
	}
	present := make(map[string]bool, len(text))
	for _, w := range text {
		present[w] = true
	}
	var out []Candidate
	for _, t := range lib.Plans {
		domain := false
		if len(t.Domains) > 0 {
			domain = in.Domain != "" && slices.ContainsFunc(t.Domains, func(d string) bool { return strings.EqualFold(d, in.Domain) })
			if !domain {
				continue
			}
		}
		var hits []string
		for i, tr := range t.triggers {
			if phraseIn(tr, text, present) {
				hits = append(hits, t.Triggers[i])
			}
		}
		if len(hits) == 0 || len(hits) < t.TriggerThreshold {
			continue
		}
		score := len(hits)
		if domain {
			score += DomainBonus
		}
		out = append(out, Candidate{Template: t, Score: score, Hits: hits, Domain: domain, Vars: t.vars(in.Text)})
	}
	slices.SortStableFunc(out, func(a, b Candidate) int { return b.Score - a.Score })
	return out
}

// Best returns the best match whose score is at least minScore.
func Best(lib *Library, in MatchInput, minScore int) (Candidate, bool) {
	c := Match(lib, in)
	if len(c) == 0 || c[0].Score < minScore {
		return Candidate{}, false
	}
	return c[0], true
}

// Capture returns the variables the template's captures find in text: for
// each capture in order, the named groups that took part in its first
// match; an earlier capture's value wins.
func (t *Template) Capture(text string) map[string]string {
	out := map[string]string{}
	for _, re := range t.captures {
		m := re.FindStringSubmatchIndex(text)
		if m == nil {
			continue
		}
		for g, name := range re.SubexpNames() {
			if name == "" || m[2*g] < 0 {
				continue
			}
			if _, set := out[name]; !set {
				out[name] = text[m[2*g]:m[2*g+1]]
			}
		}
	}
	return out
}

// vars is Capture plus input.
func (t *Template) vars(text string) map[string]string {
	v := t.Capture(text)
	v[InputVar] = text
	return v
}

// Selection is a request for a template plan: an explicit template, or
// text (and a domain) to match.
type Selection struct {
	// Template is a template id; empty means: match Domain and Text.
	Template string
	Domain   string
	Text     string
	// Vars are values the request gives explicitly; they win over the
	// captures from Text.
	Vars map[string]string
	// MinScore is the least score a match needs.
	MinScore int
}

// Select chooses a template for a request and instantiates it: the
// explicit template if one is named (ErrUnknownTemplate if there is no
// such template), else the best match (ErrNoMatch if none scores
// MinScore). Variables come from sel.Vars, then the template's captures
// on sel.Text; input is sel.Text. Instantiation errors match ErrVars.
func Select(lib *Library, sel Selection) (*Instance, error) {
	var t *Template
	var cand *Candidate
	if sel.Template != "" {
		var ok bool
		if t, ok = lib.Template(sel.Template); !ok {
			return nil, &selectError{ErrUnknownTemplate, fmt.Sprintf("no template %q in the library", sel.Template)}
		}
	} else {
		c, ok := Best(lib, MatchInput{Domain: sel.Domain, Text: sel.Text}, sel.MinScore)
		if !ok {
			msg := fmt.Sprintf("nothing in the library matches %q", clip(sel.Text))
			if sel.Domain != "" {
				msg += fmt.Sprintf(" in domain %q", sel.Domain)
			}
			return nil, &selectError{ErrNoMatch, msg}
		}
		t, cand = c.Template, &c
	}
	vars := t.vars(sel.Text)
	for k, v := range sel.Vars {
		vars[k] = v
	}
	if sel.Text != "" {
		vars[InputVar] = sel.Text
	}
	in, err := Instantiate(t, vars)
	if err != nil {
		return nil, err
	}
	in.Match = cand
	return in, nil
}

type selectError struct {
	sentinel error
	msg      string
}

func (e *selectError) Error() string { return e.sentinel.Error() + ": " + e.msg }

func (e *selectError) Unwrap() error { return e.sentinel }

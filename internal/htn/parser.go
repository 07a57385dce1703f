package htn

import (
	"fmt"
	"strings"
)

// maxNesting bounds how deeply parentheses and brackets may nest in one
// term, so hostile input cannot exhaust the stack. The reference stops at
// 4096 nodes per term.
const maxNesting = 4096

// varInfo describes one clause-local variable.
type varInfo struct {
	name symbol // without the leading '?'
	anon bool   // written as _ or _name: every occurrence is a new variable
}

// statement is one parsed "head." or "head :- body." before it is
// classified as fact, axiom, method or operator.
type statement struct {
	head    term
	body    []term
	hasBody bool
	vars    []varInfo
	line    int
	col     int
}

type parser struct {
	src   string
	pos   int
	syms  *symtab
	vars  []varInfo
	byNam map[string]int
	depth int
}

func newParser(src string, syms *symtab) *parser {
	return &parser{src: src, syms: syms, byNam: map[string]int{}}
}

func (p *parser) errAt(pos int, format string, args ...any) *ParseError {
	line, col := 1, 1
	for i := 0; i < pos && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &ParseError{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) resetVars() {
	p.vars = nil
	clear(p.byNam)
}

// skip passes whitespace and comments.
func (p *parser) skip() error {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			p.pos++
		case c == '%':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				return p.errAt(p.pos, "unterminated /* comment")
			}
			p.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isNameChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c == '-'
}
func isMathChar(c byte) bool { return strings.IndexByte(`+-<>=/*\`, c) >= 0 }

// parseProgram reads every statement of a program.
func (p *parser) parseProgram() ([]statement, error) {
	var out []statement
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) {
			return out, nil
		}
		st, err := p.parseStatement()
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
}

func (p *parser) parseStatement() (statement, error) {
	p.resetVars()
	start := p.pos
	st := statement{}
	st.line, st.col = lineCol(p.src, start)
	var head term
	var err error
	if p.peek() == '[' {
		head, err = p.parseTerm()
	} else {
		head, err = p.parseFunctor()
	}
	if err != nil {
		return st, err
	}
	st.head = head
	if err := p.skip(); err != nil {
		return st, err
	}
	if strings.HasPrefix(p.src[p.pos:], ":-") {
		if head.k != kAtom && head.k != kCompound {
			return st, p.errAt(start, "a rule head must be a name or compound term")
		}
		p.pos += 2
		st.hasBody = true
		if err := p.skip(); err != nil {
			return st, err
		}
		if p.peek() != '.' {
			st.body, err = p.parseTermList()
			if err != nil {
				return st, err
			}
		}
		if err := p.skip(); err != nil {
			return st, err
		}
	}
	if p.peek() != '.' {
		return st, p.errAt(p.pos, "expected '.' at end of statement, found %s", p.describe())
	}
	p.pos++
	st.vars = p.vars
	return st, nil
}

func lineCol(src string, pos int) (int, int) {
	line, col := 1, 1
	for i := 0; i < pos && i < len(src); i++ {
		if src[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of input"
	}
	c := p.src[p.pos]
	if c < 0x20 || c >= 0x7f {
		return fmt.Sprintf("byte %#x", c)
	}
	return fmt.Sprintf("%q", string(c))
}

// parseGoalList reads "t1, t2, ..." optionally followed by '.', or an
// empty string, as used for goals and queries.
func (p *parser) parseGoalList() ([]term, error) {
	p.resetVars()
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos >= len(p.src) {
		return nil, nil
	}
	goals, err := p.parseTermList()
	if err != nil {
		return nil, err
	}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.peek() == '.' {
		p.pos++
		if err := p.skip(); err != nil {
			return nil, err
		}
	}
	if p.pos < len(p.src) {
		return nil, p.errAt(p.pos, "expected ',' or end of goals, found %s", p.describe())
	}
	// goals(a, b) is accepted as a wrapper around the goal list.
	if len(goals) == 1 && goals[0].k == kCompound && goals[0].sym == symGoals {
		return goals[0].args, nil
	}
	if len(goals) == 1 && goals[0].k == kAtom && goals[0].sym == symGoals {
		return nil, nil
	}
	return goals, nil
}

// parseTermList reads comma-separated terms. Whitespace and comments may
// surround the commas.
func (p *parser) parseTermList() ([]term, error) {
	var out []term
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		t, err := p.parseTerm()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.peek() != ',' {
			return out, nil
		}
		p.pos++
	}
}

func (p *parser) parseTerm() (term, error) {
	if err := p.skip(); err != nil {
		return term{}, err
	}
	c := p.peek()
	switch {
	case c == '?':
		return p.parseVariable()
	case c == '_':
		return p.parseAnon()
	case c == '[':
		return p.parseList()
	}
	return p.parseFunctor()
}

func (p *parser) parseVariable() (term, error) {
	start := p.pos
	p.pos++ // '?'
	name, _, err := p.parseAtomText()
	if err != nil {
		return term{}, err
	}
	if name == "" {
		return term{}, p.errAt(start, "expected a variable name after '?'")
	}
	if idx, ok := p.byNam[name]; ok {
		return term{k: kVar, n: int64(idx)}, nil
	}
	idx := len(p.vars)
	p.vars = append(p.vars, varInfo{name: p.syms.intern(name)})
	p.byNam[name] = idx
	return term{k: kVar, n: int64(idx)}, nil
}

func (p *parser) parseAnon() (term, error) {
	start := p.pos
	p.pos++
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	idx := len(p.vars)
	p.vars = append(p.vars, varInfo{name: p.syms.intern(p.src[start:p.pos]), anon: true})
	return term{k: kVar, n: int64(idx)}, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return p.errAt(p.pos, "term nested more than %d levels deep", maxNesting)
	}
	return nil
}

func (p *parser) parseList() (term, error) {
	start := p.pos
	if err := p.enter(); err != nil {
		return term{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '['
	if err := p.skip(); err != nil {
		return term{}, err
	}
	if p.peek() == ']' {
		p.pos++
		return atomTerm(symNil), nil
	}
	var items []term
	tail := atomTerm(symNil)
	for {
		t, err := p.parseTerm()
		if err != nil {
			return term{}, err
		}
		items = append(items, t)
		if err := p.skip(); err != nil {
			return term{}, err
		}
		if p.peek() == ',' {
			p.pos++
			continue
		}
		if p.peek() == '|' {
			p.pos++
			tail, err = p.parseTerm()
			if err != nil {
				return term{}, err
			}
			if err := p.skip(); err != nil {
				return term{}, err
			}
		}
		break
	}
	if p.peek() != ']' {
		return term{}, p.errAt(p.pos, "expected ']' to close the list opened at %d:%d, found %s", lineOf(p.src, start), colOf(p.src, start), p.describe())
	}
	p.pos++
	for i := len(items) - 1; i >= 0; i-- {
		tail = compound(symDot, []term{items[i], tail})
	}
	return tail, nil
}

func lineOf(src string, pos int) int { l, _ := lineCol(src, pos); return l }
func colOf(src string, pos int) int  { _, c := lineCol(src, pos); return c }

// parseFunctor reads an atom optionally followed, without whitespace, by
// a parenthesised argument list. "name()" is the atom name.
func (p *parser) parseFunctor() (term, error) {
	start := p.pos
	name, quoted, err := p.parseAtomText()
	if err != nil {
		return term{}, err
	}
	if name == "" && !quoted {
		return term{}, p.errAt(start, "expected a term, found %s", p.describe())
	}
	if p.peek() != '(' {
		return p.syms.atom(name), nil
	}
	if err := p.enter(); err != nil {
		return term{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // '('
	if err := p.skip(); err != nil {
		return term{}, err
	}
	if p.peek() == ')' {
		p.pos++
		return p.syms.atom(name), nil
	}
	args, err := p.parseTermList()
	if err != nil {
		return term{}, err
	}
	if p.peek() != ')' {
		return term{}, p.errAt(p.pos, "expected ')' after arguments of %q, found %s", name, p.describe())
	}
	p.pos++
	return compound(p.syms.intern(name), args), nil
}

// parseAtomText reads the text of an atom: a number, a run of symbol
// characters, "!", a "string" (quotes kept), a 'quoted atom' (quotes
// dropped) or a bare name. It returns "" when no atom starts here.
func (p *parser) parseAtomText() (string, bool, error) {
	start := p.pos
	if p.pos >= len(p.src) {
		return "", false, nil
	}
	c := p.src[p.pos]
	switch {
	case isDigit(c) || (c == '-' || c == '+') && p.pos+1 < len(p.src) && isDigit(p.src[p.pos+1]):
		p.pos++
		for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
			p.pos++
		}
		if p.pos+1 < len(p.src) && p.src[p.pos] == '.' && isDigit(p.src[p.pos+1]) {
			p.pos++
			for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
				p.pos++
			}
		}
		text := p.src[start:p.pos]
		if text[0] == '+' {
			text = text[1:]
		}
		return text, false, nil
	case c == '-' && p.pos+1 < len(p.src) && isLetter(p.src[p.pos+1]):
		p.pos++
		for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
			p.pos++
		}
		return p.src[start:p.pos], false, nil
	case isMathChar(c):
		for p.pos < len(p.src) && isMathChar(p.src[p.pos]) {
			p.pos++
		}
		return p.src[start:p.pos], false, nil
	case c == '!':
		p.pos++
		return "!", false, nil
	case c == '"':
		end := strings.IndexByte(p.src[p.pos+1:], '"')
		if end < 0 {
			return "", false, p.errAt(start, "unterminated string")
		}
		p.pos += end + 2
		return p.src[start:p.pos], true, nil
	case c == '\'':
		end := strings.IndexByte(p.src[p.pos+1:], '\'')
		if end < 0 {
			return "", false, p.errAt(start, "unterminated quoted atom")
		}
		p.pos += end + 2
		return p.src[start+1 : p.pos-1], true, nil
	case isLetter(c):
		for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
			p.pos++
		}
		return p.src[start:p.pos], false, nil
	}
	return "", false, nil
}

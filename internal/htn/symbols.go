package htn

import "strconv"

// symbol is an interned atom or functor name.
type symbol int32

// numKind records that an atom's text reads as a number although it is not
// the number's canonical text (for example "2.50" or "007"). Such atoms keep
// their text for unification and printing, as in the reference, and carry
// their value for arithmetic.
type numKind uint8

const (
	numNone numKind = iota
	numInt
	numFloat
)

type symInfo struct {
	name string
	num  numKind
	f    float64
}

// symtab interns names. A Program owns an immutable base table; every
// planning or query run layers a small overlay on it for names it creates
// (atom_concat results, atoms in the goal), so a Program can be shared by
// concurrent runs.
type symtab struct {
	base  *symtab
	off   int32 // first symbol owned by this table
	infos []symInfo
	ids   map[string]symbol
	names int64 // bytes of the names interned here
}

// Predefined symbols, identical in every table.
const (
	symDot symbol = iota
	symNil
	symTrue
	symCut
	symTry
	symElse
	symAllOf
	symAnyOf
	symHidden
	symIf
	symDo
	symDel
	symAdd
	symGoals
	symLess
	symGreater
	symNot
	symPredefCount
)

var predefNames = [...]string{
	symDot: ".", symNil: "[]", symTrue: "true", symCut: "!", symTry: "try",
	symElse: "else", symAllOf: "allOf", symAnyOf: "anyOf", symHidden: "hidden",
	symIf: "if", symDo: "do", symDel: "del", symAdd: "add", symGoals: "goals",
	symLess: "<", symGreater: ">", symNot: "not",
}

func newSymtab() *symtab {
	t := &symtab{ids: make(map[string]symbol, 256)}
	for _, n := range predefNames {
		t.intern(n)
	}
	return t
}

// overlay returns a table that reads through to t and adds new names locally.
func (t *symtab) overlay() *symtab {
	return &symtab{base: t, off: t.off + int32(len(t.infos)), ids: map[string]symbol{}}
}

func (t *symtab) lookup(name string) (symbol, bool) {
	if t.base != nil {
		if s, ok := t.base.lookup(name); ok {
			return s, true
		}
	}
	s, ok := t.ids[name]
	return s, ok
}

func (t *symtab) intern(name string) symbol {
	if s, ok := t.lookup(name); ok {
		return s
	}
	s := symbol(t.off + int32(len(t.infos)))
	info := symInfo{name: name}
	if isNum, isFloat, f := numericText(name); isNum {
		info.f = f
		info.num = numInt
		if isFloat {
			info.num = numFloat
		}
	}
	t.infos = append(t.infos, info)
	t.ids[name] = s
	t.names += allocSize(int64(len(name)))
	return s
}

// memBytes estimates what the table holds: its names, their infos and
// its index (a map slot is about twice its key and value).
func (t *symtab) memBytes() int64 {
	return t.names + sliceBytes(cap(t.infos), sizeSymInfo) + int64(len(t.ids))*2*(16+4)
}

func (t *symtab) info(s symbol) *symInfo {
	if int32(s) < t.off {
		return t.base.info(s)
	}
	return &t.infos[int32(s)-t.off]
}

func (t *symtab) name(s symbol) string { return t.info(s).name }

// atom builds the term for an atom with the given text. Numeric text that is
// the canonical form of its value becomes a native number, so that parsed
// and computed numbers with the same text unify, as they do in the
// reference where every number is stored as text.
func (t *symtab) atom(text string) term {
	if isNum, isFloat, f := numericText(text); isNum {
		if isFloat {
			if formatFloat(f) == text {
				return floatTerm(f)
			}
		} else if v, err := strconv.ParseInt(text, 10, 64); err == nil && strconv.FormatInt(v, 10) == text {
			return intTerm(v)
		}
	}
	return atomTerm(t.intern(text))
}

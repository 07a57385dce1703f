package htn

import (
	"strconv"
	"strings"
)

// printer renders terms exactly as the reference's HtnTerm::ToString.
type printer struct {
	syms    *symtab
	vars    []varInfo          // names of kVar terms, when printing a clause
	refName func(int64) string // names of kRef terms, when printing engine terms
}

func (pr printer) String(t term) string {
	var b strings.Builder
	pr.write(&b, t)
	return b.String()
}

func (pr printer) write(b *strings.Builder, t term) {
	switch t.k {
	case kAtom:
		b.WriteString(pr.syms.name(t.sym))
	case kInt:
		b.WriteString(strconv.FormatInt(t.n, 10))
	case kFloat:
		b.WriteString(formatFloat(t.float()))
	case kVar:
		b.WriteByte('?')
		if int(t.n) < len(pr.vars) {
			b.WriteString(pr.syms.name(pr.vars[t.n].name))
		} else {
			b.WriteString("_V" + strconv.FormatInt(t.n, 10))
		}
	case kFree:
		b.WriteByte('?')
		b.WriteString(pr.syms.name(t.sym))
	case kRef:
		b.WriteByte('?')
		if pr.refName != nil {
			b.WriteString(pr.refName(t.n))
		} else {
			b.WriteString("_G" + strconv.FormatInt(t.n, 10))
		}
	case kCompound:
		if t.sym == symDot && len(t.args) == 2 {
			pr.writeList(b, t)
			return
		}
		b.WriteString(pr.syms.name(t.sym))
		b.WriteByte('(')
		for i, a := range t.args {
			if i > 0 {
				b.WriteByte(',')
			}
			pr.write(b, a)
		}
		b.WriteByte(')')
	}
}

// writeList prints '.'(H, T) chains as [a,b,c]. Like the reference, a tail
// that is neither a list cell nor [] is printed after a comma with no
// closing bracket: [a|b] prints as "[a,b".
func (pr printer) writeList(b *strings.Builder, t term) {
	b.WriteByte('[')
	for {
		pr.write(b, t.args[0])
		tail := t.args[1]
		if tail.k == kAtom && tail.sym == symNil {
			b.WriteByte(']')
			return
		}
		b.WriteByte(',')
		if tail.k == kCompound && tail.sym == symDot && len(tail.args) == 2 {
			t = tail
			continue
		}
		pr.write(b, tail)
		return
	}
}

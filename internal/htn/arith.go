package htn

import (
	"errors"
	"strconv"
)

// Internal evaluation outcomes that are not domain errors: the reference
// simply fails the goal in these cases.
var (
	errUnbound    = errors.New("unbound variable in arithmetic")
	errNonNumeric = errors.New("non-numeric value in arithmetic")
)

// arithOp identifies an arithmetic functor.
type arithOp uint8

const (
	opNone arithOp = iota
	opAdd
	opSub
	opMul
	opDiv
	opMin
	opMax
	opAbs
	opFloat
	opInteger
	opLess
	opGreater
	opLessEq
	opGreaterEq
	opEq
	opBadCompare // <= and =>: the reference aborts on these
)

var arithNames = map[string]arithOp{
	"+": opAdd, "-": opSub, "*": opMul, "/": opDiv, "min": opMin, "max": opMax,
	"abs": opAbs, "float": opFloat, "integer": opInteger,
	"<": opLess, ">": opGreater, "=<": opLessEq, ">=": opGreaterEq, "=": opEq,
	"<=": opBadCompare, "=>": opBadCompare,
}

// numInfo reads a term as a number the way the reference reads its text.
func numInfo(t term, syms *symtab) (isInt bool, i int64, f float64, ok bool) {
	switch t.k {
	case kInt:
		return true, t.n, float64(t.n), true
	case kFloat:
		v := t.float()
		return false, toInt64(v), v, true
	case kAtom:
		info := syms.info(t.sym)
		switch info.num {
		case numInt:
			return true, toInt64(info.f), info.f, true
		case numFloat:
			return false, toInt64(info.f), info.f, true
		}
	}
	return false, 0, 0, false
}

// termType orders terms for comparison (the reference's HtnTermType).
func termType(t term, syms *symtab) int {
	switch t.k {
	case kVar, kRef, kFree:
		return 0
	case kFloat:
		return 1
	case kInt:
		return 2
	case kAtom:
		switch syms.info(t.sym).num {
		case numFloat:
			return 1
		case numInt:
			return 2
		}
		return 3
	}
	return 4
}

// cppCompare mimics std::string::compare as built with glibc: the
// difference of the first differing bytes, or of the lengths. The sign is
// what matters except in sortBy, whose comparator tests for exactly -1.
func cppCompare(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}

func sign3(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a == b:
		return 0
	}
	return 1
}

func sign3i(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a == b:
		return 0
	}
	return 1
}

// evaluator evaluates arithmetic on resolved terms.
type evaluator struct {
	syms *symtab
	// deref follows variable bindings; the int32 is the frame base that
	// clause-local variables in the term are relative to.
	deref func(term, int32) (term, int32)
}

func (ev evaluator) opOf(t term) arithOp {
	if t.k != kCompound && t.k != kAtom {
		return opNone
	}
	return arithNames[ev.syms.name(t.sym)]
}

// eval computes an arithmetic expression. Numbers evaluate to themselves
// (keeping their text). Errors: errUnbound and errNonNumeric make the
// caller fail or report, ErrUnknownFunction and ErrDivisionByZero are
// domain errors.
func (ev evaluator) eval(t term, base int32) (term, error) {
	t, base = ev.deref(t, base)
	switch t.k {
	case kInt, kFloat:
		return t, nil
	case kRef, kVar, kFree:
		return term{}, errUnbound
	case kAtom:
		if _, _, _, ok := numInfo(t, ev.syms); ok {
			return t, nil
		}
		return term{}, errNonNumeric
	}
	op := ev.opOf(t)
	if op == opNone || (len(t.args) != 2 && len(t.args) != 1) {
		return term{}, ErrUnknownFunction
	}
	if len(t.args) == 1 {
		switch op {
		case opAbs, opFloat, opInteger:
		case opSub, opAdd, opMul, opDiv, opMin, opMax, opLess, opGreater, opLessEq, opGreaterEq, opEq, opBadCompare:
			// Unary minus and friends are not evaluated by the reference.
			return term{}, errNonNumeric
		default:
			return term{}, ErrUnknownFunction
		}
		x, err := ev.eval(t.args[0], base)
		if err != nil {
			return term{}, err
		}
		isInt, i, f, ok := numInfo(x, ev.syms)
		if !ok {
			return term{}, errNonNumeric
		}
		switch op {
		case opAbs:
			if isInt {
				if i < 0 {
					i = -i
				}
				return intTerm(i), nil
			}
			if f < 0 {
				f = -f
			}
			return floatTerm(f), nil
		case opFloat: // the reference returns the absolute value here
			if f < 0 {
				f = -f
			}
			return floatTerm(f), nil
		default: // opInteger: absolute value of the truncated number, as in the reference
			if i < 0 {
				i = -i
			}
			return intTerm(i), nil
		}
	}
	switch op {
	case opAbs, opFloat, opInteger:
		return term{}, ErrUnknownFunction
	case opBadCompare:
		return term{}, ErrBadCall
	}
	a, err := ev.eval(t.args[0], base)
	if err != nil {
		return term{}, err
	}
	b, err := ev.eval(t.args[1], base)
	if err != nil {
		return term{}, err
	}
	ai, ia, fa, ok1 := numInfo(a, ev.syms)
	bi, ib, fb, ok2 := numInfo(b, ev.syms)
	if !ok1 || !ok2 {
		return term{}, errNonNumeric
	}
	ints := ai && bi
	boolTerm := func(v bool) term {
		if v {
			return atomTerm(symTrue)
		}
		return atomTerm(ev.syms.intern("false"))
	}
	switch op {
	case opAdd:
		if ints {
			return intTerm(ia + ib), nil
		}
		return floatTerm(fa + fb), nil
	case opSub:
		if ints {
			return intTerm(ia - ib), nil
		}
		return floatTerm(fa - fb), nil
	case opMul:
		if ints {
			return intTerm(ia * ib), nil
		}
		return floatTerm(fa * fb), nil
	case opDiv:
		if ints {
			if ib == 0 {
				return term{}, ErrDivisionByZero
			}
			return intTerm(ia / ib), nil
		}
		if fb == 0 {
			return term{}, ErrDivisionByZero
		}
		return floatTerm(fa / fb), nil
	case opMin:
		if ints {
			return intTerm(min(ia, ib)), nil
		}
		return floatTerm(min(fa, fb)), nil
	case opMax:
		if ints {
			return intTerm(max(ia, ib)), nil
		}
		return floatTerm(max(fa, fb)), nil
	case opLess:
		return boolTerm(fa < fb), nil
	case opGreater:
		return boolTerm(fa > fb), nil
	case opLessEq:
		return boolTerm(fa <= fb), nil
	case opGreaterEq:
		return boolTerm(fa >= fb), nil
	case opEq:
		if ints {
			return boolTerm(ia == ib), nil
		}
		return boolTerm(fa == fb), nil
	}
	return term{}, ErrUnknownFunction
}

// isArithmetic mirrors the reference's test for a term that `is` accepts
// on its right side: a number or an arithmetic functor.
func (ev evaluator) isArithmetic(t term, base int32) bool {
	t, _ = ev.deref(t, base)
	if _, _, _, ok := numInfo(t, ev.syms); ok {
		return true
	}
	return (t.k == kCompound || t.k == kAtom) && ev.opOf(t) != opNone
}

// compare implements the reference's TermCompare on resolved terms.
func (ev evaluator) compare(a, b term) int {
	a, _ = ev.deref(a, 0)
	b, _ = ev.deref(b, 0)
	ta, tb := termType(a, ev.syms), termType(b, ev.syms)
	if ta != tb {
		if ta < tb {
			return -1
		}
		return 1
	}
	if len(a.args) != len(b.args) {
		if len(a.args) < len(b.args) {
			return -1
		}
		return 1
	}
	if len(a.args) == 0 {
		switch ta {
		case 0:
			return cppCompare(ev.varName(a), ev.varName(b))
		case 1:
			_, _, fa, _ := numInfo(a, ev.syms)
			_, _, fb, _ := numInfo(b, ev.syms)
			return sign3(fa, fb)
		case 2:
			_, ia, _, _ := numInfo(a, ev.syms)
			_, ib, _, _ := numInfo(b, ev.syms)
			return sign3i(ia, ib)
		}
		return cppCompare(ev.syms.name(a.sym), ev.syms.name(b.sym))
	}
	if c := cppCompare(ev.syms.name(a.sym), ev.syms.name(b.sym)); c != 0 {
		return c
	}
	for i := range a.args {
		if c := ev.compare(a.args[i], b.args[i]); c != 0 {
			return c
		}
	}
	return 0
}

func (ev evaluator) varName(t term) string {
	if t.k == kFree {
		return ev.syms.name(t.sym)
	}
	return strconv.FormatInt(t.n, 10)
}

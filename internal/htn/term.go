package htn

import (
	"math"
	"strconv"
	"strings"
)

// kind tells how a term's fields are read.
type kind uint8

const (
	kAtom     kind = iota // sym is the atom
	kInt                  // n is the value
	kFloat                // n holds the float64 bits; the value is always one that prints back to itself with 9 decimals
	kCompound             // sym is the functor, args the arguments
	kVar                  // clause-local variable: n is the index in the clause frame
	kRef                  // variable in the resolver's binding store: n is the absolute cell index
	kFree                 // unbound variable that outlived a resolution (in a task or a plan): n is a unique id, sym its name
)

// term is the engine's value type. Terms are immutable once built; args
// slices are shared freely between terms.
type term struct {
	k    kind
	sym  symbol
	n    int64
	args []term
}

func atomTerm(s symbol) term           { return term{k: kAtom, sym: s} }
func intTerm(v int64) term             { return term{k: kInt, n: v} }
func compound(f symbol, a []term) term { return term{k: kCompound, sym: f, args: a} }

// floatTerm builds a float term, rounding to the 9 decimals the reference
// engine keeps: it stores every computed float as its "%.9f" text and reads
// the text back, so two floats that print the same are the same value.
func floatTerm(v float64) term {
	if !math.IsInf(v, 0) && !math.IsNaN(v) {
		if r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 9, 64), 64); err == nil {
			v = r
		}
	}
	return term{k: kFloat, n: int64(math.Float64bits(v))}
}

func (t term) float() float64 { return math.Float64frombits(uint64(t.n)) }

// isAtomic reports atoms and numbers (the reference's isConstant).
func (t term) isAtomic() bool { return t.k == kAtom || t.k == kInt || t.k == kFloat }

// sameAtomic compares two atomic terms. Numbers compare by their text, as
// in the reference, which the representation guarantees: canonical numbers
// are kInt/kFloat and every other numeric text is an atom.
func sameAtomic(a, b term) bool {
	return a.k == b.k && a.sym == b.sym && a.n == b.n
}

// equalGround reports structural identity of two terms without variables
// bound through a store (the reference's operator== on substituted terms).
func equalGround(a, b term) bool {
	if a.k != b.k || a.sym != b.sym || a.n != b.n || len(a.args) != len(b.args) {
		return false
	}
	for i := range a.args {
		if !equalGround(a.args[i], b.args[i]) {
			return false
		}
	}
	return true
}

func isGround(t term) bool {
	switch t.k {
	case kVar, kRef, kFree:
		return false
	case kCompound:
		for _, a := range t.args {
			if !isGround(a) {
				return false
			}
		}
	}
	return true
}

// hashTerm hashes a ground term (FNV-1a over its structure).
func hashTerm(t term) uint64 {
	h := uint64(14695981039346656037)
	return hashInto(h, t)
}

func hashInto(h uint64, t term) uint64 {
	const prime = 1099511628211
	h = (h ^ uint64(t.k)) * prime
	h = (h ^ uint64(uint32(t.sym))) * prime
	h = (h ^ uint64(t.n)) * prime
	h = (h ^ uint64(len(t.args))) * prime
	for _, a := range t.args {
		h = hashInto(h, a)
	}
	return h
}

// formatFloat prints a float the way the reference does (C++ fixed, 9 decimals).
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return strconv.FormatFloat(v, 'f', 9, 64)
}

// numericText reports whether s is read as a number by the reference
// (a C++ stream extraction of a double that consumes the whole text) and
// whether that number is a float (the text contains a '.').
func numericText(s string) (isNum, isFloat bool, f float64) {
	t := strings.Trim(s, " \t\n\r\v\f")
	if t == "" {
		return false, false, 0
	}
	i := 0
	if t[0] == '+' || t[0] == '-' {
		i++
	}
	digits := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
		digits++
	}
	if i < len(t) && t[i] == '.' {
		i++
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false, false, 0
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		j := i + 1
		if j < len(t) && (t[j] == '+' || t[j] == '-') {
			j++
		}
		k := j
		for k < len(t) && t[k] >= '0' && t[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	if i != len(t) {
		return false, false, 0
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil && !math.IsInf(v, 0) {
		return false, false, 0
	}
	return true, strings.Contains(s, "."), v
}

// toInt64 converts like the reference's (int64_t) cast of a double,
// saturating instead of producing an undefined value.
func toInt64(v float64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}

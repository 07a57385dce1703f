package htn

import "unsafe"

// The memory budget is enforced against an estimate that the planner and
// the resolver keep as they allocate: every allocation that outlives the
// step making it is charged to what holds it (a planner node, the world
// state, the resolver's stores, the collected plans) and released when
// that goes away. Sizes are those of the Go structs, rounded up to the
// allocator's size classes, so the estimate follows the live heap a call
// adds rather than a count of objects.

var (
	sizeTerm       = int64(unsafe.Sizeof(term{}))
	sizeNode       = allocSize(int64(unsafe.Sizeof(pnode{})))
	sizeTaskCell   = int64(unsafe.Sizeof(taskCell{}))
	sizeOpCell     = allocSize(int64(unsafe.Sizeof(opCell{})))
	sizeDecomp     = allocSize(int64(unsafe.Sizeof(decomp{})))
	sizeAnswer     = int64(unsafe.Sizeof(condAnswer{}))
	sizeAnswerRec  = int64(unsafe.Sizeof(answer{}))
	sizeBindRec    = int64(unsafe.Sizeof(bindRec{}))
	sizeSymInfo    = int64(unsafe.Sizeof(symInfo{}))
	sizeCell       = int64(unsafe.Sizeof(cell{}))
	sizeFrame      = allocSize(int64(unsafe.Sizeof(frame{})))
	sizeChoice     = int64(unsafe.Sizeof(choicepoint{}))
	sizeCtxEntry   = int64(unsafe.Sizeof(ctxEntry{}))
	sizeAdded      = int64(unsafe.Sizeof(added{}))
	sizePlan       = int64(unsafe.Sizeof(Plan{}))
	sizeBinding    = int64(unsafe.Sizeof(Binding{}))
	sizePublicTerm = int64(unsafe.Sizeof(Term{}))
	sizePtr        = int64(unsafe.Sizeof(uintptr(0)))
	sizeMethodPtr  = int64(unsafe.Sizeof((*method)(nil)))
)

// indexEntryBytes is what one added fact costs the state's two indexes
// (a slot in each map, its share of the buckets, and an index slice).
const indexEntryBytes = 96

// allocSize rounds a request of n bytes up to the size the Go allocator
// hands out: its size classes up to 32 KiB, whole pages above.
func allocSize(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= 8:
		return 8
	case n <= 16:
		return 16
	case n <= 256:
		return (n + 15) &^ 15
	case n <= 1024:
		return (n + 63) &^ 63
	case n <= 32<<10:
		return (n + 255) &^ 255
	}
	return (n + 8191) &^ 8191
}

// termsBytes is the allocation of a slice of n terms.
func termsBytes(n int) int64 { return allocSize(int64(n) * sizeTerm) }

// sliceBytes is the allocation of a slice of n elements of size elem.
func sliceBytes(n int, elem int64) int64 { return allocSize(int64(n) * elem) }

// publicTermBytes is what a detached Term holds beyond its own struct:
// its argument slices and the texts of its numbers (atom names are the
// symbol table's).
func publicTermBytes(t Term) int64 {
	var n int64
	switch t.Kind {
	case Integer, Float:
		n += allocSize(int64(len(t.Name)))
	case Compound:
		n += sliceBytes(len(t.Args), sizePublicTerm)
		for _, a := range t.Args {
			n += publicTermBytes(a)
		}
	}
	return n
}

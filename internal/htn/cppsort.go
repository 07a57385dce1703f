package htn

// cppSort orders a slice the way libstdc++'s std::sort does (introsort with
// a median-of-three pivot, then insertion sort). sortBy must list equal keys
// in the reference's order, and std::sort is not stable, so a stable Go
// sort would print some answers in a different order. It also copes with
// comparators that are not strict weak orders, as the reference's sortBy
// comparator is for atoms (it tests compare() == -1): the unguarded loops
// of the C++ code are bounded here instead of running off the slice.
func cppSort[T any](s []T, less func(a, b *T) bool) {
	n := len(s)
	if n < 2 {
		return
	}
	depth := 0
	for m := n; m > 1; m >>= 1 {
		depth++
	}
	introsortLoop(s, 0, n, 2*(depth-1)+2, less)
	finalInsertionSort(s, 0, n, less)
}

const sortThreshold = 16

func introsortLoop[T any](s []T, first, last, depthLimit int, less func(a, b *T) bool) {
	for last-first > sortThreshold {
		if depthLimit == 0 {
			heapSort(s[first:last], less)
			return
		}
		depthLimit--
		cut := partitionPivot(s, first, last, less)
		introsortLoop(s, cut, last, depthLimit, less)
		last = cut
	}
}

func partitionPivot[T any](s []T, first, last int, less func(a, b *T) bool) int {
	mid := first + (last-first)/2
	moveMedianToFirst(s, first, first+1, mid, last-1, less)
	return unguardedPartition(s, first+1, last, first, less)
}

func moveMedianToFirst[T any](s []T, result, a, b, c int, less func(a, b *T) bool) {
	switch {
	case less(&s[a], &s[b]):
		switch {
		case less(&s[b], &s[c]):
			s[result], s[b] = s[b], s[result]
		case less(&s[a], &s[c]):
			s[result], s[c] = s[c], s[result]
		default:
			s[result], s[a] = s[a], s[result]
		}
	case less(&s[a], &s[c]):
		s[result], s[a] = s[a], s[result]
	case less(&s[b], &s[c]):
		s[result], s[c] = s[c], s[result]
	default:
		s[result], s[b] = s[b], s[result]
	}
}

func unguardedPartition[T any](s []T, first, last, pivot int, less func(a, b *T) bool) int {
	lo := first
	for {
		for first < last && less(&s[first], &s[pivot]) {
			first++
		}
		last--
		for last > lo-1 && last > pivot && less(&s[pivot], &s[last]) {
			last--
		}
		if !(first < last) {
			return first
		}
		s[first], s[last] = s[last], s[first]
		first++
	}
}

func finalInsertionSort[T any](s []T, first, last int, less func(a, b *T) bool) {
	if last-first > sortThreshold {
		insertionSort(s, first, first+sortThreshold, less)
		for i := first + sortThreshold; i < last; i++ {
			unguardedLinearInsert(s, first, i, less)
		}
		return
	}
	insertionSort(s, first, last, less)
}

func insertionSort[T any](s []T, first, last int, less func(a, b *T) bool) {
	if first == last {
		return
	}
	for i := first + 1; i < last; i++ {
		if less(&s[i], &s[first]) {
			v := s[i]
			copy(s[first+1:i+1], s[first:i])
			s[first] = v
		} else {
			unguardedLinearInsert(s, first, i, less)
		}
	}
}

func unguardedLinearInsert[T any](s []T, lo, last int, less func(a, b *T) bool) {
	v := s[last]
	next := last - 1
	for next >= lo && less(&v, &s[next]) {
		s[last] = s[next]
		last = next
		next--
	}
	s[last] = v
}

// heapSort is std::partial_sort(first, last, last): make_heap then sort_heap.
func heapSort[T any](s []T, less func(a, b *T) bool) {
	n := len(s)
	for parent := (n - 2) / 2; parent >= 0; parent-- {
		v := s[parent]
		adjustHeap(s, parent, n, v, less)
	}
	for last := n - 1; last > 0; last-- {
		v := s[last]
		s[last] = s[0]
		adjustHeap(s, 0, last, v, less)
	}
}

func adjustHeap[T any](s []T, hole, n int, v T, less func(a, b *T) bool) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(&s[child], &s[child-1]) {
			child--
		}
		s[hole] = s[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2*(child+1) - 1
		s[hole] = s[child]
		hole = child
	}
	parent := (hole - 1) / 2
	for hole > top && less(&s[parent], &v) {
		s[hole] = s[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	s[hole] = v
}

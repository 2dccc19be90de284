package pullpacer

import (
	"sync/atomic"
)

const cacheLine = 64

// spscRing is a bounded single-producer, single-consumer ring of T in process memory.
//
// Owners: exactly one goroutine produces (push, publish) and exactly one consumes
// (pop, release); which ones is documented where each ring is declared (pacer.go).
//
// Memory ordering: the producer writes slots, then publishes by storing tail; the
// consumer loads tail, reads the slots below it, then frees them by storing head; the
// producer loads head before overwriting a slot. sync/atomic operations are
// sequentially consistent and, by the Go memory model, a store observed by a load is
// synchronized before it, so slot writes are visible to the consumer and slot reads
// complete before the producer may reuse them. Each side caches the other side's index
// and reloads it only when the cached value says full (producer) or empty (consumer),
// so a batch costs one atomic load and one atomic store per side, not one per entry.
// Indices are free-running uint64 counters masked by size-1 (size is a power of two).
type spscRing[T any] struct {
	_    [cacheLine]byte
	tail atomic.Uint64 // stored by the producer only
	_    [cacheLine - 8]byte
	head atomic.Uint64 // stored by the consumer only
	_    [cacheLine - 8]byte

	// Producer-private.
	pTail       uint64 // next slot to write (published up to tail)
	pCachedHead uint64
	_           [cacheLine - 16]byte

	// Consumer-private.
	cHead       uint64 // next slot to read (released up to head)
	cCachedTail uint64
	_           [cacheLine - 16]byte

	mask  uint64
	slots []T
}

// newSPSC returns a ring with room for size entries (rounded up to a power of two, at
// least 2).
func newSPSC[T any](size int) *spscRing[T] {
	n := 2
	for n < size {
		n <<= 1
	}
	return &spscRing[T]{mask: uint64(n - 1), slots: make([]T, n)}
}

// capacity returns the number of slots.
func (r *spscRing[T]) capacity() int { return len(r.slots) }

// push writes v into the next free slot without publishing it; false means full.
// Producer only.
func (r *spscRing[T]) push(v T) bool {
	if r.pTail-r.pCachedHead > r.mask {
		r.pCachedHead = r.head.Load()
		if r.pTail-r.pCachedHead > r.mask {
			return false
		}
	}
	r.slots[r.pTail&r.mask] = v
	r.pTail++
	return true
}

// free returns how many entries the producer can push now. Producer only.
func (r *spscRing[T]) free() int {
	r.pCachedHead = r.head.Load()
	return int(r.mask + 1 - (r.pTail - r.pCachedHead))
}

// publish makes every pushed entry visible to the consumer. Producer only.
func (r *spscRing[T]) publish() {
	if r.tail.Load() != r.pTail {
		r.tail.Store(r.pTail)
	}
}

// pop reads the next published entry; false means empty. The slot stays owned by the
// consumer until release. Consumer only.
func (r *spscRing[T]) pop() (T, bool) {
	if r.cHead == r.cCachedTail {
		r.cCachedTail = r.tail.Load()
		if r.cHead == r.cCachedTail {
			var zero T
			return zero, false
		}
	}
	v := r.slots[r.cHead&r.mask]
	r.cHead++
	return v, true
}

// release hands every popped slot back to the producer. Consumer only.
func (r *spscRing[T]) release() {
	if r.head.Load() != r.cHead {
		r.head.Store(r.cHead)
	}
}

// hasMore reports whether the producer has published entries the consumer has not
// popped. Consumer only.
func (r *spscRing[T]) hasMore() bool {
	return r.tail.Load() != r.cHead
}

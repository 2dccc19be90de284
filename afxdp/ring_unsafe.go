//go:build linux

package afxdp

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The four AF_XDP rings are single-producer/single-consumer queues shared
// with the kernel through mmap. Each has a producer index, a consumer index,
// a flags word and a power-of-two array of slots; the indices are free-running
// u32 counters and a slot is index & mask.
//
// Memory ordering follows the kernel's contract in net/xdp/xsk_queue.h
// (mirrored by libxdp's xsk.h: xsk_ring_prod__reserve/submit,
// xsk_ring_cons__peek/release):
//
//	producer                           consumer
//	if (LOAD ->consumer) {   (A)       LOAD.acq ->producer   (C)
//	   STORE $data                     LOAD $data
//	   STORE.rel ->producer  (B)       STORE.rel ->consumer  (D)
//	}
//
// (A) pairs with (D) and (B) pairs with (C). In Go we use sync/atomic loads
// and stores on the shared indices; they are sequentially consistent, which
// is at least acquire (for loads) and release (for stores), and the compiler
// never moves ordinary loads/stores of the slots across them. The slots
// themselves are ordinary memory accessed only between (C)/(D) or before (B).
//
// Each ring caches the other side's index (cachedCons / cachedProd) so that
// the shared cache line is read only when the cached value says the ring
// looks full (producer) or empty (consumer), as libxdp does. For a producer
// ring cachedCons is kept as consumer+size, so free = cachedCons-cachedProd.
//
// Ownership: userspace produces on fill and TX and consumes on RX and
// completion. Every ring of a Queue is driven by the single goroutine that
// owns the Port; nothing here is safe for concurrent use.

type ringHeader struct {
	producer *atomic.Uint32
	consumer *atomic.Uint32
	flags    *atomic.Uint32
	mask     uint32
	size     uint32

	cachedProd uint32
	cachedCons uint32
}

func (r *ringHeader) init(mem []byte, off unix.XDPRingOffset, size uint32, producer bool) {
	base := unsafe.Pointer(unsafe.SliceData(mem))
	r.producer = (*atomic.Uint32)(unsafe.Add(base, off.Producer))
	r.consumer = (*atomic.Uint32)(unsafe.Add(base, off.Consumer))
	r.flags = (*atomic.Uint32)(unsafe.Add(base, off.Flags))
	r.size = size
	r.mask = size - 1
	// The kernel starts both indices at 0; read them anyway so a ring that is
	// reopened (shared UMEM fill ring) resumes where it is.
	r.cachedProd = r.producer.Load()
	r.cachedCons = r.consumer.Load()
	if producer {
		r.cachedCons += size
	}
}

// prodFree returns how many slots the producer may fill, up to want.
// It reads the kernel's consumer index (A) only when the cache is short.
func (r *ringHeader) prodFree(want uint32) uint32 {
	free := r.cachedCons - r.cachedProd
	if free >= want {
		return want
	}
	r.cachedCons = r.consumer.Load() + r.size // (A) pairs with the kernel's (D)
	free = r.cachedCons - r.cachedProd
	if free > want {
		free = want
	}
	return free
}

// prodSubmit publishes n slots written since the last submit (B).
func (r *ringHeader) prodSubmit(n uint32) {
	r.cachedProd += n
	r.producer.Store(r.cachedProd) // (B) release: the slots are visible before the index
}

// consAvail returns how many slots the consumer may read, up to want. It
// reads the kernel's producer index (C) only when the cache is empty.
func (r *ringHeader) consAvail(want uint32) uint32 {
	avail := r.cachedProd - r.cachedCons
	if avail == 0 {
		r.cachedProd = r.producer.Load() // (C) acquire, pairs with the kernel's (B)
		avail = r.cachedProd - r.cachedCons
	}
	if avail > want {
		avail = want
	}
	return avail
}

// consRelease hands n read slots back to the kernel (D).
func (r *ringHeader) consRelease(n uint32) {
	r.cachedCons += n
	r.consumer.Store(r.cachedCons) // (D) release: our slot reads happen before the kernel reuses them
}

// needWakeup reports the kernel's XDP_RING_NEED_WAKEUP flag (READ_ONCE in libxdp).
func (r *ringHeader) needWakeup() bool {
	return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0
}

// published reports whether the producer published slots the consumer has
// not released yet. It reads both shared indices and no cached field, so
// unlike the rest of the ring it may be called from any goroutine.
func (r *ringHeader) published() bool {
	return r.producer.Load() != r.consumer.Load()
}

// addrRing is a fill or completion ring: slots are UMEM addresses.
type addrRing struct {
	ringHeader
	slots []uint64
}

// descRing is an RX or TX ring: slots are xdp_desc.
type descRing struct {
	ringHeader
	slots []Desc
}

// mapRing mmaps one ring of fd at pgoff and returns the mapping.
func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, size uint32, slotSize uintptr) ([]byte, error) {
	length := int(off.Desc) + int(size)*int(slotSize)
	return unix.Mmap(fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
}

func (r *addrRing) init(mem []byte, off unix.XDPRingOffset, size uint32, producer bool) {
	r.ringHeader.init(mem, off, size, producer)
	r.slots = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off.Desc])), size)
}

func (r *descRing) init(mem []byte, off unix.XDPRingOffset, size uint32, producer bool) {
	r.ringHeader.init(mem, off, size, producer)
	r.slots = unsafe.Slice((*Desc)(unsafe.Pointer(&mem[off.Desc])), size)
}

// Compile-time check that Desc matches struct xdp_desc.
var _ [unsafe.Sizeof(unix.XDPDesc{})]struct{} = [unsafe.Sizeof(Desc{})]struct{}{}

const descSize = unsafe.Sizeof(Desc{})

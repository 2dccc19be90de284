package ring

import "sync/atomic"

// Memory ordering
//
// A ring block holds two index words, each on its own 128-byte line and
// each written by exactly one side:
//
//   - the producer index, stored only by the producer;
//   - the consumer index, stored only by the consumer.
//
// Go's sync/atomic operations are sequentially consistent (the Go memory
// model: an atomic store is synchronized before the atomic load that
// observes it), and a shared mapping is the same physical memory in both
// processes, so the pairing below holds across processes exactly as it
// holds between goroutines:
//
//  1. Producer: write descriptors (plain stores) → atomic store of the
//     producer index. Pairs with the consumer's atomic load of the producer
//     index, after which its plain loads of those descriptors see the writes
//     (release/acquire; the kernel's AF_XDP rings use smp_store_release /
//     smp_load_acquire for the same pair).
//  2. Consumer: read descriptors (plain loads, copied into private Descs) →
//     atomic store of the consumer index. Pairs with the producer's atomic
//     load of the consumer index, after which it may overwrite those slots:
//     the consumer's reads happen before the producer's overwrite.
//  3. Wakeups (wake.go) additionally need store→load ordering (a Dekker
//     pattern), which only sequentially consistent atomics give; Go's do
//     (XCHG on amd64, STLR/LDAR on arm64).
//
// Neither side ever reads back its own index from shared memory: the
// producer's position and the consumer's position are private copies, and
// only the peer's index is loaded, then checked (it may only move forward,
// and never more than a ring's worth ahead), so a peer that scribbles on
// the indices poisons the ring (ErrRingCorrupt) but cannot make this side
// read or write outside its slots. Descriptors are copied out field by
// field before anyone looks at them, so a peer rewriting a slot after it
// was read changes nothing.
//
// Positions are free-running uint64 counters (they do not wrap in practice:
// 2^64 descriptors); a slot is position & (slots-1). Both sides start at 0 on
// a freshly created region.

// ring is the part shared by Producer and Consumer.
type ring struct {
	prodIdx *uint64 // shared: written by the producer only
	consIdx *uint64 // shared: written by the consumer only
	descs   []byte  // shared: slots*DescSize bytes
	mask    uint64
	size    uint64
	spec    RingSpec
	err     error // sticky ErrRingCorrupt
}

// Spec returns the ring's table entry (kind, socket, slots).
func (r *ring) Spec() RingSpec { return r.spec }

// Err returns ErrRingCorrupt once the peer broke the ring's invariants, nil before.
func (r *ring) Err() error { return r.err }

// Producer is the producing end of a single-producer/single-consumer ring of
// descriptors in shared memory. Exactly one goroutine of one process owns a
// Producer (the side named by RingSpec.Producer); it is not safe for
// concurrent use. The consumer is the other process.
type Producer struct {
	ring
	prod      uint64 // private producer position (authoritative)
	consCache uint64 // consumer position last loaded from shared memory
}

// Consumer is the consuming end of a single-producer/single-consumer ring.
// Exactly one goroutine of one process owns a Consumer; it is not safe for
// concurrent use. The producer is the other process.
type Consumer struct {
	ring
	cons      uint64 // private consumer position (authoritative)
	prodCache uint64 // producer position last loaded from shared memory
}

// refresh loads the consumer index and checks it: it may only move forward
// and never past our producer position. Pairs with the consumer's atomic
// store in Release (ordering rule 2).
func (p *Producer) refresh() error {
	c := atomic.LoadUint64(p.consIdx)
	if c-p.consCache > p.prod-p.consCache {
		p.err = ErrRingCorrupt
		return p.err
	}
	p.consCache = c
	return nil
}

// Free returns how many descriptors Produce would accept now, loading the
// consumer index.
func (p *Producer) Free() (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if err := p.refresh(); err != nil {
		return 0, err
	}
	return int(p.size - (p.prod - p.consCache)), nil
}

// Queued returns how many published descriptors the consumer has not
// released yet (the ring's occupancy), loading the consumer index.
func (p *Producer) Queued() (int, error) {
	free, err := p.Free()
	if err != nil {
		return 0, err
	}
	return int(p.size) - free, nil
}

// Produce copies as many of ds as fit into the ring and publishes them with
// one atomic store of the producer index. It returns how many it published;
// fewer than len(ds) is backpressure (the ring is full), not an error. The
// only error is ErrRingCorrupt. No allocation, no syscall: wake the consumer
// with a Notifier after a batch if it may be asleep.
func (p *Producer) Produce(ds []Desc) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	free := p.size - (p.prod - p.consCache)
	if free < uint64(len(ds)) {
		if err := p.refresh(); err != nil {
			return 0, err
		}
		free = p.size - (p.prod - p.consCache)
	}
	n := min(uint64(len(ds)), free)
	if n == 0 {
		return 0, nil
	}
	for i := uint64(0); i < n; i++ {
		slot := (p.prod + i) & p.mask
		PutDesc(p.descs[slot*DescSize:slot*DescSize+DescSize], &ds[i])
	}
	p.prod += n
	// Ordering rule 1: the descriptor stores above happen before this store.
	atomic.StoreUint64(p.prodIdx, p.prod)
	return int(n), nil
}

// HasSpace loads the consumer index afresh and reports whether at least
// one slot is free (or the ring is corrupt, so the owner should look). It is the "pending" check of a producer that sleeps
// until the consumer makes room (see Waiter.Wait).
func (p *Producer) HasSpace() bool {
	if p.err != nil || p.refresh() != nil {
		return true // let the owner see the error
	}
	return p.prod-p.consCache < p.size
}

// refresh loads the producer index and checks it: it may only move forward
// and never more than one ring ahead of our consumer position. Pairs with
// the producer's atomic store in Produce (ordering rule 1).
func (c *Consumer) refresh() error {
	p := atomic.LoadUint64(c.prodIdx)
	if p-c.cons > c.size || p-c.cons < c.prodCache-c.cons {
		c.err = ErrRingCorrupt
		return c.err
	}
	c.prodCache = p
	return nil
}

// Available returns how many descriptors Peek can return now, loading the
// producer index.
func (c *Consumer) Available() (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if err := c.refresh(); err != nil {
		return 0, err
	}
	return int(c.prodCache - c.cons), nil
}

// Peek copies up to len(dst) descriptors, oldest first, into dst without
// consuming them, and returns how many it copied (0 when the ring is empty).
// The slots stay reserved until Release; calling Peek again returns the same
// descriptors. The only error is ErrRingCorrupt.
func (c *Consumer) Peek(dst []Desc) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	avail := c.prodCache - c.cons
	if avail < uint64(len(dst)) {
		if err := c.refresh(); err != nil {
			return 0, err
		}
		avail = c.prodCache - c.cons
	}
	n := min(uint64(len(dst)), avail)
	for i := uint64(0); i < n; i++ {
		slot := (c.cons + i) & c.mask
		GetDesc(c.descs[slot*DescSize:slot*DescSize+DescSize], &dst[i])
	}
	return int(n), nil
}

// Release frees the n oldest descriptors (previously returned by Peek) for
// the producer to reuse, with one atomic store of the consumer index. It
// releases at most as many as are available and returns that count.
func (c *Consumer) Release(n int) int {
	if n <= 0 || c.err != nil {
		return 0
	}
	k := min(uint64(n), c.prodCache-c.cons)
	c.cons += k
	// Ordering rule 2: the descriptor loads in Peek happen before this store.
	atomic.StoreUint64(c.consIdx, c.cons)
	return int(k)
}

// Consume is Peek followed by Release of everything peeked: it copies up to
// len(dst) descriptors into dst and frees their slots.
func (c *Consumer) Consume(dst []Desc) (int, error) {
	n, err := c.Peek(dst)
	if n > 0 {
		c.Release(n)
	}
	return n, err
}

// Pending loads the producer index afresh and reports whether a descriptor
// is waiting. It is the "pending" check of a consumer about to sleep (see
// Waiter.Wait), and must not use the cached position.
func (c *Consumer) Pending() bool {
	if c.err != nil {
		return true // let the owner see the error
	}
	return c.refresh() != nil || c.prodCache != c.cons
}

// newRing builds the view of the ring block described by spec inside mem
// (the whole region mapping; ParseHeader/NewLayout already checked bounds).
func newRing(mem []byte, spec RingSpec) (ring, error) {
	prod, ok1 := word64(mem, spec.Offset+ringProducerOff)
	cons, ok2 := word64(mem, spec.Offset+ringConsumerOff)
	if !ok1 || !ok2 {
		return ring{}, headerErr("ring offset", "%v ring at %d is not 8-byte aligned in memory", spec.Kind, spec.Offset)
	}
	start := spec.Offset + ringDescOff
	return ring{
		prodIdx: prod,
		consIdx: cons,
		descs:   mem[start : start+uint64(spec.Slots)*DescSize : start+uint64(spec.Slots)*DescSize],
		mask:    uint64(spec.Slots) - 1,
		size:    uint64(spec.Slots),
		spec:    spec,
	}, nil
}

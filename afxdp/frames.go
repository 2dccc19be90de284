package afxdp

import "fmt"

// Desc is one packet descriptor, laid out like the kernel's struct xdp_desc
// so RX and TX ring slots are copied without conversion. Addr is a byte
// offset into the UMEM (frame base + data offset), Len the packet length.
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// Owner says which party holds a UMEM frame. A frame index is a token owned
// by exactly one party at a time; every move between parties goes through
// the ledger, which checks the party handing it over really had it.
type Owner uint8

const (
	// OwnerFree: in the UMEM's free list, available to Alloc and to refills
	// of the fill rings.
	OwnerFree Owner = iota
	// OwnerFill: on a fill ring or held by the kernel for a future receive.
	OwnerFill
	// OwnerApp: handed to the application, by Receive or Alloc, until it is
	// released or transmitted.
	OwnerApp
	// OwnerTx: on a TX ring, in the kernel's transmit path or on the
	// completion ring, until Complete reaps it back into the free list.
	OwnerTx
	numOwners
)

func (o Owner) String() string {
	switch o {
	case OwnerFree:
		return "free-list"
	case OwnerFill:
		return "fill/kernel-rx"
	case OwnerApp:
		return "app"
	case OwnerTx:
		return "tx/completion"
	}
	return fmt.Sprintf("Owner(%d)", uint8(o))
}

// Accounting is a snapshot of the frame ledger: how many frames each party
// holds, and how many ownership violations were caught. In a quiescent port
// (nothing in flight) App and Tx are zero and Free+Fill == Total.
type Accounting struct {
	Total      int
	Free       int
	Fill       int
	App        int
	Tx         int
	Violations uint64
}

// Check returns an error when frames are held by the application or the
// transmit path, or when violations were counted: call it when the port is
// quiescent (all transmits completed, all received frames released).
func (a Accounting) Check() error {
	if a.Free+a.Fill+a.App+a.Tx != a.Total {
		return fmt.Errorf("%w: ledger sums to %d of %d frames", ErrFrameOwnership, a.Free+a.Fill+a.App+a.Tx, a.Total)
	}
	if a.App != 0 || a.Tx != 0 || a.Violations != 0 {
		return fmt.Errorf("%w: %d frames held by app, %d in transmit, %d violations", ErrFrameOwnership, a.App, a.Tx, a.Violations)
	}
	return nil
}

// frameLedger records the owner of every frame and keeps the free list.
// It has a single owner: the goroutine that drives the Port (all methods of
// UMEM and Queue that move frames). It allocates nothing after construction.
type frameLedger struct {
	owner  []Owner
	counts [numOwners]int
	// The free frames, in two LIFO stacks (recently used frames stay
	// cache-hot): sent holds those back from transmission (Complete),
	// free the others (released after receiving, or never used). Alloc
	// takes from sent first and fill-ring refills take from it last (pop).
	free, sent []uint32
	violations uint64
}

func newFrameLedger(n int) *frameLedger {
	l := &frameLedger{owner: make([]Owner, n), free: make([]uint32, n), sent: make([]uint32, 0, n)}
	for i := range l.free {
		// Pop order 0, 1, 2, ...
		l.free[i] = uint32(n - 1 - i)
	}
	l.counts[OwnerFree] = n
	return l
}

// move hands frame idx from one party to another. It reports a *FrameError
// (and counts a violation) when idx is not owned by from; the ledger is then
// left unchanged.
func (l *frameLedger) move(op string, idx uint32, from, to Owner) *FrameError {
	if int(idx) >= len(l.owner) {
		l.violations++
		return &FrameError{Op: op, Frame: idx, Have: numOwners, Want: from}
	}
	if have := l.owner[idx]; have != from {
		l.violations++
		return &FrameError{Op: op, Frame: idx, Have: have, Want: from}
	}
	l.owner[idx] = to
	l.counts[from]--
	l.counts[to]++
	return nil
}

// pop takes one free frame and gives it to to: for the application (Alloc:
// a transmit buffer) the frame that last came back from transmission, for
// the fill ring one released after receiving or never used, so each kind
// keeps to its own frames. In AF_XDP copy mode a received frame's lines
// were last written by the sender's CPU (the kernel's copy runs in the
// peer's sendto); building a frame into one took those lines back, line by
// line, on the critical path of the frame being built, where a transmitted
// frame's lines were only read, by this thread's own sendto.
func (l *frameLedger) pop(to Owner) (uint32, bool) {
	list := &l.free
	if (to == OwnerApp && len(l.sent) > 0) || len(l.free) == 0 {
		list = &l.sent
	}
	n := len(*list)
	if n == 0 {
		return 0, false
	}
	idx := (*list)[n-1]
	*list = (*list)[:n-1]
	l.owner[idx] = to
	l.counts[OwnerFree]--
	l.counts[to]++
	return idx, true
}

// push returns frame idx, owned by from, to the free list.
func (l *frameLedger) push(op string, idx uint32, from Owner) *FrameError {
	if err := l.move(op, idx, from, OwnerFree); err != nil {
		return err
	}
	if from == OwnerTx {
		l.sent = append(l.sent, idx) // within capacity, as free's
		return nil
	}
	l.free = append(l.free, idx) // within capacity: at most len(owner) frames are free
	return nil
}

func (l *frameLedger) accounting() Accounting {
	return Accounting{
		Total:      len(l.owner),
		Free:       l.counts[OwnerFree],
		Fill:       l.counts[OwnerFill],
		App:        l.counts[OwnerApp],
		Tx:         l.counts[OwnerTx],
		Violations: l.violations,
	}
}

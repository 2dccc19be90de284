package engine

import "time"

// Link is the NIC side of a Stack: batch receive and transmit of Ethernet
// frames. Implementations: XDPLink (AF_XDP through package afxdp, Linux) and
// MemLink (an in-memory cable for tests and examples).
//
// A Link is driven by whoever holds the Stack's lock: Receive,
// ReleaseReceived, AllocTx and Transmit are never called concurrently with
// each other. Wait is called by the background poller without the lock, and
// Wake and Kick from any goroutine at any time.
type Link interface {
	// MAC is the link's Ethernet address.
	MAC() [6]byte
	// FrameCap is the largest frame the link carries, Ethernet header
	// included, FCS excluded.
	FrameCap() int
	// Receive fills frames with up to len(frames) received frames and
	// returns how many. frames[i] aliases link memory that the caller owns
	// until ReleaseReceived.
	Receive(frames [][]byte) int
	// ReleaseReceived gives back every frame of the last Receive.
	ReleaseReceived()
	// AllocTx fills bufs with up to len(bufs) more empty transmit buffers
	// (len 0, cap >= FrameCap) and returns how many. Buffers handed out
	// since the last Transmit accumulate in order, so a caller can ask for
	// a few and then for more. Fewer than asked means backpressure (ring or
	// pool full).
	AllocTx(bufs [][]byte) int
	// Transmit sends frames: a prefix, in order, of the buffers handed out
	// since the last Transmit, each sliced to its frame length, in one
	// batch. The rest of those buffers go back to the link unused. The link
	// accepts all frames (AllocTx only hands out what the ring can take).
	// A link whose device needs telling (a syscall) only queues them: they
	// leave at the next Kick.
	Transmit(frames [][]byte) error
	// Kick makes the device send what Transmit queued (AF_XDP: one sendto
	// for everything queued since the last Kick; nothing when nothing is
	// queued). The Stack calls it after releasing its lock, never under
	// it: it may run concurrently with any method, another Kick included,
	// and after Close it does nothing.
	Kick() error
	// SwapTx swaps buffers i and j among those handed out since the last
	// Transmit, so the caller can send frames in another order than it
	// built them (after swapping its own slice entries the same way).
	SwapTx(i, j int)
	// Wait blocks until frames may be ready to Receive, Wake is called, or
	// timeout passes (negative: no timeout). Spurious returns are allowed.
	// One goroutine at a time calls it (the Stack's link sleeper).
	Wait(timeout time.Duration) error
	// Wake makes a Wait in progress (or the next one) return at once.
	Wake()
	// Close releases the link's resources.
	Close() error
}

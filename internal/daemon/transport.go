package daemon

import (
	"net/netip"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// ConnID names one connection of a Transport (an engine connection handle).
// 0 is never valid.
type ConnID uint64

// Transport is what the daemon core needs from a network stack: in ndpd an
// internal/engine.Stack (one per interface queue) behind a thin adapter; in
// the unit tests an in-memory loopback. Every method is called from the
// core goroutine only, and none may block: short counts and (0, nil) mean
// "not now", and the transport reports later progress through Events.
type Transport interface {
	// Listen accepts connections on an NDP port; Unlisten stops.
	Listen(port uint16) error
	Unlisten(port uint16)
	// Dial registers a connection (zero-RTT: nothing is sent before data).
	// It never waits: when the transport must first resolve the peer's
	// link address, it returns pending = true and an ID that only
	// identifies the dial until TEDialed reports on it (with the
	// connection's ID, or the error); Abort or Release of a pending ID
	// cancels the dial.
	Dial(remote netip.AddrPort, opts DialOptions) (id ConnID, pending bool, err error)
	// Write copies as much of p as fits into c's send buffer; with fin and
	// all of p taken, the write side is closed after p (as CloseWrite), so
	// a short last message and its FIN can leave in one packet. The data
	// may wait for the next Poll to be sent (the core polls after every
	// batch of writes), so a batch leaves as full packets, not one short
	// packet per application frame.
	Write(c ConnID, p []byte, fin bool) (int, error)
	// CloseWrite queues a FIN after the data written so far.
	CloseWrite(c ConnID) error
	// Read copies received in-order bytes of c into p: (0, nil) when none
	// are ready, io.EOF after the peer's FIN, the connection's error once it
	// failed. It takes only what an earlier Poll received and does no
	// network work of its own (no receive, no transmit): the core reads a
	// frame's worth at a time, and its one Poll per iteration is the batch.
	Read(c ConnID, p []byte) (int, error)
	// Release hands c back: graceful when the peer's stream ended (FIN after
	// the queued data, then the transport frees it), an abort otherwise.
	Release(c ConnID)
	// Abort resets c and releases it; the peer sees code.Err()
	// (ndp.ResetAbort: a plain reset).
	Abort(c ConnID, code ndp.ResetCode)
	// Poll runs one batch of network work (receive, timers, pulls,
	// transmit) and reports whether it did anything. With deferTx the
	// frames that the batch's input produced (ACKs; not PULLs) may wait
	// for the next Poll, so that the core hands the received bytes to the
	// application before it pays their transmit; the core never defers
	// twice in a row. spun: the core polled again at once since its last
	// Poll (it did not sleep), so a long gap since then is a stall of the
	// host, which the transport may take into account (the engine's RTO:
	// engine.Stack.PollLoop).
	Poll(deferTx, spun bool) bool
	// Events moves up to len(dst) pending connection events into dst.
	Events(dst []TransportEvent) int
	// PollTimeout is how long the core may sleep before the transport needs
	// Poll again without any input (a timer or a paced pull); < 0 = no limit.
	PollTimeout() time.Duration
	// WaitFD is a descriptor that becomes readable when the network has
	// input for Poll (the AF_XDP socket), or -1.
	WaitFD() int
	// SetWakeup gives the transport a function that wakes the core (safe
	// from any goroutine): its background work (a neighbour resolution
	// finishing) calls it after making the result visible to Events.
	SetWakeup(wake func())
}

// TransportEventKind says what a TransportEvent reports.
type TransportEventKind uint8

const (
	// TEAccepted: a new inbound connection on a listened port.
	TEAccepted TransportEventKind = iota + 1
	// TEReadable: Read on Conn returns data, io.EOF or an error.
	TEReadable
	// TEWritable: Write on Conn accepts bytes again.
	TEWritable
	// TEClosed: Conn is finished (Err nil = clean); Read reports the rest.
	TEClosed
	// TEDialed: the pending dial Conn finished: Err, or the connection is
	// Dialed from now on (Conn is dead either way).
	TEDialed
)

// TransportEvent is one connection event of a Transport.
type TransportEvent struct {
	Kind      TransportEventKind
	Conn      ConnID
	LocalPort uint16         // TEAccepted: the listened port it arrived on
	Remote    netip.AddrPort // TEAccepted
	Priority  uint8          // TEAccepted
	Err       error          // TEClosed, TEDialed
	Dialed    ConnID         // TEDialed: the connection's ID
}

package daemon

import (
	"net/netip"
	"time"
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
	Dial(remote netip.AddrPort, opts DialOptions) (ConnID, error)
	// Write copies as much of p as fits into c's send buffer.
	Write(c ConnID, p []byte) (int, error)
	// CloseWrite queues a FIN after the data written so far.
	CloseWrite(c ConnID) error
	// Read copies received in-order bytes of c into p: (0, nil) when none
	// are ready, io.EOF after the peer's FIN, the connection's error once it
	// failed.
	Read(c ConnID, p []byte) (int, error)
	// Release hands c back: graceful when the peer's stream ended (FIN after
	// the queued data, then the transport frees it), an abort otherwise.
	Release(c ConnID)
	// Abort resets c (the peer sees a reset) and releases it.
	Abort(c ConnID)
	// Poll runs one batch of network work (receive, timers, pulls,
	// transmit) and reports whether it did anything.
	Poll() bool
	// Events moves up to len(dst) pending connection events into dst.
	Events(dst []TransportEvent) int
	// PollTimeout is how long the core may sleep before the transport needs
	// Poll again without any input (a timer or a paced pull); < 0 = no limit.
	PollTimeout() time.Duration
	// WaitFD is a descriptor that becomes readable when the network has
	// input for Poll (the AF_XDP socket), or -1.
	WaitFD() int
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
)

// TransportEvent is one connection event of a Transport.
type TransportEvent struct {
	Kind      TransportEventKind
	Conn      ConnID
	LocalPort uint16         // TEAccepted: the listened port it arrived on
	Remote    netip.AddrPort // TEAccepted
	Priority  uint8          // TEAccepted
	Err       error          // TEClosed
}

package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// Opcodes of the ndpd ring protocol, on top of the ones package ring
// defines (OpData, OpConnect, OpListen, OpClose, OpReply). Which ring each
// travels on, and the meaning of every descriptor field, is in doc.go.
const (
	// Commands, app → daemon on the cmd ring.
	OpUnlisten   ring.Op = ring.OpEngineBase + 0x00 // Aux = port; replied
	OpAbort      ring.Op = ring.OpEngineBase + 0x01 // Conn = slot; not replied (EvSlotFree follows)
	OpCloseWrite ring.Op = ring.OpEngineBase + 0x02 // Conn = slot: FIN after the data already on TX(slot)
	OpSetOption  ring.Op = ring.OpEngineBase + 0x03 // Conn = slot, Flags = option, Aux = value; applies to the next OpConnect on slot

	// Notifications, daemon → app on the event ring.
	EvAccepted ring.Op = ring.OpEngineBase + 0x10 // Conn = accept slot, Aux = remote, Cookie = local port, Flags = priority

	// Markers, daemon → app on RX(slot), in order with the data.
	OpEnd      ring.Op = ring.OpEngineBase + 0x20 // end of the receive stream: Aux = Status (StatusOK = clean EOF)
	OpSlotFree ring.Op = ring.OpEngineBase + 0x21 // last descriptor of the slot's life (after OpClose/OpAbort)
)

// Option identifiers carried in Flags of OpSetOption.
const (
	OptSize     uint16 = 1 // D3 size hint in bytes
	OptDeadline uint16 = 2 // D3 deadline, nanoseconds from the moment the daemon reads OpConnect
	OptPriority uint16 = 3 // strict priority class (0..255)
	OptPaced    uint16 = 4 // 1 = ask the edge pacer to pace pushed packets
)

// Status is the result code carried in Aux of OpReply and OpEnd.
type Status uint64

// Status codes. Each maps to one sentinel error (StatusError.Unwrap).
const (
	StatusOK Status = iota
	StatusReset
	StatusRefused
	StatusDeadline
	StatusTimeout
	StatusClosed
	StatusTooManyConns
	StatusPortInUse
	StatusInvalid
	StatusDraining
	StatusBadSlot
	StatusInternal
	StatusNoNeighbor
	StatusResolverBusy
	StatusTooLarge // the peer's message server refused the message as too large
	statusCount
)

var statusNames = [...]string{"ok", "reset", "refused", "deadline unmeetable", "timeout", "closed", "too many connections", "port in use", "invalid argument", "daemon draining", "bad slot", "internal error", "neighbour unreachable", "too many neighbour resolutions", "message too large"}

func (s Status) String() string {
	if s < statusCount {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint64(s))
}

// Sentinel errors of the daemon protocol that have no ndp equivalent.
var (
	// ErrDraining: ndpd is shutting down and takes no new connections or listeners.
	ErrDraining = errors.New("ndpd: draining, no new connections")
	// ErrBadSlot: a command named a socket slot the sender does not own, or
	// one in the wrong state (counted and dropped by the daemon).
	ErrBadSlot = errors.New("ndpd: bad socket slot")
	// ErrInternal: the daemon failed in a way the application cannot fix.
	ErrInternal = errors.New("ndpd: internal error")
	// ErrDaemonGone: the daemon closed the control connection (it stopped
	// or crashed); every call on an attached stack returns it.
	ErrDaemonGone = errors.New("ndpd: daemon gone")
	// ErrClientClosed: the application closed its Client (every call after).
	ErrClientClosed = errors.New("ndpd: client closed")
	// ErrProtocol: the peer broke the ring protocol (bad opcode, bad field).
	ErrProtocol = errors.New("ndpd: protocol violation")
	// ErrNoSlot: every socket slot of the region is in use (backpressure).
	ErrNoSlot = errors.New("ndpd: no free socket slot")
	// ErrNotAllowed: the control socket refused the peer's credentials.
	ErrNotAllowed = errors.New("ndpd: peer credentials not allowed")
	// ErrResolverBusy: a dial needed a neighbour resolution while ndpd
	// already had its bound of addresses waiting to be resolved
	// (backpressure; retry later).
	ErrResolverBusy = errors.New("ndpd: too many neighbour resolutions in progress")
)

var statusErrors = [...]error{nil, ndp.ErrConnReset, ndp.ErrConnRefused, ndp.ErrDeadlineUnmeetable, ndp.ErrTimeout, ndp.ErrClosed, ndp.ErrTooManyConns, ndp.ErrPortInUse, ndp.ErrInvalidConfig, ErrDraining, ErrBadSlot, ErrInternal, engine.ErrNoNeighbor, ErrResolverBusy, ndp.ErrMessageTooLarge}

// Err returns the sentinel error of s (nil for StatusOK). Unknown codes from
// a newer peer map to ErrProtocol.
func (s Status) Err() error {
	if s < statusCount {
		return statusErrors[s]
	}
	return ErrProtocol
}

// StatusOf maps an error to its status code (StatusInternal for errors
// without a code).
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	for s := Status(1); s < statusCount; s++ {
		if errors.Is(err, statusErrors[s]) {
			return s
		}
	}
	if errors.Is(err, ndp.ErrInvalidHandle) {
		return StatusClosed
	}
	return StatusInternal
}

// PackAddr packs an IPv4 address and port into a descriptor's Aux:
// bits 16..47 the address (big-endian order as a number), bits 0..15 the port.
// It reports false for anything but an IPv4 (or IPv4-mapped) address.
func PackAddr(ap netip.AddrPort) (uint64, bool) {
	a := ap.Addr().Unmap()
	if !a.Is4() {
		return 0, false
	}
	b := a.As4()
	ip := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	return ip<<16 | uint64(ap.Port()), true
}

// UnpackAddr is the inverse of PackAddr. Bits above 47 must be zero.
func UnpackAddr(aux uint64) (netip.AddrPort, bool) {
	if aux>>48 != 0 {
		return netip.AddrPort{}, false
	}
	ip := uint32(aux >> 16)
	a := netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)})
	return netip.AddrPortFrom(a, uint16(aux)), true
}

// DialOptions are the per-connection options an application sets before
// OpConnect (OpSetOption), mirrored from ndp.DialOptions.
type DialOptions struct {
	Size     int64         // D3 size hint, bytes (0 = none)
	Deadline time.Duration // D3 deadline relative to the dial (0 = none)
	Priority uint8         // strict priority class (0 = normal)
	Paced    bool          // pace pushed packets at the edge
}

// OptionDescs appends the OpSetOption descriptors that convey o for slot
// (only the non-zero options) to dst.
func (o DialOptions) OptionDescs(dst []ring.Desc, slot uint32) []ring.Desc {
	add := func(opt uint16, v uint64) {
		dst = append(dst, ring.Desc{Frame: ring.NoFrame, Conn: slot, Op: OpSetOption, Flags: opt, Aux: v})
	}
	if o.Size > 0 {
		add(OptSize, uint64(o.Size))
	}
	if o.Deadline > 0 {
		add(OptDeadline, uint64(o.Deadline))
	}
	if o.Priority > 0 {
		add(OptPriority, uint64(o.Priority))
	}
	if o.Paced {
		add(OptPaced, 1)
	}
	return dst
}

// applyOption folds one OpSetOption descriptor into o. It returns
// ErrProtocol for an unknown option or an out-of-range value.
func (o *DialOptions) applyOption(d *ring.Desc) error {
	switch d.Flags {
	case OptSize:
		if d.Aux > 1<<62 {
			return ErrProtocol
		}
		o.Size = int64(d.Aux)
	case OptDeadline:
		if d.Aux > uint64(24*time.Hour) {
			return ErrProtocol
		}
		o.Deadline = time.Duration(d.Aux)
	case OptPriority:
		if d.Aux > 255 {
			return ErrProtocol
		}
		o.Priority = uint8(d.Aux)
	case OptPaced:
		if d.Aux > 1 {
			return ErrProtocol
		}
		o.Paced = d.Aux == 1
	default:
		return ErrProtocol
	}
	return nil
}

// Slot ownership. A region of n socket slots is split in two halves: the
// application allocates slots [0, n/2) for the connections it dials; the
// daemon allocates slots [n/2, n) for the connections it accepts on the
// application's behalf. Either kind returns to its allocator only through
// the close handshake: OpClose or OpAbort on the cmd ring, answered by the
// OpSlotFree marker as the last descriptor on RX(slot). The daemon reuses
// an accept slot only once RX(slot) is empty, i.e. the app consumed the
// marker, so a new connection's data never mixes with the old one's.

// DialSlots returns how many slots of an n-slot region the application allocates.
func DialSlots(n int) int { return n / 2 }

// The application's sleep word (region header, appSleeping) holds two
// counts the client keeps with atomic adds: its sleeping goroutines (the
// designated sleeper; low half) and its writers waiting for TX frames
// (high half). The core reads it after each iteration and writes the app's
// eventfd only when what it produced answers a reason to wait someone has
// (wakeReason): data, ends of streams, accepted connections and replies
// wake a sleeper; returned TX frames wake it only while a writer waits for
// frames; a freed slot or a successful dial's reply wakes nobody (the app
// takes them on its next poll).
const (
	appSleepersMask  uint32 = 0x0000ffff
	appFrameWaiter   uint32 = 1 << 16
	appFrameWaitMask uint32 = 0xffff0000
)

// wakeReason is what an iteration produced for an application, by who
// waits for it.
type wakeReason uint8

const (
	wakeReaders wakeReason = 1 << iota // RX data, OpEnd, EvAccepted, a reply somebody waits for
	wakeWriters                        // completions: frames back for a writer out of them
)

// mask is the part of the app's sleep word that makes r worth a wakeup.
func (r wakeReason) mask() uint32 {
	var m uint32
	if r&wakeReaders != 0 {
		m |= appSleepersMask
	}
	if r&wakeWriters != 0 {
		m |= appFrameWaitMask
	}
	return m
}

// eventWake is the wakeReason of an event-ring descriptor: a successful
// dial's OpReply wakes nobody (a dial does not wait for it; a failed one
// must reach the socket's reader), everything else wakes a sleeper.
func eventWake(d *ring.Desc) wakeReason {
	if d.Op == ring.OpReply && d.Cookie&connectCookie != 0 && Status(d.Aux) == StatusOK {
		return 0
	}
	return wakeReaders
}

// socketInflightCap is how many TX frames one socket of an application
// with a partition of part frames may have in flight (the client enforces
// it): an eighth of the partition, at least 4, so a blocked socket cannot
// hold the whole partition.
func socketInflightCap(part uint32) uint32 { return max(part/8, 4) }

package ndp

import (
	"errors"
	"strconv"
)

// Sentinel errors. Parse failures are reported as *ParseError values that
// match ErrMalformed and, more specifically, one of ErrTruncated,
// ErrNotNDP, ErrVersion, ErrBadLength or ErrBadChecksum via errors.Is.
var (
	// ErrMalformed matches every *ParseError.
	ErrMalformed = errors.New("ndp: malformed frame")
	// ErrTruncated: the buffer is shorter than the headers it claims.
	ErrTruncated = errors.New("ndp: truncated frame")
	// ErrNotNDP: not Ethernet II / IPv4 without options / UDP, a fragment,
	// or not addressed to this endpoint's NDP service port.
	ErrNotNDP = errors.New("ndp: not an NDP frame")
	// ErrVersion: NDP header version is not Version.
	ErrVersion = errors.New("ndp: unsupported NDP version")
	// ErrBadLength: an IPv4, UDP or NDP length field is inconsistent.
	ErrBadLength = errors.New("ndp: inconsistent length field")
	// ErrBadChecksum: the IPv4 header or UDP checksum does not verify.
	ErrBadChecksum = errors.New("ndp: bad checksum")
	// ErrBadType: unknown NDP packet type.
	ErrBadType = errors.New("ndp: unknown packet type")
	// ErrBufferTooSmall: BuildFrame/PollFrame target buffer cannot hold the frame.
	ErrBufferTooSmall = errors.New("ndp: buffer too small")
	// ErrPayloadTooLarge: payload does not fit the MTU or the 16-bit length field.
	ErrPayloadTooLarge = errors.New("ndp: payload too large")

	// ErrConnReset: the peer aborted the connection (RESET received).
	ErrConnReset = errors.New("ndp: connection reset by peer")
	// ErrConnRefused: nobody listens on the remote port, or the remote
	// connection table is full.
	ErrConnRefused = errors.New("ndp: connection refused")
	// ErrDeadlineUnmeetable: the connection's D3 deadline cannot be met;
	// raised by Quench at either end and propagated to the peer.
	ErrDeadlineUnmeetable = errors.New("ndp: deadline unmeetable")
	// ErrTimeout: the connection heard nothing from its peer for
	// Config.UserTimeout while it expected something (see silence.go).
	ErrTimeout = errors.New("ndp: connection timed out")
	// ErrMessageTooLarge: the peer's message server refused the message
	// this connection sent: it is over the server's size limit (RESET
	// code ResetTooLarge).
	ErrMessageTooLarge = errors.New("ndp: message too large for the receiver")
	// ErrClosed: the handle is invalid, released, or the connection was
	// closed locally (Abort); also returned by Write after CloseWrite.
	ErrClosed = errors.New("ndp: use of closed connection")
	// ErrInvalidHandle: the handle does not name a live connection.
	ErrInvalidHandle = errors.New("ndp: invalid handle")
	// ErrTooManyConns: the connection table is full (Config.MaxConns).
	ErrTooManyConns = errors.New("ndp: too many connections")
	// ErrPortInUse: Listen on a port that is already listened on.
	ErrPortInUse = errors.New("ndp: port already in use")
	// ErrInvalidConfig wraps every Config validation failure.
	ErrInvalidConfig = errors.New("ndp: invalid config")
	// ErrUnknownConn: a frame for a connection that is neither open nor in
	// time-wait (counted; a RESET may be answered, see docs/decisions.md).
	ErrUnknownConn = errors.New("ndp: frame for unknown connection")
	// ErrTimeWait: a frame for a connection in time-wait (rejected: at-most-once).
	ErrTimeWait = errors.New("ndp: frame for connection in time-wait")
)

// ParseError describes why a frame was rejected. It matches ErrMalformed
// and its specific sentinel (Err) with errors.Is.
type ParseError struct {
	Err    error  // specific sentinel: ErrTruncated, ErrNotNDP, ErrVersion, ErrBadLength, ErrBadChecksum, ErrBadType
	Field  string // the offending field, e.g. "ipv4.total_length"
	Offset int    // byte offset of Field in the frame (-1 if not applicable)
}

func (e *ParseError) Error() string {
	s := e.Err.Error() + ": " + e.Field
	if e.Offset >= 0 {
		s += " at offset " + strconv.Itoa(e.Offset)
	}
	return s
}

// Unwrap returns the specific sentinel.
func (e *ParseError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed (every ParseError is malformed input).
func (e *ParseError) Is(target error) bool { return target == ErrMalformed }

// parseErrors are preallocated so that rejecting a frame does not allocate.
// They are immutable after package init; callers must not modify them.
var parseErrors = struct {
	short, ethType, ipVersion, ipIHL, ipProto, ipFrag, ipLen, ipCsum,
	udpLen, udpCsum, udpZeroCsum, version, typ, payloadLen, trimmedLen *ParseError
}{
	short:       &ParseError{ErrTruncated, "frame", 0},
	ethType:     &ParseError{ErrNotNDP, "ethernet.type", offEthType},
	ipVersion:   &ParseError{ErrNotNDP, "ipv4.version", offIP},
	ipIHL:       &ParseError{ErrNotNDP, "ipv4.ihl (options not supported)", offIP},
	ipProto:     &ParseError{ErrNotNDP, "ipv4.protocol", offIP + 9},
	ipFrag:      &ParseError{ErrNotNDP, "ipv4.fragment", offIP + 6},
	ipLen:       &ParseError{ErrBadLength, "ipv4.total_length", offIP + 2},
	ipCsum:      &ParseError{ErrBadChecksum, "ipv4.checksum", offIP + 10},
	udpLen:      &ParseError{ErrBadLength, "udp.length", offUDP + 4},
	udpCsum:     &ParseError{ErrBadChecksum, "udp.checksum", offUDP + 6},
	udpZeroCsum: &ParseError{ErrBadChecksum, "udp.checksum (zero: NDP requires UDP checksums)", offUDP + 6},
	version:     &ParseError{ErrVersion, "ndp.version", offNDP + hVersion},
	typ:         &ParseError{ErrBadType, "ndp.type", offNDP + hType},
	payloadLen:  &ParseError{ErrBadLength, "ndp.payload_length", offNDP + hPayloadLen},
	trimmedLen:  &ParseError{ErrBadLength, "ndp.payload on trimmed frame", offPayload},
}

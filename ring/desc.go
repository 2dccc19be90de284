package ring

import "encoding/binary"

// DescSize is the size in bytes of one ring descriptor in shared memory.
// Two descriptors share a 64-byte cache line.
//
// Wire layout of a descriptor (little-endian, offsets in bytes):
//
//	 0  uint32  Frame   buffer index into the buffer area, or NoFrame
//	 4  uint16  Off     first byte of data within the frame (headroom)
//	 6  uint16  Len     bytes of data starting at Off
//	 8  uint32  Conn    connection handle (socket slot or engine handle)
//	12  uint16  Op      opcode: OpData on data rings, a command on the cmd/event rings
//	14  uint16  Flags   opcode-specific flags (FlagLast, ...)
//	16  uint64  Aux     opcode-specific argument (sequence number, address, status)
//	24  uint64  Cookie  opaque to the ring: request id, timestamp, checksum
//
// 32 bytes rather than 16 so that the same ring type carries commands with
// real arguments (an IPv4 address and port fit in Aux; the Cookie matches a
// reply to its request) and data descriptors that carry a sequence number.
const DescSize = 32

const (
	descFrame  = 0
	descOff    = 4
	descLen    = 6
	descConn   = 8
	descOp     = 12
	descFlags  = 14
	descAux    = 16
	descCookie = 24
)

// NoFrame is the Frame value of a descriptor that carries no buffer
// (commands, replies, ACK notifications).
const NoFrame = ^uint32(0)

// Op is a descriptor opcode.
type Op uint16

// Opcodes. OpData is the only one this package interprets (its frame is
// validated). The command opcodes follow the NDP paper's library/core
// interface (section 4); their Aux/Cookie conventions belong to
// internal/engine, which may define more opcodes from OpEngineBase up.
const (
	OpData       Op = 0 // Frame/Off/Len name payload; Conn is the socket
	OpConnect    Op = 1 // app→daemon on the cmd ring: register an active socket
	OpListen     Op = 2 // app→daemon: register a passive socket, reserve slots
	OpClose      Op = 3 // app→daemon: close a socket
	OpReply      Op = 4 // daemon→app on the event ring: result of the request with the same Cookie
	OpEngineBase Op = 0x100
)

// Descriptor flags understood by this package's users.
const (
	// FlagLast marks the sender's last packet of currently available data
	// (NDP section 3).
	FlagLast uint16 = 1 << 0
)

// Desc is one ring descriptor in private (Go heap) memory. Rings copy
// descriptors in and out of shared memory field by field at the offsets
// documented on DescSize, so a Desc is never a view of shared memory: once
// a consumer holds a Desc, the peer can no longer change it (no
// time-of-check/time-of-use on validated fields).
type Desc struct {
	Frame  uint32
	Off    uint16
	Len    uint16
	Conn   uint32
	Op     Op
	Flags  uint16
	Aux    uint64
	Cookie uint64
}

// PutDesc encodes d into b[:DescSize].
func PutDesc(b []byte, d *Desc) {
	_ = b[DescSize-1]
	binary.LittleEndian.PutUint32(b[descFrame:], d.Frame)
	binary.LittleEndian.PutUint16(b[descOff:], d.Off)
	binary.LittleEndian.PutUint16(b[descLen:], d.Len)
	binary.LittleEndian.PutUint32(b[descConn:], d.Conn)
	binary.LittleEndian.PutUint16(b[descOp:], uint16(d.Op))
	binary.LittleEndian.PutUint16(b[descFlags:], d.Flags)
	binary.LittleEndian.PutUint64(b[descAux:], d.Aux)
	binary.LittleEndian.PutUint64(b[descCookie:], d.Cookie)
}

// GetDesc decodes b[:DescSize] into d.
func GetDesc(b []byte, d *Desc) {
	_ = b[DescSize-1]
	d.Frame = binary.LittleEndian.Uint32(b[descFrame:])
	d.Off = binary.LittleEndian.Uint16(b[descOff:])
	d.Len = binary.LittleEndian.Uint16(b[descLen:])
	d.Conn = binary.LittleEndian.Uint32(b[descConn:])
	d.Op = Op(binary.LittleEndian.Uint16(b[descOp:]))
	d.Flags = binary.LittleEndian.Uint16(b[descFlags:])
	d.Aux = binary.LittleEndian.Uint64(b[descAux:])
	d.Cookie = binary.LittleEndian.Uint64(b[descCookie:])
}

// CheckFrameBounds reports whether d names a frame inside [first, first+count)
// with Off+Len inside a frame of frameSize bytes. It returns ErrFrameRange or
// ErrBadLength (sentinels, no allocation), nil if d is in bounds. Ownership is
// the Pool's business; this is the stateless part of descriptor validation.
func CheckFrameBounds(d *Desc, first, count, frameSize uint32) error {
	if d.Frame < first || uint64(d.Frame) >= uint64(first)+uint64(count) {
		return ErrFrameRange
	}
	if uint32(d.Off)+uint32(d.Len) > frameSize {
		return ErrBadLength
	}
	return nil
}

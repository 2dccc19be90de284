package ndp

import (
	"encoding/binary"
)

// Wire layout (all multi-byte fields big-endian); see docs/wire.md.
//
//	offset  size  field
//	0       14    Ethernet II: dst MAC, src MAC, EtherType 0x0800
//	14      20    IPv4, IHL=5 (no options), DF set, TTL 64, protocol 17
//	34      8     UDP: src port = path entropy, dst port = NDP service port
//	42      48    NDP header (offsets below are relative to 42)
//	90      n     payload (n = NDP payload length, 0 on trimmed frames)
const (
	offEthDst  = 0
	offEthSrc  = 6
	offEthType = 12
	offIP      = 14
	offUDP     = 34
	offNDP     = 42
	offPayload = offNDP + NDPHeaderLen

	ethHeaderLen  = 14
	ipv4HeaderLen = 20
	udpHeaderLen  = 8
)

// NDP header field offsets, relative to the start of the NDP header.
const (
	hVersion     = 0  // u8  protocol version (Version)
	hType        = 1  // u8  PacketType
	hFlags       = 2  // u16 Flags
	hSrcPort     = 4  // u16 NDP source port
	hDstPort     = 6  // u16 NDP destination port
	hConnID      = 8  // u32 connection id (chosen by the dialer)
	hSeq         = 12 // u32 packet sequence number (DATA; echoed by ACK/NACK)
	hPullCounter = 16 // u32 per-connection pull counter (PULL)
	hSynOffset   = 20 // u16 seq - initial seq, valid with FlagSYN
	hPayloadLen  = 22 // u16 payload length; kept when the payload is trimmed
	hPathID      = 24 // u16 path the DATA went on (echoed by ACK/NACK)
	hPriority    = 26 // u8  priority class (0 normal)
	hCode        = 27 // u8  ResetCode for RESET; DATA with FlagAck: 1 + the acknowledged packet's path (AckPath)
	hOffset      = 28 // u64 stream byte offset of the payload (DATA)
	hFlowSize    = 36 // u64 D3 flow size hint in bytes (0 none)
	hDeadline    = 44 // u32 D3 deadline, microseconds from the send time (0 none)

	// NDPHeaderLen is the size of the NDP header.
	NDPHeaderLen = 48
)

// Version is the NDP header version this package speaks.
const Version = 1

// DefaultPort is the UDP destination port that carries NDP (the NDP service port).
const DefaultPort uint16 = 6420

// HeaderOverhead is the number of bytes of Ethernet, IPv4, UDP and NDP
// headers in front of the payload of every frame.
const HeaderOverhead = ethHeaderLen + ipv4HeaderLen + udpHeaderLen + NDPHeaderLen

// WireOverhead is the bytes an Ethernet frame occupies on the wire beyond the
// frame itself: preamble and start delimiter (8), FCS (4), inter-frame gap (12).
// The pull pacer's PULL spacing counts them.
const WireOverhead = 24

// ipOverhead is the part of HeaderOverhead that counts against the IPv4 MTU.
const ipOverhead = ipv4HeaderLen + udpHeaderLen + NDPHeaderLen

// MaxPayload returns the largest NDP payload that fits an IPv4 MTU.
func MaxPayload(mtu int) int { return mtu - ipOverhead }

// MaxFrameLen returns the largest Ethernet frame (without FCS) for an IPv4 MTU.
func MaxFrameLen(mtu int) int { return mtu + ethHeaderLen }

// PacketType is the NDP packet type.
type PacketType uint8

// Packet types.
const (
	TypeData  PacketType = 1 // payload (possibly trimmed to a header by a switch)
	TypeAck   PacketType = 2 // receiver got DATA Seq
	TypeNack  PacketType = 3 // receiver got the trimmed header of DATA Seq: queue it for retransmission
	TypePull  PacketType = 4 // receiver's pull counter advanced: send that many packets
	TypeReset PacketType = 5 // abort the connection; Code says why
)

var typeNames = [...]string{"INVALID", "DATA", "ACK", "NACK", "PULL", "RESET"}

func (t PacketType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "UNKNOWN"
}

func (t PacketType) valid() bool { return t >= TypeData && t <= TypeReset }

// Flags are NDP header flags.
type Flags uint16

// Header flags.
const (
	FlagSYN      Flags = 1 << 0  // first-RTT packet: SynOffset is valid, may open the connection
	FlagLast     Flags = 1 << 1  // sender's last packet of currently available data
	FlagFIN      Flags = 1 << 2  // payload ends the sender's byte stream
	FlagTrimmed  Flags = 1 << 3  // payload cut by a switch; PayloadLen is the original length
	FlagBounced  Flags = 1 << 4  // returned to sender by a switch (addresses swapped)
	FlagPriority Flags = 1 << 5  // strict-priority traffic
	FlagPaced    Flags = 1 << 6  // sender asked for edge pacing (informational)
	FlagPulled   Flags = 1 << 7  // DATA sent in answer to a PULL (lets the receiver's pacer refund short packets)
	FlagAckMore  Flags = 1 << 8  // ACK: Offset is a bitmap, bit i acknowledging Seq+1+i too (Config.CoalesceControl)
	FlagPull     Flags = 1 << 9  // ACK: also a PULL, PullCounter is valid (Config.CoalesceControl)
	FlagAck      Flags = 1 << 10 // DATA: also acknowledges the peer's packet PullCounter (Config.CoalesceControl)
	FlagProbe    Flags = 1 << 11 // PULL: keepalive of a silent connection, answered by an ACK with FlagProbe (or RESET)

	knownFlags = FlagSYN | FlagLast | FlagFIN | FlagTrimmed | FlagBounced | FlagPriority | FlagPaced | FlagPulled | FlagAckMore | FlagPull | FlagAck | FlagProbe
)

// ResetCode says why a RESET was sent.
type ResetCode uint8

// Reset codes.
const (
	ResetAbort    ResetCode = 0 // application abort / unknown connection -> ErrConnReset
	ResetRefused  ResetCode = 1 // no listener or table full -> ErrConnRefused
	ResetDeadline ResetCode = 2 // deadline unmeetable (Quench) -> ErrDeadlineUnmeetable
	ResetTimeout  ResetCode = 3 // sender gave up -> ErrTimeout
	ResetTooLarge ResetCode = 4 // the receiver's message server refused a message over its size limit -> ErrMessageTooLarge
)

// Err maps a reset code to the error the receiving application sees.
func (c ResetCode) Err() error {
	switch c {
	case ResetRefused:
		return ErrConnRefused
	case ResetDeadline:
		return ErrDeadlineUnmeetable
	case ResetTimeout:
		return ErrTimeout
	case ResetTooLarge:
		return ErrMessageTooLarge
	default:
		return ErrConnReset
	}
}

// Header is the decoded NDP header.
type Header struct {
	Version     uint8 // set by ParseFrame; BuildFrame always writes Version
	Type        PacketType
	Flags       Flags
	SrcPort     uint16 // NDP source port
	DstPort     uint16 // NDP destination port
	ConnID      uint32
	Seq         uint32
	PullCounter uint32
	SynOffset   uint16
	PayloadLen  uint16
	PathID      uint16
	Priority    uint8
	Code        ResetCode // RESET only
	// AckPath is, on DATA carrying an ACK (FlagAck), 1 + the path id the
	// acknowledged packet arrived on (0: not echoed). It shares the code
	// byte, which only RESET uses otherwise.
	AckPath    uint8
	Offset     uint64 // stream byte offset of the payload
	FlowSize   uint64 // D3 size hint, bytes
	DeadlineUS uint32 // D3 deadline hint, microseconds relative to sending
}

// Frame is a parsed frame view. Payload aliases the parsed buffer.
type Frame struct {
	SrcMAC, DstMAC   [6]byte
	SrcIP, DstIP     [4]byte
	SrcPort, DstPort uint16 // UDP ports: DstPort = NDP service port, SrcPort = path entropy
	Header           Header
	Payload          []byte
}

// ParseFrame decodes and validates b into f without allocating. On error f
// is partially filled and the error is a *ParseError. Trailing bytes after
// the IPv4 total length (Ethernet padding) are ignored.
func ParseFrame(b []byte, f *Frame) error { return parseFrame(b, f, nil) }

// parseFrame is ParseFrame; with cp it also accepts commodity-trimmed frames
// (CommodityTrim).
func parseFrame(b []byte, f *Frame, cp *commodityParse) error {
	if len(b) < HeaderOverhead {
		return parseErrors.short
	}
	if binary.BigEndian.Uint16(b[offEthType:]) != 0x0800 {
		return parseErrors.ethType
	}
	ip := b[offIP:]
	if ip[0]>>4 != 4 {
		return parseErrors.ipVersion
	}
	if ip[0]&0xf != 5 {
		return parseErrors.ipIHL
	}
	if ip[9] != 17 {
		return parseErrors.ipProto
	}
	if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 { // MF or fragment offset
		return parseErrors.ipFrag
	}
	if cp != nil && cp.trimMask != 0 && commodityTrimmed(b, f, cp) {
		return nil
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total < ipOverhead || total > len(ip) {
		return parseErrors.ipLen
	}
	if fold(sumBytes(0, ip[:ipv4HeaderLen])) != 0xffff {
		return parseErrors.ipCsum
	}
	udp := ip[ipv4HeaderLen:total]
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return parseErrors.udpLen
	}
	if binary.BigEndian.Uint16(udp[6:]) == 0 {
		return parseErrors.udpZeroCsum
	}
	sum := udp
	if cp != nil && cp.zeroPayload {
		sum = udp[:min(len(udp), udpHeaderLen+NDPHeaderLen)]
	}
	if !udpChecksumValidPrefix(ip[12:16], ip[16:20], sum, len(udp)) {
		return parseErrors.udpCsum
	}
	h := udp[udpHeaderLen:]
	if h[hVersion] != Version {
		return parseErrors.version
	}
	t := PacketType(h[hType])
	if !t.valid() {
		return parseErrors.typ
	}
	payload := h[NDPHeaderLen:]
	flags := Flags(binary.BigEndian.Uint16(h[hFlags:]))
	plen := binary.BigEndian.Uint16(h[hPayloadLen:])
	if flags&FlagTrimmed != 0 {
		if len(payload) != 0 {
			return parseErrors.trimmedLen
		}
	} else if int(plen) != len(payload) {
		return parseErrors.payloadLen
	}

	copy(f.DstMAC[:], b[offEthDst:offEthDst+6])
	copy(f.SrcMAC[:], b[offEthSrc:offEthSrc+6])
	copy(f.SrcIP[:], ip[12:16])
	copy(f.DstIP[:], ip[16:20])
	f.SrcPort = binary.BigEndian.Uint16(udp[0:])
	f.DstPort = binary.BigEndian.Uint16(udp[2:])
	decodeHeader(h, &f.Header)
	f.Header.Type = t
	f.Header.Flags = flags
	f.Header.PayloadLen = plen
	f.Payload = payload
	return nil
}

func decodeHeader(h []byte, hd *Header) {
	_ = h[NDPHeaderLen-1]
	hd.Version = h[hVersion]
	hd.Type = PacketType(h[hType])
	hd.Flags = Flags(binary.BigEndian.Uint16(h[hFlags:]))
	hd.SrcPort = binary.BigEndian.Uint16(h[hSrcPort:])
	hd.DstPort = binary.BigEndian.Uint16(h[hDstPort:])
	hd.ConnID = binary.BigEndian.Uint32(h[hConnID:])
	hd.Seq = binary.BigEndian.Uint32(h[hSeq:])
	hd.PullCounter = binary.BigEndian.Uint32(h[hPullCounter:])
	hd.SynOffset = binary.BigEndian.Uint16(h[hSynOffset:])
	hd.PayloadLen = binary.BigEndian.Uint16(h[hPayloadLen:])
	hd.PathID = binary.BigEndian.Uint16(h[hPathID:])
	hd.Priority = h[hPriority]
	if hd.Type == TypeReset {
		hd.Code = ResetCode(h[hCode])
	} else {
		hd.AckPath = h[hCode]
	}
	hd.Offset = binary.BigEndian.Uint64(h[hOffset:])
	hd.FlowSize = binary.BigEndian.Uint64(h[hFlowSize:])
	hd.DeadlineUS = binary.BigEndian.Uint32(h[hDeadline:])
}

func encodeHeader(h []byte, hd *Header) {
	_ = h[NDPHeaderLen-1]
	h[hVersion] = Version
	h[hType] = uint8(hd.Type)
	binary.BigEndian.PutUint16(h[hFlags:], uint16(hd.Flags))
	binary.BigEndian.PutUint16(h[hSrcPort:], hd.SrcPort)
	binary.BigEndian.PutUint16(h[hDstPort:], hd.DstPort)
	binary.BigEndian.PutUint32(h[hConnID:], hd.ConnID)
	binary.BigEndian.PutUint32(h[hSeq:], hd.Seq)
	binary.BigEndian.PutUint32(h[hPullCounter:], hd.PullCounter)
	binary.BigEndian.PutUint16(h[hSynOffset:], hd.SynOffset)
	binary.BigEndian.PutUint16(h[hPayloadLen:], hd.PayloadLen)
	binary.BigEndian.PutUint16(h[hPathID:], hd.PathID)
	h[hPriority] = hd.Priority
	if hd.Type == TypeReset {
		h[hCode] = uint8(hd.Code)
	} else {
		h[hCode] = hd.AckPath
	}
	binary.BigEndian.PutUint64(h[hOffset:], hd.Offset)
	binary.BigEndian.PutUint64(h[hFlowSize:], hd.FlowSize)
	binary.BigEndian.PutUint32(h[hDeadline:], hd.DeadlineUS)
}

// BuildFrame writes f (headers and f.Payload) into b and returns the frame
// length. Header.PayloadLen is taken from len(f.Payload) unless
// Header.Flags has FlagTrimmed, in which case no payload is written and
// Header.PayloadLen is kept. Header.Version is ignored (Version is written).
// It does not allocate.
func BuildFrame(b []byte, f *Frame) (int, error) {
	plen := len(f.Payload)
	hd := f.Header
	if hd.Flags&FlagTrimmed != 0 {
		plen = 0
	} else {
		if plen > 0xffff-ipOverhead {
			return 0, ErrPayloadTooLarge
		}
		hd.PayloadLen = uint16(plen)
	}
	n := HeaderOverhead + plen
	if len(b) < n {
		return 0, ErrBufferTooSmall
	}
	copy(b[offPayload:], f.Payload[:plen])
	writeHeaders(b, &f.DstMAC, &f.SrcMAC, &f.SrcIP, &f.DstIP, f.SrcPort, f.DstPort, &hd, plen, false)
	return n, nil
}

// writeHeaders writes Ethernet, IPv4, UDP and NDP headers in front of a
// payload of plen bytes already at b[HeaderOverhead:], and both checksums;
// with zeroPayload the UDP checksum is that of a zero payload and the
// payload bytes are not read (Config.ZeroPayload).
func writeHeaders(b []byte, dstMAC, srcMAC *[6]byte, srcIP, dstIP *[4]byte, srcPort, dstPort uint16, hd *Header, plen int, zeroPayload bool) {
	_ = b[HeaderOverhead-1]
	copy(b[offEthDst:], dstMAC[:])
	copy(b[offEthSrc:], srcMAC[:])
	binary.BigEndian.PutUint16(b[offEthType:], 0x0800)
	ip := b[offIP : offIP+ipv4HeaderLen]
	ip[0] = 0x45
	ip[1] = 0 // DSCP/ECN
	binary.BigEndian.PutUint16(ip[2:], uint16(ipOverhead+plen))
	binary.BigEndian.PutUint16(ip[4:], 0)      // identification (DF set, never fragmented)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = 17
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], srcIP[:])
	copy(ip[16:20], dstIP[:])
	binary.BigEndian.PutUint16(ip[10:], ipv4HeaderChecksum(ip))
	udp := b[offUDP : offPayload+plen]
	binary.BigEndian.PutUint16(udp[0:], srcPort)
	binary.BigEndian.PutUint16(udp[2:], dstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	udp[6], udp[7] = 0, 0
	encodeHeader(b[offNDP:offPayload], hd)
	sum := udp
	if zeroPayload {
		sum = udp[:udpHeaderLen+NDPHeaderLen]
	}
	binary.BigEndian.PutUint16(udp[6:], udpChecksumPrefix(ip[12:16], ip[16:20], sum, len(udp)))
}

// ParseHeader decodes and checks a bare NDP header (as carried in a UDP
// payload) without allocating: version, type and, for untrimmed frames,
// that PayloadLen matches the bytes following the header. It is the
// entry point for decoders that already stripped Ethernet/IPv4/UDP (the
// gopacket layer in ndp/ndplayer).
func ParseHeader(b []byte, h *Header) error {
	if len(b) < NDPHeaderLen {
		return parseErrors.short
	}
	if b[hVersion] != Version {
		return parseErrors.version
	}
	if !PacketType(b[hType]).valid() {
		return parseErrors.typ
	}
	decodeHeader(b, h)
	rest := len(b) - NDPHeaderLen
	if h.Flags&FlagTrimmed != 0 {
		if rest != 0 {
			return parseErrors.trimmedLen
		}
	} else if int(h.PayloadLen) != rest {
		return parseErrors.payloadLen
	}
	return nil
}

// PutHeader encodes h into the first NDPHeaderLen bytes of b (Version is
// always written). b must be at least NDPHeaderLen long.
func PutHeader(b []byte, h *Header) { encodeHeader(b, h) }

package ndp

import "encoding/binary"

// Preallocated so that the switch helpers never allocate, even on error.
var (
	errNotTrimmable = &ParseError{Err: ErrNotNDP, Field: "not a trimmable DATA frame", Offset: -1}
	errNotNDPFrame  = &ParseError{Err: ErrNotNDP, Field: "not an NDP frame", Offset: -1}
)

// Switch helpers used by internal/fabric and cmd/ndpswitch. They operate in
// place on a frame that already passed (or was built by) this package and
// never allocate. They re-check only what they need, so they are safe on
// arbitrary input (returning false / an error), but they do not verify
// checksums: a switch forwards what it gets.

// frameNDP returns the NDP header of b if b looks like an NDP frame
// (Ethernet II/IPv4 without options/UDP, long enough), else nil.
func frameNDP(b []byte) []byte {
	if len(b) < HeaderOverhead || b[offEthType] != 0x08 || b[offEthType+1] != 0x00 ||
		b[offIP] != 0x45 || b[offIP+9] != 17 || b[offNDP+hVersion] != Version {
		return nil
	}
	return b[offNDP:offPayload]
}

// IsTrimmable reports whether b is a DATA frame carrying payload that has
// not been trimmed yet.
func IsTrimmable(b []byte) bool {
	h := frameNDP(b)
	if h == nil || PacketType(h[hType]) != TypeData {
		return false
	}
	f := Flags(binary.BigEndian.Uint16(h[hFlags:]))
	return f&FlagTrimmed == 0 && len(b) > HeaderOverhead && binary.BigEndian.Uint16(h[hPayloadLen:]) > 0
}

// IsControl reports whether b belongs in a switch's high-priority header
// queue: ACK, NACK, PULL, RESET, and trimmed DATA headers. (Extension of
// the contract, for internal/fabric.)
func IsControl(b []byte) bool {
	h := frameNDP(b)
	if h == nil {
		return false
	}
	if PacketType(h[hType]) != TypeData {
		return true
	}
	return Flags(binary.BigEndian.Uint16(h[hFlags:]))&FlagTrimmed != 0
}

// TrimFrame cuts the payload of a DATA frame in place, sets FlagTrimmed,
// keeps the original payload length in the NDP header, fixes the IPv4 and
// UDP lengths and checksums and returns the new frame length
// (HeaderOverhead).
func TrimFrame(b []byte) (int, error) {
	if !IsTrimmable(b) {
		return 0, errNotTrimmable
	}
	h := b[offNDP:offPayload]
	binary.BigEndian.PutUint16(h[hFlags:], binary.BigEndian.Uint16(h[hFlags:])|uint16(FlagTrimmed))
	fixLengthsAndChecksums(b, 0)
	return HeaderOverhead, nil
}

// BounceFrame returns a (normally trimmed) frame to its sender: it swaps
// the MAC and IPv4 addresses, sets FlagBounced and fixes the checksums.
//
// Deviation from the first contract draft: the UDP ports are NOT swapped.
// The destination port stays the NDP service port so the sender's XDP
// steering program still matches the frame, and the source (entropy) port
// is kept. The NDP ports inside the header are not swapped either: the
// sender recognises its own header by FlagBounced.
func BounceFrame(b []byte) error {
	h := frameNDP(b)
	if h == nil {
		return errNotNDPFrame
	}
	total := int(binary.BigEndian.Uint16(b[offIP+2:]))
	if total < ipOverhead || offIP+total > len(b) {
		return parseErrors.ipLen
	}
	var mac [6]byte
	copy(mac[:], b[offEthDst:offEthDst+6])
	copy(b[offEthDst:offEthDst+6], b[offEthSrc:offEthSrc+6])
	copy(b[offEthSrc:offEthSrc+6], mac[:])
	var ip [4]byte
	copy(ip[:], b[offIP+12:offIP+16])
	copy(b[offIP+12:offIP+16], b[offIP+16:offIP+20])
	copy(b[offIP+16:offIP+20], ip[:])
	binary.BigEndian.PutUint16(h[hFlags:], binary.BigEndian.Uint16(h[hFlags:])|uint16(FlagBounced))
	fixLengthsAndChecksums(b, total-ipOverhead)
	return nil
}

// fixLengthsAndChecksums rewrites the IPv4 total length, UDP length and
// both checksums for a payload of plen bytes.
func fixLengthsAndChecksums(b []byte, plen int) {
	ip := b[offIP : offIP+ipv4HeaderLen]
	binary.BigEndian.PutUint16(ip[2:], uint16(ipOverhead+plen))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ipv4HeaderChecksum(ip))
	udp := b[offUDP : offPayload+plen]
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	udp[6], udp[7] = 0, 0
	binary.BigEndian.PutUint16(udp[6:], udpChecksum(ip[12:16], ip[16:20], udp))
}

// FrameDst returns the destination IPv4 address of an IPv4 frame.
func FrameDst(b []byte) ([4]byte, bool) {
	var a [4]byte
	if len(b) < offIP+ipv4HeaderLen || b[offEthType] != 0x08 || b[offEthType+1] != 0x00 {
		return a, false
	}
	copy(a[:], b[offIP+16:offIP+20])
	return a, true
}

// IsPreCredit reports whether b is a DATA frame with payload that its sender pushed
// without a PULL (the first RTT's window, or data written after LAST): what OPF may
// detour (internal/fabric Detour).
func IsPreCredit(b []byte) bool {
	return IsTrimmable(b) && Flags(binary.BigEndian.Uint16(b[offNDP+hFlags:]))&FlagPulled == 0
}

// FramePriority reports whether b is PRIORITY-flagged NDP traffic.
func FramePriority(b []byte) bool {
	h := frameNDP(b)
	return h != nil && Flags(binary.BigEndian.Uint16(h[hFlags:]))&FlagPriority != 0
}

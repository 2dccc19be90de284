package ndp

import "encoding/binary"

// CommodityTrim lets an endpoint work through switches that trim packets
// without knowing NDP, as shipping switches do (SAI packet trimming, NVIDIA
// Spectrum): on a failed buffer admission such a switch cuts the frame to a
// configured size (128 bytes by default), rewrites its DSCP to a configured
// value (possibly one toward hosts and another toward the fabric) and sends it
// on a high-priority queue. It sets no NDP flag and may or may not fix the IPv4
// and UDP lengths and checksums.
//
// With TrimDSCPs set, the endpoint marks its frames so such a switch can
// classify them (DataDSCP on DATA frames with payload, ControlDSCP on every
// other frame) and accepts a DATA frame that carries one of TrimDSCPs and
// fewer payload bytes than its NDP header's PayloadLen as a trimmed header,
// exactly as if it had arrived with FlagTrimmed: whether the IPv4 total length
// still counts the cut bytes or was fixed, and whether the IPv4 header
// checksum was fixed after the DSCP rewrite or not (it must be valid with
// either the rewritten or the original DSCP). The UDP checksum of such a frame
// is not checked (it covered the cut payload), and no payload byte is
// delivered from it. The whole NDP header (HeaderOverhead bytes) must be inside
// the trim size.
//
// The zero value (no TrimDSCPs) is off: frames carry DSCP 0, and a frame
// shorter than its lengths say is malformed.
type CommodityTrim struct {
	// DataDSCP marks DATA frames with payload (trim-eligible), 0..63.
	DataDSCP uint8
	// ControlDSCP marks every other frame (high priority), 0..63.
	ControlDSCP uint8
	// TrimDSCPs are the values a trimming switch writes into a trimmed frame,
	// 0..63 each, at most 4 (toward hosts, toward the fabric).
	TrimDSCPs []uint8
}

func (c CommodityTrim) valid() bool {
	if c.DataDSCP > 63 || c.ControlDSCP > 63 || len(c.TrimDSCPs) > 4 {
		return false
	}
	for _, d := range c.TrimDSCPs {
		if d > 63 {
			return false
		}
	}
	return true
}

// commodityParse is CommodityTrim as the parser uses it, and whether the
// endpoint takes payloads to be zero (Config.ZeroPayload).
type commodityParse struct {
	trimMask    uint64 // bit d set: DSCP d marks a commodity-trimmed frame
	dataTOS     byte   // DataDSCP << 2
	zeroPayload bool   // verify the UDP checksum of a zero payload
}

func (c CommodityTrim) parse() commodityParse {
	var p commodityParse
	for _, d := range c.TrimDSCPs {
		p.trimMask |= 1 << (d & 63)
	}
	p.dataTOS = c.DataDSCP << 2
	return p
}

// ParseFrameCommodity is ParseFrame that also accepts a frame trimmed by a
// commodity switch configured with ct (see CommodityTrim) and returns it as a
// trimmed header: f.Header.Flags has FlagTrimmed and f.Payload is empty. It
// does not allocate.
func ParseFrameCommodity(b []byte, f *Frame, ct *CommodityTrim) error {
	p := ct.parse()
	return parseFrame(b, f, &p)
}

// commodityTrimmed reports whether b (already checked for an IPv4 header
// without options, UDP, no fragment, and at least HeaderOverhead bytes) is a
// DATA frame cut by a commodity switch, and if so fills f as a trimmed header.
func commodityTrimmed(b []byte, f *Frame, cp *commodityParse) bool {
	ip := b[offIP:]
	if cp.trimMask&(1<<(ip[1]>>2)) == 0 {
		return false
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total < ipOverhead {
		return false
	}
	h := b[offNDP:offPayload]
	if h[hVersion] != Version || PacketType(h[hType]) != TypeData {
		return false
	}
	flags := Flags(binary.BigEndian.Uint16(h[hFlags:]))
	plen := int(binary.BigEndian.Uint16(h[hPayloadLen:]))
	avail := min(total, len(ip)) - ipOverhead
	if flags&FlagTrimmed != 0 || plen == 0 || avail >= plen {
		return false // not cut: the ordinary checks apply
	}
	if fold(sumBytes(0, ip[:ipv4HeaderLen])) != 0xffff {
		// The switch may have rewritten the DSCP without fixing the checksum:
		// then the header sums correctly with the original DSCP.
		var hdr [ipv4HeaderLen]byte
		copy(hdr[:], ip[:ipv4HeaderLen])
		hdr[1] = cp.dataTOS | hdr[1]&3
		if fold(sumBytes(0, hdr[:])) != 0xffff {
			return false
		}
	}
	copy(f.DstMAC[:], b[offEthDst:offEthDst+6])
	copy(f.SrcMAC[:], b[offEthSrc:offEthSrc+6])
	copy(f.SrcIP[:], ip[12:16])
	copy(f.DstIP[:], ip[16:20])
	f.SrcPort = binary.BigEndian.Uint16(b[offUDP:])
	f.DstPort = binary.BigEndian.Uint16(b[offUDP+2:])
	decodeHeader(h, &f.Header)
	f.Header.Flags = flags | FlagTrimmed
	f.Payload = b[offPayload:offPayload]
	return true
}

// setDSCP writes dscp into the IPv4 header of a frame built by writeHeaders
// and fixes the header checksum incrementally (RFC 1624).
func setDSCP(b []byte, dscp uint8) {
	if dscp == 0 {
		return
	}
	ip := b[offIP:]
	SetIPv4Word(ip, 0, uint16(ip[0])<<8|uint16(dscp<<2|ip[1]&3))
}

package fabric

// MarkCE sets ECN CE on an IPv4 frame (Ethernet II, no VLAN tag) that is
// ECN-capable (ECT(0) or ECT(1)) or already marked, fixing the IPv4 header
// checksum incrementally (RFC 1624). It reports whether the frame now carries
// CE; a frame that is not IPv4 or not ECN-capable is left alone. Drop-tail
// queues of the software switch (internal/softswitch) mark with it, as the
// phantom queue does.
func MarkCE(f []byte) bool {
	const ipOff = 14
	if len(f) < ipOff+20 || f[12] != 0x08 || f[13] != 0x00 || f[ipOff]>>4 != 4 || f[ipOff+1]&3 == 0 {
		return false
	}
	return markCE(f)
}

package softswitch

import (
	"github.com/ndpstack/ndpstack/ndp"
)

// commodityTrimmer is the admission of a switch that trims without knowing NDP,
// as SAI packet trimming does (fabric.Trimmer): frames are classified by DSCP
// only. DataDSCP frames use the port's data queue; on a failed admission the
// arriving frame is cut to TrimSize bytes (its IPv4 and UDP lengths and the UDP
// checksum are left as they were: the frame is now shorter than its IP total
// length), its DSCP is rewritten to TrimDSCP (IPv4 header checksum fixed) and
// it joins the high-priority (header) queue. ControlDSCP and TrimDSCP frames
// use the high-priority queue directly. fabric.Port serves the two queues
// WRRHeaders:1 as for the NDP-aware switch; there is no return to sender: a
// trimmed frame that finds the high-priority queue full is dropped.
type commodityTrimmer struct{ cfg CommodityConfig }

// dscp returns the DSCP of an IPv4 frame (the caller checked it is one).
func dscp(f []byte) uint8 { return f[15] >> 2 }

// setDSCP rewrites the DSCP of an IPv4 frame, keeping ECN, and fixes the header
// checksum incrementally (RFC 1624).
func setDSCP(f []byte, v uint8) {
	const ipOff = 14
	ndp.SetIPv4Word(f[ipOff:], 0, uint16(f[ipOff])<<8|uint16(v<<2|f[ipOff+1]&3))
}

// classifies reports whether f belongs in the commodity queues: IPv4 with one
// of the configured DSCP values.
func (t commodityTrimmer) classifies(f []byte) bool {
	if len(f) < 34 || f[12] != 0x08 || f[13] != 0x00 || f[14]>>4 != 4 {
		return false
	}
	d := dscp(f)
	return d == t.cfg.DataDSCP || d == t.cfg.ControlDSCP || d == t.cfg.TrimDSCP
}

// Trimmable implements fabric.Trimmer: DataDSCP frames (classifies passed).
func (t commodityTrimmer) Trimmable(f []byte) bool { return dscp(f) == t.cfg.DataDSCP }

// Control implements fabric.Trimmer: ControlDSCP and TrimDSCP frames.
func (t commodityTrimmer) Control(f []byte) bool {
	d := dscp(f)
	return d == t.cfg.ControlDSCP || d == t.cfg.TrimDSCP
}

// Trim implements fabric.Trimmer: cut to TrimSize, DSCP rewritten to TrimDSCP.
func (t commodityTrimmer) Trim(f []byte) (int, error) {
	n := min(len(f), t.cfg.TrimSize)
	setDSCP(f, t.cfg.TrimDSCP)
	return n, nil
}

package softswitch

import (
	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// commodityPort is an output port of a switch that trims without knowing NDP, as
// SAI packet trimming does: frames are classified by DSCP only. DataDSCP frames
// use a DataQueue-packet data queue; on a failed admission the arriving frame is
// cut to TrimSize bytes (its IPv4 and UDP lengths and the UDP checksum are left
// as they were: the frame is now shorter than its IP total length), its DSCP is
// rewritten to TrimDSCP (IPv4 header checksum fixed) and it joins the
// high-priority queue. ControlDSCP and TrimDSCP frames use the high-priority
// queue directly. The two queues are served WRRHeaders:1 like fabric.Port's.
// There is no return to sender: a trimmed frame that finds the high-priority
// queue full is dropped.
type commodityPort struct {
	cfg       CommodityConfig
	dataCap   int
	hiCap     int // bytes
	wrr       int
	data, hi  ring
	hiB       int
	wrrCredit int
	st        fabric.Stats
}

func newCommodityPort(cfg Config, _ uint64) (*commodityPort, error) {
	fc := cfg.Fabric
	if fc.DataQueue == 0 {
		fc.DataQueue = 8
	}
	if fc.HeaderQueueBytes == 0 {
		fc.HeaderQueueBytes = fc.DataQueue * 9000
	}
	if fc.WRRHeaders == 0 {
		fc.WRRHeaders = 10
	}
	p := &commodityPort{cfg: cfg.Commodity, dataCap: fc.DataQueue, hiCap: fc.HeaderQueueBytes, wrr: fc.WRRHeaders, wrrCredit: fc.WRRHeaders}
	p.data.init(fc.DataQueue)
	p.hi.init(fc.HeaderQueueBytes/64 + 1)
	return p, nil
}

// commodityBuffers is how many queue buffers one commodity port may hold.
func commodityBuffers(cfg Config) int {
	p, _ := newCommodityPort(cfg, 0)
	return p.dataCap + len(p.hi.buf)
}

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
func (p *commodityPort) classifies(f []byte) bool {
	if len(f) < 34 || f[12] != 0x08 || f[13] != 0x00 || f[14]>>4 != 4 {
		return false
	}
	d := dscp(f)
	return d == p.cfg.DataDSCP || d == p.cfg.ControlDSCP || d == p.cfg.TrimDSCP
}

func (p *commodityPort) pushHi(f []byte) bool {
	if p.hiB+len(f) > p.hiCap || p.hi.len() == len(p.hi.buf) {
		return false
	}
	p.hi.push(f)
	p.hiB += len(f)
	p.st.MaxHeaderBytes = max(p.st.MaxHeaderBytes, p.hiB)
	return true
}

func (p *commodityPort) Enqueue(f []byte, _ ndp.Time) (fabric.Verdict, []byte, []byte, []byte) {
	p.st.Arrivals++
	if dscp(f) != p.cfg.DataDSCP {
		if !p.pushHi(f) {
			p.st.Dropped++
			return fabric.Dropped, f, nil, nil
		}
		return fabric.Queued, f, nil, nil
	}
	if p.data.len() < p.dataCap {
		p.data.push(f)
		p.st.MaxDataDepth = max(p.st.MaxDataDepth, p.data.len())
		return fabric.Queued, f, nil, nil
	}
	if len(f) > p.cfg.TrimSize {
		f = f[:p.cfg.TrimSize]
	}
	setDSCP(f, p.cfg.TrimDSCP)
	p.st.Trimmed++
	if !p.pushHi(f) {
		p.st.Dropped++
		return fabric.Dropped, f, nil, nil
	}
	return fabric.QueuedTrimmed, f, nil, nil
}

func (p *commodityPort) ReturnToSender([]byte) bool { return false }

func (p *commodityPort) Dequeue(ndp.Time) ([]byte, bool) {
	var f []byte
	switch {
	case p.hi.len() > 0 && (p.wrrCredit > 0 || p.data.len() == 0):
		f = p.hi.pop()
		p.hiB -= len(f)
		if p.wrrCredit > 0 {
			p.wrrCredit--
		}
	case p.data.len() > 0:
		f = p.data.pop()
		p.wrrCredit = p.wrr
	default:
		return nil, false
	}
	p.st.Departures++
	p.st.DepartureBytes += uint64(len(f))
	return f, true
}

func (p *commodityPort) Empty() bool         { return p.data.len() == 0 && p.hi.len() == 0 }
func (p *commodityPort) Stats() fabric.Stats { return p.st }

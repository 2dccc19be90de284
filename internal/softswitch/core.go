package softswitch

import (
	"encoding/binary"
	"fmt"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// bufSize is the size of one queued frame's buffer: the largest frame the switch
// forwards (a 2048-byte AF_XDP frame holds at most 1792 bytes of packet).
const bufSize = 2048

// maxMACs bounds the learned MAC table; past it, unknown destinations are flooded.
const maxMACs = 4096

// PortStats are one output port's counters.
type PortStats struct {
	Name string `json:"name"`
	// NDP is the port's NDP queue (internal/fabric's counters; for the commodity
	// personality the same fields count the commodity queues).
	NDP fabric.Stats `json:"ndp"`
	// Other counts the drop-tail queue of every other frame.
	OtherArrivals uint64 `json:"other_arrivals"`
	OtherDrops    uint64 `json:"other_drops"`
	OtherMarks    uint64 `json:"other_ecn_marks"`
	OtherMaxDepth int    `json:"other_max_depth"`
	TxFrames      uint64 `json:"tx_frames"`  // frames handed to the port's veth
	TxBytes       uint64 `json:"tx_bytes"`   //
	TxDropped     uint64 `json:"tx_dropped"` // departures the veth refused (ring or pool full, link gone)
	Down          bool   `json:"down"`       // the port's interface disappeared or reported an error
}

// Stats are the switch's counters.
type Stats struct {
	RxFrames   uint64 `json:"rx_frames"`
	Malformed  uint64 `json:"malformed"`   // shorter than an Ethernet header
	Oversize   uint64 `json:"oversize"`    // longer than a queue buffer
	Flooded    uint64 `json:"flooded"`     // frames sent to every other port (broadcast, unknown)
	Hairpin    uint64 `json:"hairpin"`     // destination on the port the frame came from: dropped
	NoBuffer   uint64 `json:"no_buffer"`   // no queue buffer left: dropped
	Unroutable uint64 `json:"unroutable"`  // a return-to-sender header toward an unknown MAC
	Trimmed    uint64 `json:"trimmed"`     // summed over ports
	Bounced    uint64 `json:"bounced"`     // summed over ports
	NDPDropped uint64 `json:"ndp_dropped"` // summed over ports
	// The Run loop's own cost: passes that moved frames, sleeps in ppoll(2),
	// and the CPU time of its thread (user + system, RUSAGE_THREAD).
	BusyPasses uint64      `json:"busy_passes"`
	Sleeps     uint64      `json:"sleeps"`
	CPUSeconds float64     `json:"cpu_seconds"`
	Ports      []PortStats `json:"ports"`
}

// Sub returns s minus an earlier snapshot (counters only; depths and Down are s's).
func (s Stats) Sub(old Stats) Stats {
	d := s
	d.RxFrames -= old.RxFrames
	d.Malformed -= old.Malformed
	d.Oversize -= old.Oversize
	d.Flooded -= old.Flooded
	d.Hairpin -= old.Hairpin
	d.NoBuffer -= old.NoBuffer
	d.Unroutable -= old.Unroutable
	d.Trimmed -= old.Trimmed
	d.Bounced -= old.Bounced
	d.NDPDropped -= old.NDPDropped
	d.BusyPasses -= old.BusyPasses
	d.Sleeps -= old.Sleeps
	d.CPUSeconds -= old.CPUSeconds
	d.Ports = append([]PortStats(nil), s.Ports...)
	for i := range d.Ports {
		if i >= len(old.Ports) {
			break
		}
		p, o := &d.Ports[i], old.Ports[i]
		p.NDP.Arrivals -= o.NDP.Arrivals
		p.NDP.Departures -= o.NDP.Departures
		p.NDP.DepartureBytes -= o.NDP.DepartureBytes
		p.NDP.Trimmed -= o.NDP.Trimmed
		p.NDP.TrimmedTail -= o.NDP.TrimmedTail
		p.NDP.Bounced -= o.NDP.Bounced
		p.NDP.Dropped -= o.NDP.Dropped
		p.NDP.PhantomMarks -= o.NDP.PhantomMarks
		p.OtherArrivals -= o.OtherArrivals
		p.OtherDrops -= o.OtherDrops
		p.OtherMarks -= o.OtherMarks
		p.TxFrames -= o.TxFrames
		p.TxBytes -= o.TxBytes
		p.TxDropped -= o.TxDropped
	}
	return d
}

// ndpQueue is an output port's NDP queue discipline: internal/fabric's Port
// (NDP-aware) or commodityPort.
type ndpQueue interface {
	Enqueue(frame []byte, now ndp.Time) (v fabric.Verdict, out []byte, bounced, dropped []byte)
	ReturnToSender(frame []byte) bool
	Dequeue(now ndp.Time) ([]byte, bool)
	Empty() bool
	Stats() fabric.Stats
}

// outPort is one output port: its NDP queues, its drop-tail queue and the
// emulated link's clock.
type outPort struct {
	name  string
	ndp   ndpQueue
	other ring
	next  ndp.Time // when the emulated link is free for the next frame
	turn  bool     // both classes backlogged: alternate, starting with NDP
	down  bool
	st    PortStats
}

func (o *outPort) empty() bool { return o.ndp.Empty() && o.other.len() == 0 }

// core is the switch's sans-IO part: frames and `now` in, frames per output port
// out. One goroutine owns it.
type core struct {
	cfg       Config
	ports     []*outPort
	macs      map[[6]byte]uint8
	free      [][]byte // queue buffers, each bufSize long
	psPerByte int64    // emulated serialisation time of one byte, picoseconds
	horizon   ndp.Time
	maxLag    ndp.Time
	st        Stats
}

func newCore(cfg Config) (*core, error) {
	c := &core{cfg: cfg, macs: make(map[[6]byte]uint8), psPerByte: 8e12 / cfg.Rate,
		horizon: ndp.Time(cfg.Horizon), maxLag: ndp.Time(cfg.CatchUp)}
	per := cfg.OtherQueue + 64
	for i, name := range cfg.Ports {
		o := &outPort{name: name}
		switch cfg.Personality {
		case TrimCommodity:
			q, err := newCommodityPort(cfg, uint64(i))
			if err != nil {
				return nil, err
			}
			o.ndp = q
		default:
			fc := cfg.Fabric
			fc.Seed += uint64(i)
			q, err := fabric.NewPort(fc)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConfig, err)
			}
			o.ndp = q
			fc = q.Config()
			per += fc.DataQueue + fc.HeaderQueueBytes/ndp.HeaderOverhead
		}
		o.other.init(cfg.OtherQueue)
		c.ports = append(c.ports, o)
	}
	if cfg.Personality == TrimCommodity {
		per += commodityBuffers(cfg)
	}
	n := per * len(cfg.Ports)
	arena := make([]byte, n*bufSize)
	c.free = make([][]byte, n)
	for i := range c.free {
		c.free[i] = arena[i*bufSize : i*bufSize : (i+1)*bufSize]
	}
	return c, nil
}

func (c *core) get() ([]byte, bool) {
	n := len(c.free)
	if n == 0 {
		return nil, false
	}
	b := c.free[n-1]
	c.free = c.free[:n-1]
	return b, true
}

// put gives a queue buffer back (any reslice of one from get).
func (c *core) put(b []byte) { c.free = append(c.free, b[:0]) }

// ingress switches one frame that arrived on port in. b is the caller's; the
// switch copies what it queues.
func (c *core) ingress(in int, b []byte, now ndp.Time) {
	c.st.RxFrames++
	if len(b) < 14 {
		c.st.Malformed++
		return
	}
	if len(b) > bufSize {
		c.st.Oversize++
		return
	}
	var src, dst [6]byte
	copy(dst[:], b[0:6])
	copy(src[:], b[6:12])
	if src[0]&1 == 0 && src != ([6]byte{}) {
		if p, ok := c.macs[src]; !ok && len(c.macs) < maxMACs || ok && int(p) != in {
			c.macs[src] = uint8(in)
		}
	}
	if dst[0]&1 == 0 {
		if out, ok := c.macs[dst]; ok {
			if int(out) == in {
				c.st.Hairpin++
				return
			}
			c.forward(int(out), b, now)
			return
		}
	}
	c.st.Flooded++
	for p := range c.ports {
		if p != in {
			c.forward(p, b, now)
		}
	}
}

// classifies reports whether f uses o's NDP queues: for the NDP-aware switch an
// IPv4 frame without options to the NDP UDP port, for the commodity switch an
// IPv4 frame with one of the configured DSCP values.
func (c *core) classifies(o *outPort, f []byte) bool {
	if cp, ok := o.ndp.(*commodityPort); ok {
		return cp.classifies(f)
	}
	return len(f) >= ndp.HeaderOverhead && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17 &&
		binary.BigEndian.Uint16(f[36:38]) == c.cfg.NDPPort
}

// forward copies b into a queue buffer and offers it to output port p.
func (c *core) forward(p int, b []byte, now ndp.Time) {
	o := c.ports[p]
	if o.down {
		return
	}
	buf, ok := c.get()
	if !ok {
		c.st.NoBuffer++
		return
	}
	f := buf[:len(b)]
	copy(f, b)
	if o.empty() && o.next < now {
		o.next = now
	}
	if !c.classifies(o, f) {
		o.st.OtherArrivals++
		d := o.other.len()
		if d >= c.cfg.OtherQueue {
			o.st.OtherDrops++
			c.put(f)
			return
		}
		if c.cfg.OtherECN > 0 && d >= c.cfg.OtherECN && fabric.MarkCE(f) {
			o.st.OtherMarks++
		}
		o.other.push(f)
		o.st.OtherMaxDepth = max(o.st.OtherMaxDepth, d+1)
		return
	}
	v, out, bounced, dropped := o.ndp.Enqueue(f, now)
	switch v {
	case fabric.Bounced:
		c.returnToSender(out, now)
	case fabric.Dropped:
		if o.ndp.ReturnToSender(out) {
			c.returnToSender(out, now)
		} else {
			c.put(out)
		}
	}
	if bounced != nil {
		c.returnToSender(bounced, now)
	}
	if dropped != nil {
		c.put(dropped)
	}
}

// returnToSender queues a bounced header (already addressed back to its sender)
// on the port that leads to its new destination MAC.
func (c *core) returnToSender(f []byte, now ndp.Time) {
	var dst [6]byte
	copy(dst[:], f[0:6])
	p, ok := c.macs[dst]
	if !ok || c.ports[p].down {
		c.st.Unroutable++
		c.put(f)
		return
	}
	o := c.ports[p]
	if o.empty() && o.next < now {
		o.next = now
	}
	v, out, _, _ := o.ndp.Enqueue(f, now)
	if v == fabric.Dropped || v == fabric.Bounced { // a bounced header is not bounced twice
		c.put(out)
	}
}

// due reports when port p's next frame may leave (ok false: nothing queued).
func (c *core) due(p int) (ndp.Time, bool) {
	o := c.ports[p]
	if o.empty() {
		return 0, false
	}
	return o.next, true
}

// depart appends to out the frames port p sends by now+horizon, advancing its
// emulated link clock by each frame's serialisation time. The caller transmits
// them and gives every buffer back with put.
func (c *core) depart(p int, now ndp.Time, out [][]byte) [][]byte {
	o := c.ports[p]
	if o.next < now-c.maxLag {
		o.next = now - c.maxLag // a late pass makes up at most CatchUp of link time
	}
	for o.next <= now+c.horizon {
		var f []byte
		ndpReady, otherReady := !o.ndp.Empty(), o.other.len() > 0
		switch {
		case ndpReady && (!otherReady || !o.turn):
			f, _ = o.ndp.Dequeue(o.next)
			o.turn = otherReady
		case otherReady:
			f = o.other.pop()
			o.turn = false
		default:
			return out
		}
		o.next += ndp.Time(int64(len(f)) * c.psPerByte / 1000)
		out = append(out, f)
	}
	return out
}

// setDown takes port p out of service: its queued frames are dropped and
// nothing is forwarded to it any more.
func (c *core) setDown(p int, now ndp.Time) {
	o := c.ports[p]
	if o.down {
		return
	}
	o.down = true
	for {
		f, ok := o.ndp.Dequeue(now)
		if !ok {
			break
		}
		c.put(f)
	}
	for o.other.len() > 0 {
		c.put(o.other.pop())
	}
	o.st.Down = true
}

// stats snapshots the counters.
func (c *core) stats(into *Stats) {
	ports := into.Ports[:0]
	*into = c.st
	for _, o := range c.ports {
		ps := o.st
		ps.Name = o.name
		ps.NDP = o.ndp.Stats()
		into.Trimmed += ps.NDP.Trimmed
		into.Bounced += ps.NDP.Bounced
		into.NDPDropped += ps.NDP.Dropped
		ports = append(ports, ps)
	}
	into.Ports = ports
}

// ring is a fixed-capacity FIFO of frames.
type ring struct {
	buf        [][]byte
	head, size int
}

func (q *ring) init(n int) { q.buf = make([][]byte, n) }
func (q *ring) len() int   { return q.size }
func (q *ring) push(f []byte) {
	q.buf[(q.head+q.size)%len(q.buf)] = f
	q.size++
}
func (q *ring) pop() []byte {
	f := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return f
}

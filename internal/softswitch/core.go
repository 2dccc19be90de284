package softswitch

import (
	"encoding/binary"
	"fmt"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// Queue buffer sizes: the largest frame the switch forwards is what its
// AF_XDP frames hold (2048-byte chunks hold at most 1792 bytes of packet,
// 4096-byte chunks 3840: an MTU of 3826), so a buffer is one chunk's size.
const (
	bufSize      = 2048
	jumboBufSize = 4096
)

// maxMACs bounds the learned MAC table; past it, unknown destinations are flooded.
const maxMACs = 4096

// PortStats are one output port's counters.
type PortStats struct {
	Name string `json:"name"`
	// NDP is the port's NDP queue (internal/fabric's counters; for the commodity
	// personality the same fields count the commodity queues).
	NDP fabric.Stats `json:"ndp"`
	// NDPDataAhead sums, over the NDP frames offered to the port, the data
	// frames queued there when each arrived: over NDP.Arrivals, the mean
	// queue an NDP frame meets (HULL's measure of a port kept empty).
	NDPDataAhead uint64 `json:"ndp_data_ahead"`
	// Other counts the drop-tail queue of every other frame.
	OtherArrivals uint64 `json:"other_arrivals"`
	OtherDrops    uint64 `json:"other_drops"`
	OtherMarks    uint64 `json:"other_ecn_marks"`
	OtherMaxDepth int    `json:"other_max_depth"`
	TxFrames      uint64 `json:"tx_frames"`  // frames handed to the port's veth
	TxBytes       uint64 `json:"tx_bytes"`   //
	TxDropped     uint64 `json:"tx_dropped"` // departures the veth refused (ring or pool full, link gone)
	Down          bool   `json:"down"`       // the port's interface disappeared or reported an error
	// NIC marks a host's emulated link into the switch (Config.HostQueue): every
	// frame, NDP or not, passes its drop-tail queue (the Other counters).
	NIC bool `json:"nic,omitempty"`
	// LostNs is the emulated link time the port lost with frames queued: a
	// pass that ran late by more than Config.CatchUp makes up CatchUp and no
	// more, so a backlogged link sends less than its rate over the stall.
	LostNs uint64 `json:"lost_ns,omitempty"`
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
	TxKicks    uint64      `json:"tx_kicks"` // transmit calls on the ports' sockets (each a sendto in copy mode)
	Ticks      uint64      `json:"ticks"`    // sleeps of Config.Tick between passes that moved frames
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
	d.TxKicks -= old.TxKicks
	d.Ticks -= old.Ticks
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
		p.NDPDataAhead -= o.NDPDataAhead
		p.OtherArrivals -= o.OtherArrivals
		p.OtherDrops -= o.OtherDrops
		p.OtherMarks -= o.OtherMarks
		p.TxFrames -= o.TxFrames
		p.TxBytes -= o.TxBytes
		p.TxDropped -= o.TxDropped
		p.LostNs -= o.LostNs
	}
	return d
}

// outPort is one output port: its NDP queues, its drop-tail queue and the
// emulated link's clock. An external port sends on its veth (AF_XDP port of
// the same index); an internal one is a leaf-spine link inside the process
// and delivers to the switch peer.
type outPort struct {
	name      string
	sw        int    // the switch the port belongs to (index into core.nodes)
	peer      int    // internal: the switch the link leads to; external: -1
	via       int    // internal: the port the far switch sees the frame come from
	fifo      bool   // a host's NIC: drop-tail queues, no trimming (prio for NDP control frames)
	flight    []byte // internal: the frame on the wire, reaching peer at flightAt
	flightAt  ndp.Time
	psPerByte int64
	ndp       *fabric.Port // NDP-aware, or with the commodity personality's Trimmer
	other     ring
	// prio (host NICs only) holds the NDP control frames (ACK, NACK, PULL,
	// RESET, trimmed headers; for the commodity personality the control and
	// trim DSCPs): the NIC sends them before the frames in other, as the
	// stack's own transmit order puts control first (ndp.Endpoint.PollFrame)
	// and as the simulator's NIC, which takes each frame from the endpoint
	// when the link is free, does.
	prio ring
	next ndp.Time // when the emulated link is free for the next frame
	turn bool     // both classes backlogged: alternate, starting with NDP
	// sent (external ports) holds frames the emulated link has already sent,
	// taken off the queues before a later arrival (departDue), until the
	// caller's depart hands them to the veth. Its capacity is every buffer the
	// port's queues can hold, so it never grows.
	sent [][]byte
	down bool
	st   PortStats
}

// lose moves a backlogged port's link clock forward to t, counting the link
// time it could not make up (PortStats.LostNs).
func (o *outPort) lose(t ndp.Time) {
	o.st.LostNs += uint64(t - o.next)
	o.next = t
}

func (o *outPort) empty() bool { return o.ndp.Empty() && o.other.len() == 0 && o.prio.len() == 0 }

// external reports whether o is a port to a host (its frames leave on a veth).
func (o *outPort) external() bool { return o.peer < 0 }

// nodeKind is the role of one emulated switch.
type nodeKind uint8

const (
	single nodeKind = iota // the only switch: every port is external
	leaf                   // external ports to hosts, one uplink per spine
	spine                  // one downlink per leaf
)

// node is one emulated switch. A single switch is one node; a leaf-spine
// fabric is Leaves leaf nodes followed by Spines spine nodes.
type node struct {
	kind  nodeKind
	num   int   // leaf or spine number
	hosts []int // external ports (outPort indexes)
	links []int // leaf: uplink per spine; spine: downlink per leaf (outPort indexes)
}

// core is the switch's sans-IO part: frames and `now` in, frames per output port
// out. One goroutine owns it.
type core struct {
	cfg       Config
	commodity *commodityTrimmer // the commodity personality's classification (nil: NDP-aware)
	ports     []*outPort        // external ports first (index = AF_XDP port), then internal links
	external  int
	nodes     []node
	nic       []int             // per external port: its host NIC link (HostQueue > 0)
	macs      map[[6]byte]uint8 // learned host MAC -> external port
	free      [][]byte          // queue buffers, each bufLen long
	bufLen    int
	outs      []int // flood scratch
	horizon   ndp.Time
	maxLag    ndp.Time
	st        Stats
}

func newCore(cfg Config) (*core, error) {
	c := &core{cfg: cfg, macs: make(map[[6]byte]uint8), external: len(cfg.Ports),
		horizon: ndp.Time(cfg.Horizon), maxLag: ndp.Time(cfg.CatchUp)}
	if cfg.Personality == TrimCommodity {
		c.commodity = &commodityTrimmer{cfg: cfg.Commodity}
	}
	leaves := cfg.leaves()
	if leaves == 0 {
		c.nodes = []node{{kind: single}}
	} else {
		for l := 0; l < leaves; l++ {
			c.nodes = append(c.nodes, node{kind: leaf, num: l, links: make([]int, cfg.Spines)})
		}
		for s := 0; s < cfg.Spines; s++ {
			c.nodes = append(c.nodes, node{kind: spine, num: s, links: make([]int, leaves)})
		}
	}
	n := 0 // queue buffers: every port's queues full at once
	add := func(name string, sw, peer int, rate int64) error {
		i := len(c.ports)
		n += cfg.OtherQueue + 64
		o := &outPort{name: name, sw: sw, peer: peer, via: i, psPerByte: 8e12 / rate}
		fc := cfg.Fabric
		fc.Seed += uint64(i)
		minFrame := ndp.HeaderOverhead // the smallest frame the header queue holds
		if c.commodity != nil {
			fc.Trimmer, fc.Trim, fc.NoReturnToSender = c.commodity, fabric.TrimArrival, true
			minFrame = 60
		}
		q, err := fabric.NewPort(fc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		o.ndp = q
		fc = q.Config()
		held := cfg.OtherQueue + fc.DataQueue + fc.HeaderQueueBytes/minFrame
		n += held - cfg.OtherQueue
		if peer < 0 {
			o.sent = make([][]byte, 0, held)
		}
		o.other.init(cfg.OtherQueue)
		c.ports = append(c.ports, o)
		return nil
	}
	for i, name := range cfg.Ports {
		sw := 0
		if leaves > 0 {
			sw = cfg.Leaf[i]
		}
		if err := add(name, sw, -1, cfg.Rate); err != nil {
			return nil, err
		}
		c.nodes[sw].hosts = append(c.nodes[sw].hosts, i)
	}
	for l := 0; l < leaves; l++ {
		for s := 0; s < cfg.Spines; s++ {
			up, down := cfg.linkRate(l, s)
			c.nodes[l].links[s] = len(c.ports)
			if err := add(fmt.Sprintf("leaf%d>spine%d", l, s), l, leaves+s, up); err != nil {
				return nil, err
			}
			c.nodes[leaves+s].links[l] = len(c.ports)
			if err := add(fmt.Sprintf("spine%d>leaf%d", s, l), leaves+s, l, down); err != nil {
				return nil, err
			}
		}
	}
	if cfg.HostQueue > 0 {
		for i, name := range cfg.Ports {
			c.nic = append(c.nic, len(c.ports))
			o := &outPort{name: name + "<host", sw: -1, peer: c.ports[i].sw, via: i, psPerByte: 8e12 / cfg.Rate, fifo: true}
			o.ndp, _ = fabric.NewPort(fabric.Config{DataQueue: 1, HeaderQueueBytes: 64}) // never used: fifo
			o.other.init(cfg.HostQueue)
			o.prio.init(cfg.HostQueue)
			c.ports = append(c.ports, o)
			n += 2 * cfg.HostQueue
		}
	}
	c.bufLen = bufSize
	if cfg.jumbo {
		c.bufLen = jumboBufSize
	}
	arena := make([]byte, n*c.bufLen)
	c.free = make([][]byte, n)
	for i := range c.free {
		c.free[i] = arena[i*c.bufLen : i*c.bufLen : (i+1)*c.bufLen]
	}
	c.outs = make([]int, 0, len(c.ports))
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

// ingress switches one frame that arrived on external port in. b is the
// caller's; the switch copies what it queues.
func (c *core) ingress(in int, b []byte, now ndp.Time) {
	c.st.RxFrames++
	if len(b) < 14 {
		c.st.Malformed++
		return
	}
	if len(b) > c.bufLen {
		c.st.Oversize++
		return
	}
	var src [6]byte
	copy(src[:], b[6:12])
	if src[0]&1 == 0 && src != ([6]byte{}) {
		if p, ok := c.macs[src]; !ok && len(c.macs) < maxMACs || ok && int(p) != in {
			c.macs[src] = uint8(in)
		}
	}
	buf, ok := c.get()
	if !ok {
		c.st.NoBuffer++
		return
	}
	f := buf[:len(b)]
	copy(f, b)
	if c.nic != nil {
		c.enqueue(c.nic[in], f, now)
		return
	}
	c.route(c.ports[in].sw, in, f, now)
}

// route forwards f, a queue buffer that arrived at switch sw through port
// from (an external port, or the internal link that carried it), to its
// output port or ports. The frame is the switch's from here on.
func (c *core) route(sw, from int, f []byte, now ndp.Time) {
	var dst [6]byte
	copy(dst[:], f[0:6])
	if dst[0]&1 == 0 {
		if q, ok := c.macs[dst]; ok {
			out := c.toward(sw, int(q), f)
			if out == from {
				c.st.Hairpin++
				c.put(f)
				return
			}
			c.enqueue(out, f, now)
			return
		}
	}
	c.st.Flooded++
	c.flood(sw, from, f, now)
}

// toward returns switch sw's output port on the way to external port q: q
// itself on its own switch, an uplink chosen by ECMP on a leaf, the downlink
// to q's leaf on a spine.
func (c *core) toward(sw, q int, f []byte) int {
	n := &c.nodes[sw]
	switch n.kind {
	case leaf:
		if c.ports[q].sw == sw {
			return q
		}
		return n.links[ecmpHash(f)%uint32(len(n.links))]
	case spine:
		return n.links[c.ports[q].sw]
	}
	return q
}

// flood sends f out of every port of switch sw that leads to a host it did
// not come from: on a single switch every other port; in a leaf-spine fabric
// along a tree through spine 0 (a leaf floods to its hosts and, for a frame
// from one of them, up to spine 0; spine 0 floods down to every other leaf),
// so a broadcast reaches each host once.
func (c *core) flood(sw, from int, f []byte, now ndp.Time) {
	n := &c.nodes[sw]
	outs := c.outs[:0]
	for _, p := range n.hosts {
		if p != from {
			outs = append(outs, p)
		}
	}
	switch n.kind {
	case leaf:
		if from < c.external {
			outs = append(outs, n.links[0])
		}
	case spine:
		for _, p := range n.links {
			if c.ports[p].peer != c.ports[from].sw {
				outs = append(outs, p)
			}
		}
	}
	if len(outs) == 0 {
		c.put(f)
		return
	}
	for _, p := range outs[:len(outs)-1] {
		buf, ok := c.get()
		if !ok {
			c.st.NoBuffer++
			continue
		}
		g := buf[:len(f)]
		copy(g, f)
		c.enqueue(p, g, now)
	}
	c.enqueue(outs[len(outs)-1], f, now)
}

// classifies reports whether f uses o's NDP queues: for the NDP-aware switch an
// IPv4 frame without options to the NDP UDP port, for the commodity switch an
// IPv4 frame with one of the configured DSCP values.
func (c *core) classifies(o *outPort, f []byte) bool {
	if o.fifo {
		return false
	}
	if c.commodity != nil {
		return c.commodity.classifies(f)
	}
	return c.isNDP(f)
}

// isNDP reports whether f is an IPv4 frame without options to the NDP UDP port.
func (c *core) isNDP(f []byte) bool {
	return len(f) >= ndp.HeaderOverhead && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17 &&
		binary.BigEndian.Uint16(f[36:38]) == c.cfg.NDPPort
}

// control reports whether f is an NDP control frame, which a host NIC sends
// ahead of its data: ndp.IsControl for the NDP-aware switch, the control and
// trim DSCPs for the commodity one.
func (c *core) control(f []byte) bool {
	if c.commodity != nil {
		return c.commodity.classifies(f) && c.commodity.Control(f)
	}
	return c.isNDP(f) && ndp.IsControl(f)
}

// enqueue offers queue buffer f to output port p.
func (c *core) enqueue(p int, f []byte, now ndp.Time) {
	o := c.ports[p]
	if o.down {
		c.put(f)
		return
	}
	c.departDue(o, now)
	if o.empty() && o.next < now {
		o.next = now
	}
	if !c.classifies(o, f) {
		o.st.OtherArrivals++
		q := &o.other
		if o.fifo && c.control(f) {
			q = &o.prio
		}
		d := q.len()
		if d >= len(q.buf) { // OtherQueue, or HostQueue for a NIC
			o.st.OtherDrops++
			c.put(f)
			return
		}
		if c.cfg.OtherECN > 0 && d >= c.cfg.OtherECN && !o.fifo && fabric.MarkCE(f) {
			o.st.OtherMarks++
		}
		q.push(f)
		o.st.OtherMaxDepth = max(o.st.OtherMaxDepth, d+1)
		return
	}
	ahead, _ := o.ndp.Len()
	o.st.NDPDataAhead += uint64(ahead)
	v, out, bounced, dropped := o.ndp.Enqueue(f, now)
	switch v {
	case fabric.Bounced:
		c.returnToSender(o.sw, out, now)
	case fabric.Dropped:
		if o.ndp.ReturnToSender(out) {
			c.returnToSender(o.sw, out, now)
		} else {
			c.put(out)
		}
	}
	if bounced != nil {
		c.returnToSender(o.sw, bounced, now)
	}
	if dropped != nil {
		c.put(dropped)
	}
}

// returnToSender queues a bounced header (already addressed back to its sender)
// at switch sw on the port that leads toward its new destination MAC.
func (c *core) returnToSender(sw int, f []byte, now ndp.Time) {
	var dst [6]byte
	copy(dst[:], f[0:6])
	q, ok := c.macs[dst]
	if !ok || c.ports[q].down {
		c.st.Unroutable++
		c.put(f)
		return
	}
	o := c.ports[c.toward(sw, int(q), f)]
	c.departDue(o, now)
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
	if o.flight != nil {
		return o.flightAt, true
	}
	if len(o.sent) > 0 {
		return 0, true
	}
	if o.empty() {
		return 0, false
	}
	return o.next, true
}

// pop takes port p's next frame (NDP and other classes alternate while both
// are backlogged) and advances its emulated link clock by the frame's
// serialisation time.
func (c *core) pop(o *outPort) ([]byte, bool) {
	var f []byte
	ndpReady, otherReady := !o.ndp.Empty(), o.other.len() > 0
	switch {
	case o.prio.len() > 0:
		f = o.prio.pop()
	case ndpReady && (!otherReady || !o.turn):
		f, _ = o.ndp.Dequeue(o.next)
		o.turn = otherReady
	case otherReady:
		f = o.other.pop()
		o.turn = false
	default:
		return nil, false
	}
	o.next += ndp.Time(int64(len(f)+c.cfg.FrameOverhead) * o.psPerByte / 1000)
	return f, true
}

// depart appends to out the frames external port p sends by now+horizon,
// advancing its emulated link clock by each frame's serialisation time. The
// caller transmits them and gives every buffer back with put.
func (c *core) depart(p int, now ndp.Time, out [][]byte) [][]byte {
	o := c.ports[p]
	out = append(out, o.sent...)
	clear(o.sent)
	o.sent = o.sent[:0]
	return c.popUntil(o, now, now+c.horizon, out)
}

// departDue takes off external port o's queues, into o.sent, the frames its
// emulated link sends before t, the emulated time of an arrival about to be
// queued there. A pass that runs late moves frames over the internal links
// (host NICs, leaf-spine links) up to now before it departs the external
// ports; without this, frames that reached a port at emulated times spread
// over the late interval would all find it as full as at the interval's start,
// and a queue that a real link kept short would fill and trim.
func (c *core) departDue(o *outPort, t ndp.Time) {
	if !o.external() || o.next > t || o.empty() {
		return
	}
	o.sent = c.popUntil(o, t, t, o.sent)
}

// popUntil appends to out the frames o's emulated link starts sending by
// until, advancing its clock by each frame's serialisation time; at arrives
// the link to at most CatchUp of link time behind at.
func (c *core) popUntil(o *outPort, at, until ndp.Time, out [][]byte) [][]byte {
	if o.next < at-c.maxLag && !o.empty() {
		o.lose(at - c.maxLag) // a late pass makes up at most CatchUp of link time
	}
	for o.next <= until {
		f, ok := c.pop(o)
		if !ok {
			break
		}
		out = append(out, f)
	}
	return out
}

// carry moves frames across the internal links (leaf-spine links, host
// NICs): a link takes its next frame from its queue when its emulated
// transmission starts and hands it to the far switch, stamped with the time
// the transmission ends, once now reaches that time (store and forward); the
// far switch switches it at once, so it may go on over another internal link
// in the same call. The links take these steps in emulated-time order, the
// earliest first, whichever link it is on: after a late pass (the thread was
// not scheduled) a link that makes up its backlog hands its frames on
// interleaved with the other links' as they would have arrived, not each
// link's whole backlog after the previous link's (a downlink fed by two spine
// links then saw one spine's burst before the other's earlier frames, held
// more frames than it ever would have, and trimmed). It reports whether it
// moved any.
func (c *core) carry(now ndp.Time) bool {
	moved := false
	for {
		next, at := -1, ndp.Time(0)
		for p := c.external; p < len(c.ports); p++ {
			o := c.ports[p]
			var t ndp.Time
			switch {
			case o.flight != nil:
				t = o.flightAt
			case o.empty():
				continue
			default:
				if o.next < now-c.maxLag {
					o.lose(now - c.maxLag)
				}
				t = o.next
			}
			if t <= now && (next < 0 || t < at) {
				next, at = p, t
			}
		}
		if next < 0 {
			return moved
		}
		o := c.ports[next]
		if f := o.flight; f != nil {
			o.flight = nil
			o.st.TxFrames++
			o.st.TxBytes += uint64(len(f))
			c.route(o.peer, o.via, f, o.flightAt)
			moved = true
			continue
		}
		o.flight, _ = c.pop(o)
		o.flightAt = o.next
	}
}

// setDown takes port p out of service: its queued frames are dropped and
// nothing is forwarded to it any more.
func (c *core) setDown(p int, now ndp.Time) {
	o := c.ports[p]
	if o.down {
		return
	}
	o.down = true
	for _, f := range o.sent {
		c.put(f)
	}
	clear(o.sent)
	o.sent = o.sent[:0]
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
	for o.prio.len() > 0 {
		c.put(o.prio.pop())
	}
	o.st.Down = true
}

// stats snapshots the counters.
func (c *core) stats(into *Stats) {
	ports := into.Ports[:0]
	*into = c.st
	for _, o := range c.ports {
		if o.fifo {
			ports = append(ports, PortStats{Name: o.name, NIC: true, OtherArrivals: o.st.OtherArrivals, OtherDrops: o.st.OtherDrops,
				OtherMaxDepth: o.st.OtherMaxDepth, TxFrames: o.st.TxFrames, TxBytes: o.st.TxBytes})
			continue
		}
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

// ecmpHash is the leaves' ECMP hash: the XOR of the 16-bit words of the IPv4
// 5-tuple (addresses, protocol, and the ports of an unfragmented TCP or UDP
// packet), one of the hash functions switch ASICs offer ("XOR16"). Frames
// that are not IPv4 hash their MAC addresses. With it, consecutive UDP source
// ports (NDP's path entropy, ndp.Config.Paths of them per connection) cover
// the spines evenly, as the paper's testbed chose paths by source port.
func ecmpHash(f []byte) uint32 {
	var h uint16
	if len(f) >= 34 && f[12] == 0x08 && f[13] == 0x00 && f[14]>>4 == 4 {
		ihl := int(f[14]&0xf) * 4
		for i := 26; i < 34; i += 2 {
			h ^= binary.BigEndian.Uint16(f[i:])
		}
		proto := f[23]
		h ^= uint16(proto)
		frag := binary.BigEndian.Uint16(f[20:]) & 0x3fff
		if (proto == 6 || proto == 17) && frag == 0 && len(f) >= 14+ihl+4 {
			h ^= binary.BigEndian.Uint16(f[14+ihl:]) ^ binary.BigEndian.Uint16(f[16+ihl:])
		}
		return uint32(h)
	}
	for i := 0; i+1 < 12; i += 2 {
		h ^= binary.BigEndian.Uint16(f[i:])
	}
	return uint32(h)
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

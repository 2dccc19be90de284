package ndp

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// testNet wires endpoints with a fake clock. Frames leave a host through
// PollFrame, cross an optional faulty middle (loss, duplication, trimming,
// bouncing, reordering by random extra delay) and arrive after a latency.
// Each host has a FIFO pull queue released one pull per pullGap.
type testNet struct {
	t       testing.TB
	now     Time
	hosts   []*testHost
	flight  flightHeap
	latency Time
	jitter  Time // extra random delay (reordering)
	rnd     *rand.Rand

	loss, dup, trim, bounce float64
	// middle, if set, sees each frame first and may drop it (return false)
	middle func(from, to int, b []byte) ([]byte, bool)
	// delay, if set, adds a per-frame extra delay (e.g. late ACKs)
	delay func(from, to int, b []byte) Time
	// appAt, if > 0, is when the test's application next acts: step
	// advances to it even when the network is idle
	appAt Time
	buf   []byte
	sent  int

	// optional NDP-switch model of each host's downlink: data is
	// serialised at rate bytes/ns behind at most queueBytes of data, or
	// trimmed; headers and control frames take priority (no queueing).
	rate       float64
	queueBytes int
	busyUntil  []Time
	trimmedAt  int
}

type flightPkt struct {
	at   Time
	seq  uint64 // transmission order: ties in at are delivered FIFO
	to   int
	from int
	b    []byte
}

// flightHeap is a min-heap of frames in flight by (arrival time, seq).
type flightHeap struct {
	pkts []flightPkt
	seq  uint64
}

func (h *flightHeap) Len() int { return len(h.pkts) }

func (h *flightHeap) less(i, j int) bool {
	a, b := &h.pkts[i], &h.pkts[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (h *flightHeap) push(p flightPkt) {
	p.seq = h.seq
	h.seq++
	h.pkts = append(h.pkts, p)
	for j := len(h.pkts) - 1; j > 0; {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.pkts[i], h.pkts[j] = h.pkts[j], h.pkts[i]
		j = i
	}
}

// popDue removes and returns the earliest frame if it arrives by now.
func (h *flightHeap) popDue(now Time) (flightPkt, bool) {
	if len(h.pkts) == 0 || h.pkts[0].at > now {
		return flightPkt{}, false
	}
	p := h.pkts[0]
	last := len(h.pkts) - 1
	h.pkts[0] = h.pkts[last]
	h.pkts[last] = flightPkt{}
	h.pkts = h.pkts[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < last && h.less(l, m) {
			m = l
		}
		if r := l + 1; r < last && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.pkts[i], h.pkts[m] = h.pkts[m], h.pkts[i]
		i = m
	}
	return p, true
}

// next returns the earliest arrival time.
func (h *flightHeap) next() (Time, bool) {
	if len(h.pkts) == 0 {
		return 0, false
	}
	return h.pkts[0].at, true
}

type testHost struct {
	ep        *Endpoint
	pullq     []Handle
	nextPull  Time
	pullGap   Time
	allowPush bool
	accepted  []Handle
	closed    map[Handle]error
	pullsEv   []Event
	drops     int
	events    []Event
	// autoRead: read everything readable into recv[handle]
	autoRead bool
	recv     map[Handle]*bytes.Buffer
	eof      map[Handle]bool
}

func newTestNet(t testing.TB, seed uint64, cfgs ...Config) *testNet {
	n := &testNet{t: t, latency: Time(5 * time.Microsecond), rnd: rand.New(rand.NewPCG(seed, 7)), buf: make([]byte, 10000)}
	for i, cfg := range cfgs {
		cfg.LocalIP = [4]byte{10, 0, 0, byte(i + 1)}
		cfg.LocalMAC = [6]byte{2, 0, 0, 0, 0, byte(i + 1)}
		cfg.Seed = seed*100 + uint64(i)
		ep, err := NewEndpoint(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.hosts = append(n.hosts, &testHost{ep: ep, pullGap: Time(time.Microsecond), allowPush: true,
			closed: map[Handle]error{}, autoRead: true, recv: map[Handle]*bytes.Buffer{}, eof: map[Handle]bool{}})
	}
	return n
}

// connect has host 1 listen on port 80 and host 0 dial it, and returns the
// dialer's handle.
func (n *testNet) connect(t *testing.T) Handle {
	t.Helper()
	if err := n.hosts[1].ep.Listen(80); err != nil {
		t.Fatal(err)
	}
	c, err := n.hosts[0].ep.Dial(n.addr(1, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (n *testNet) addr(i int, port uint16) Addr {
	c := n.hosts[i].ep.cfg
	return Addr{MAC: c.LocalMAC, IP: c.LocalIP, Port: port}
}

func (n *testNet) hostOf(ip [4]byte) int {
	for i, h := range n.hosts {
		if h.ep.cfg.LocalIP == ip {
			return i
		}
	}
	return -1
}

// drain processes events and transmits everything each host has.
func (n *testNet) drain() {
	for i, h := range n.hosts {
		for {
			ev, ok := h.ep.PollEvent()
			if !ok {
				break
			}
			h.events = append(h.events, ev)
			switch ev.Kind {
			case EventAccepted:
				h.accepted = append(h.accepted, ev.Handle)
			case EventPulls:
				h.pullsEv = append(h.pullsEv, ev)
				for k := 0; k < ev.Count; k++ {
					h.pullq = append(h.pullq, ev.Handle)
				}
			case EventDropPulls:
				h.drops++
				q := h.pullq[:0]
				for _, x := range h.pullq {
					if x != ev.Handle {
						q = append(q, x)
					}
				}
				h.pullq = q
			case EventClosed:
				h.closed[ev.Handle] = ev.Err
			case EventReadable:
				if h.autoRead {
					n.readAll(h, ev.Handle)
				}
			}
		}
		// pull pacer: one per gap
		for len(h.pullq) > 0 && h.nextPull <= n.now {
			p := h.pullq[0]
			h.pullq = h.pullq[1:]
			h.ep.PullReleased(p, n.now)
			h.nextPull = n.now + h.pullGap
		}
		for {
			l, _ := h.ep.PollFrame(n.buf, n.now, h.allowPush)
			if l == 0 {
				break
			}
			n.sent++
			var g Frame
			if err := ParseFrame(n.buf[:l], &g); err != nil {
				n.t.Fatalf("host %d emitted invalid frame: %v", i, err)
			}
			to := n.hostOf(g.DstIP)
			if to < 0 {
				continue
			}
			n.transmit(i, to, append([]byte(nil), n.buf[:l]...))
		}
	}
}

func (n *testNet) readAll(h *testHost, hd Handle) {
	var tmp [4096]byte
	for {
		k, err := h.ep.Read(hd, tmp[:])
		if k > 0 {
			if h.recv[hd] == nil {
				h.recv[hd] = new(bytes.Buffer)
			}
			h.recv[hd].Write(tmp[:k])
			continue
		}
		if err == io.EOF {
			h.eof[hd] = true
		}
		return
	}
}

func (n *testNet) transmit(from, to int, b []byte) {
	if n.middle != nil {
		var ok bool
		if b, ok = n.middle(from, to, b); !ok {
			return
		}
	}
	if n.loss > 0 && n.rnd.Float64() < n.loss {
		return
	}
	if n.trim > 0 && IsTrimmable(b) && n.rnd.Float64() < n.trim {
		k, err := TrimFrame(b)
		if err != nil {
			n.t.Fatal(err)
		}
		b = b[:k]
		if n.bounce > 0 && n.rnd.Float64() < n.bounce {
			if err := BounceFrame(b); err != nil {
				n.t.Fatal(err)
			}
			from, to = to, from
		}
	}
	extra := Time(0)
	if n.rate > 0 {
		if n.busyUntil == nil {
			n.busyUntil = make([]Time, len(n.hosts))
		}
		arrive := n.now + n.latency/2
		if !IsControl(b) {
			backlog := float64(max(0, n.busyUntil[to]-arrive)) * n.rate
			if backlog > float64(n.queueBytes) {
				k, err := TrimFrame(b)
				if err != nil {
					n.t.Fatal(err)
				}
				b = b[:k]
				n.trimmedAt++
			} else {
				start := max(arrive, n.busyUntil[to])
				n.busyUntil[to] = start + Time(float64(len(b)+24)/n.rate)
				extra = n.busyUntil[to] - arrive
			}
		}
	}
	copies := 1
	if n.dup > 0 && n.rnd.Float64() < n.dup {
		copies = 2
	}
	for k := 0; k < copies; k++ {
		at := n.now + n.latency + extra
		if n.delay != nil {
			at += n.delay(from, to, b)
		}
		if n.jitter > 0 {
			at += Time(n.rnd.Int64N(int64(n.jitter)))
		}
		c := b
		if k > 0 {
			c = append([]byte(nil), b...)
		}
		n.flight.push(flightPkt{at: at, to: to, from: from, b: c})
	}
}

// step advances to the next event and processes it; false when idle.
func (n *testNet) step() bool {
	n.drain()
	next := Time(-1)
	upd := func(t Time) {
		if next < 0 || t < next {
			next = t
		}
	}
	if t, ok := n.flight.next(); ok {
		upd(t)
	}
	if n.appAt > 0 {
		upd(max(n.appAt, n.now))
	}
	for _, h := range n.hosts {
		if t, ok := h.ep.NextTimer(); ok {
			upd(t)
		}
		if len(h.pullq) > 0 {
			upd(max(h.nextPull, n.now))
		}
	}
	if next < 0 {
		return false
	}
	if next > n.now {
		n.now = next
	}
	// deliver due packets (in arrival-time order)
	for {
		p, ok := n.flight.popDue(n.now)
		if !ok {
			break
		}
		n.hosts[p.to].ep.HandleFrame(p.b, n.now)
	}
	for _, h := range n.hosts {
		h.ep.HandleTimers(n.now)
	}
	n.drain()
	return true
}

// run steps until cond holds or the step budget / virtual time runs out.
func (n *testNet) run(maxSteps int, cond func() bool) bool {
	for i := 0; i < maxSteps; i++ {
		if cond != nil && cond() {
			return true
		}
		if !n.step() {
			n.drain()
			return cond == nil || cond()
		}
	}
	return cond == nil || cond()
}

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// writeAll writes data (in chunks as buffer space allows) while running.
func (n *testNet) writeAll(host int, h Handle, data []byte, closeAfter bool) {
	ep := n.hosts[host].ep
	off := 0
	for i := 0; ; i++ {
		if off < len(data) {
			k, err := ep.Write(h, data[off:], n.now)
			if err != nil {
				n.t.Fatalf("write: %v", err)
			}
			off += k
		}
		if off == len(data) {
			if closeAfter {
				if err := ep.CloseWrite(h, n.now); err != nil {
					n.t.Fatalf("closewrite: %v", err)
				}
			}
			return
		}
		if !n.step() {
			n.t.Fatalf("network idle with %d bytes unwritten", len(data)-off)
		}
		if i > 10_000_000 {
			n.t.Fatal("writeAll: no progress")
		}
	}
}

func (h *testHost) got(hd Handle) []byte {
	if b := h.recv[hd]; b != nil {
		return b.Bytes()
	}
	return nil
}

func (n *testNet) String() string {
	s := fmt.Sprintf("now=%v flight=%d", time.Duration(n.now), n.flight.Len())
	for i, h := range n.hosts {
		s += fmt.Sprintf("\nhost%d: pullq=%d %+v", i, len(h.pullq), h.ep.Stats())
	}
	return s
}

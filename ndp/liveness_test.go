package ndp

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Liveness under loss and flow control (docs/decisions.md, "Liveness property
// test"): two endpoints, several connections dialed from
// each side at once, every connection carrying a stream in both directions,
// through a path that loses frames (independently and in bursts), duplicates,
// trims and bounces them, and delays some of them by up to a few milliseconds
// (ACKs and PULLs arrive late and out of order). Applications behave like the
// engine's blocking calls: a writer writes random chunks at random times and,
// after a short write, waits for EventWritable; a reader reads random amounts
// at random times and, after a read that returned nothing, waits for
// EventReadable. Receive buffers are a few packets, so flow control engages
// (NoBufferNacks, owed pulls). Every stream must arrive byte-exact and every
// connection close cleanly at both ends; a state where nothing is scheduled
// (no frame in flight, no timer armed, no application waiting for anything
// but an event) while a transfer is unfinished is a stall, and the test fails
// with both endpoints' state.

// livenessParams is one scenario.
type livenessParams struct {
	seed     uint64
	mtu      int
	conns    [2]int // connections dialed by host 0 and by host 1
	maxSize  int    // per stream
	recvPkts int    // receive buffer in MSS (>= 2)
	sendPkts int    // send buffer in MSS (>= 1)
	iw       int
	paths    int
	fixedRTO bool
	coalesce bool // Config.CoalesceControl at both ends (the engine's setting)

	loss, dup, trim, bounce float64
	burstIn, burstOut       float64 // Gilbert-Elliott: P(good->bad), P(bad->good) per frame
	burstLoss               float64 // loss probability in the bad state
	lateP                   float64 // fraction of frames delayed by up to lateMax
	lateMax                 Time
	jitter                  Time
	rate                    bool // model a 10G downlink with an 8-packet data queue (trims)
	pullGap                 Time
	readGap, writeGap       Time // mean time between an application's reads / writes
	maxRead, maxWrite       int
}

func randomLiveness(seed uint64) livenessParams {
	r := rand.New(rand.NewPCG(seed, 0x11fe))
	p := livenessParams{seed: seed, mtu: 1500}
	if r.IntN(3) == 0 {
		p.mtu = 9000
	}
	p.conns = [2]int{1 + r.IntN(3), r.IntN(3)}
	p.maxSize = 20<<10 + r.IntN(100<<10)
	p.recvPkts = 2 + r.IntN(8)
	p.sendPkts = 1 + r.IntN(12)
	p.iw = 1 + r.IntN(30)
	p.paths = 1 + r.IntN(8)
	p.fixedRTO = r.IntN(4) == 0
	p.loss = r.Float64() * 0.02
	p.dup = r.Float64() * 0.03
	p.trim = r.Float64() * 0.3
	p.bounce = r.Float64() * 0.5
	if r.IntN(2) == 0 {
		p.burstIn, p.burstOut, p.burstLoss = r.Float64()*0.01, 0.1+r.Float64()*0.4, 0.5+r.Float64()*0.5
	}
	p.lateP = r.Float64() * 0.2
	p.lateMax = Time(r.IntN(3000)) * us
	p.jitter = Time(r.IntN(50)) * us
	p.rate = r.IntN(2) == 0
	p.pullGap = Time(1+r.IntN(20)) * us
	p.readGap = Time(r.IntN(500)) * us
	p.writeGap = Time(r.IntN(500)) * us
	p.maxRead = 1 + r.IntN(32<<10)
	p.maxWrite = 1 + r.IntN(64<<10)
	p.coalesce = seed%2 == 0 // not drawn from r: odd seeds keep their scenarios
	return p
}

// livenessStream is one direction of one connection.
type livenessStream struct {
	data     []byte
	written  int
	wBlocked bool // short write: waits for EventWritable
	wAt      Time // next write (-1: none scheduled)
	finDone  bool

	got      []byte
	rBlocked bool // empty read: waits for EventReadable
	rAt      Time
	eof      bool
}

type livenessConn struct {
	dialer int       // host that dialed
	port   uint16    // the dialer's local port (names the connection at the acceptor)
	h      [2]Handle // per host
	s      [2]*livenessStream
	closed [2]bool
	err    [2]error
}

// stream returns the stream host writes on c, and the one it reads.
func (c *livenessConn) streams(host int) (out, in *livenessStream) {
	if host == c.dialer {
		return c.s[0], c.s[1]
	}
	return c.s[1], c.s[0]
}

// livenessTotals accumulates coverage over scenarios.
type livenessTotals struct {
	scenarios, conns, bytes                                 int
	trimmed, noBuf, rtos, probes, bounced, dups, nacks, rtx uint64
	writeBlocks, readBlocks                                 int
	virtual, maxVirtual                                     Time
	maxSeed                                                 uint64
}

func runLiveness(t testing.TB, p livenessParams, tot *livenessTotals) {
	t.Helper()
	cfg := Config{MTU: p.mtu, IW: p.iw, Paths: p.paths, FixedRTO: p.fixedRTO, CoalesceControl: p.coalesce,
		RecvBuffer: p.recvPkts * MaxPayload(p.mtu), SendBuffer: p.sendPkts * MaxPayload(p.mtu)}
	n := newTestNet(t, p.seed, cfg, cfg)
	r := rand.New(rand.NewPCG(p.seed, 0xa99))
	n.loss, n.dup, n.trim, n.bounce, n.jitter = p.loss, p.dup, p.trim, p.bounce, p.jitter
	if p.rate {
		n.rate, n.queueBytes = 1.25, 8*(p.mtu+14)
	}
	bad := false
	if p.burstIn > 0 {
		n.middle = func(_, _ int, b []byte) ([]byte, bool) {
			if bad {
				bad = n.rnd.Float64() >= p.burstOut
			} else {
				bad = n.rnd.Float64() < p.burstIn
			}
			return b, !(bad && n.rnd.Float64() < p.burstLoss)
		}
	}
	if p.lateP > 0 && p.lateMax > 0 {
		n.delay = func(_, _ int, _ []byte) Time {
			if n.rnd.Float64() < p.lateP {
				return Time(n.rnd.Int64N(int64(p.lateMax)))
			}
			return 0
		}
	}
	for i, h := range n.hosts {
		h.autoRead = false
		h.pullGap = p.pullGap
		if err := h.ep.Listen(80); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	gap := func(mean Time) Time {
		if mean <= 0 {
			return 0
		}
		return Time(r.Int64N(int64(2 * mean)))
	}
	var conns []*livenessConn
	byPort := [2]map[uint16]*livenessConn{{}, {}}
	port := uint16(1000)
	for host := 0; host < 2; host++ {
		for range p.conns[host] {
			port++
			c := &livenessConn{dialer: host, port: port}
			for k := range c.s {
				c.s[k] = &livenessStream{data: pattern(int(p.seed)*100+int(port)*2+k, r.IntN(p.maxSize+1)), wAt: -1, rAt: -1}
				tot.bytes += len(c.s[k].data)
			}
			h, err := n.hosts[host].ep.Dial(n.addr(1-host, 80), DialOptions{LocalPort: port}, 0)
			if err != nil {
				t.Fatal(err)
			}
			c.h[host] = h
			c.s[0].wAt = gap(p.writeGap)
			c.s[1].rAt = gap(p.readGap)
			byPort[1-host][port] = c
			conns = append(conns, c)
		}
	}
	tot.scenarios++
	tot.conns += len(conns)
	evIdx := [2]int{}
	conn := func(host int, h Handle) *livenessConn {
		for _, c := range conns {
			if c.h[host] == h {
				return c
			}
		}
		return nil
	}
	var failed string
	fail := func(format string, a ...any) {
		if failed == "" {
			failed = fmt.Sprintf("t=%v: ", time.Duration(n.now)) + fmt.Sprintf(format, a...)
		}
	}
	const maxVirtual = 20 * Time(time.Second)
	allDone := false
	app := func() bool {
		for host, th := range n.hosts {
			for ; evIdx[host] < len(th.events); evIdx[host]++ {
				ev := th.events[evIdx[host]]
				switch ev.Kind {
				case EventAccepted:
					c := byPort[host][ev.Remote.Port]
					if c == nil || c.h[host] != 0 {
						fail("host %d: unexpected accept from port %d", host, ev.Remote.Port)
						continue
					}
					c.h[host] = ev.Handle
					c.s[1].wAt = n.now + gap(p.writeGap)
					c.s[0].rAt = n.now + gap(p.readGap)
				case EventReadable, EventWritable, EventClosed:
					c := conn(host, ev.Handle)
					if c == nil {
						fail("host %d: %v for unknown handle", host, ev.Kind)
						continue
					}
					out, in := c.streams(host)
					switch ev.Kind {
					case EventReadable:
						if in.rBlocked {
							in.rBlocked, in.rAt = false, n.now+gap(p.readGap/4)
						}
					case EventWritable:
						if out.wBlocked {
							out.wBlocked, out.wAt = false, n.now+gap(p.writeGap/4)
						}
					case EventClosed:
						c.closed[host], c.err[host] = true, ev.Err
						if ev.Err != nil {
							fail("host %d port %d: closed with %v", host, c.port, ev.Err)
						}
					}
				}
			}
		}
		next := Time(-1)
		sched := func(at Time) {
			if at >= 0 && (next < 0 || at < next) {
				next = at
			}
		}
		done := true
		for _, c := range conns {
			for host := 0; host < 2; host++ {
				h := c.h[host]
				if h == 0 {
					done = false
					continue
				}
				ep := n.hosts[host].ep
				out, in := c.streams(host)
				if out.wAt >= 0 && out.wAt <= n.now {
					out.wAt = -1
					if out.written < len(out.data) {
						chunk := min(len(out.data)-out.written, 1+r.IntN(p.maxWrite))
						k, err := ep.Write(h, out.data[out.written:out.written+chunk], n.now)
						if err != nil {
							fail("host %d port %d: write: %v", host, c.port, err)
						}
						out.written += k
						if k < chunk {
							out.wBlocked = true
							tot.writeBlocks++
						} else {
							out.wAt = n.now + gap(p.writeGap)
						}
					}
					if out.written == len(out.data) && !out.finDone {
						out.finDone = true
						if err := ep.CloseWrite(h, n.now); err != nil {
							fail("host %d port %d: close write: %v", host, c.port, err)
						}
					}
				}
				if in.rAt >= 0 && in.rAt <= n.now {
					in.rAt = -1
					buf := make([]byte, 1+r.IntN(p.maxRead))
					k, err := ep.Read(h, buf)
					in.got = append(in.got, buf[:k]...)
					switch {
					case k > 0:
						in.rAt = n.now + gap(p.readGap)
					case err == io.EOF:
						in.eof = true
					case err != nil:
						fail("host %d port %d: read: %v", host, c.port, err)
					default:
						in.rBlocked = true
						tot.readBlocks++
					}
				}
				sched(out.wAt)
				sched(in.rAt)
				if !in.eof || !c.closed[host] || !out.finDone {
					done = false
				}
			}
		}
		n.appAt = max(0, next)
		allDone = done
		return done || failed != "" || n.now > maxVirtual
	}
	finished := n.run(50_000_000, app)
	for _, h := range n.hosts {
		st := h.ep.Stats()
		tot.trimmed += st.TrimmedIn
		tot.noBuf += st.NoBufferNacks
		tot.rtos += st.RTOFires
		tot.probes += st.StallProbes
		tot.bounced += st.BouncedIn
		tot.dups += st.DuplicatesIn
		tot.nacks += st.NacksIn
		tot.rtx += st.Retransmits
	}
	tot.virtual += n.now
	if n.now > tot.maxVirtual {
		tot.maxVirtual, tot.maxSeed = n.now, p.seed
	}
	if failed == "" && !allDone {
		switch {
		case n.now > maxVirtual:
			failed = fmt.Sprintf("not finished after %v of virtual time (livelock?)", time.Duration(n.now))
		case !finished:
			failed = "step budget exhausted"
		default:
			failed = "STALL: nothing in flight, no timer armed, no application action pending"
		}
	}
	if failed != "" {
		t.Fatalf("seed %d %+v:\n%s\n%s", p.seed, p, failed, livenessDump(n, conns))
	}
	for _, c := range conns {
		for k, s := range c.s {
			if !bytes.Equal(s.got, s.data) {
				t.Fatalf("seed %d port %d stream %d: got %d bytes, want %d (content equal to prefix: %v)\n%s", p.seed, c.port, k,
					len(s.got), len(s.data), bytes.HasPrefix(s.data, s.got), livenessDump(n, conns))
			}
		}
	}
}

// livenessDump describes every unfinished connection's state at both ends.
func livenessDump(n *testNet, conns []*livenessConn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n", n)
	for i, h := range n.hosts {
		at, ok := h.ep.NextTimer()
		fmt.Fprintf(&b, "host%d: next timer %v (%v), pull queue %d, ctl queued %d\n", i, time.Duration(at), ok, len(h.pullq), h.ep.ctl.n)
	}
	for _, c := range conns {
		for host := 0; host < 2; host++ {
			out, in := c.streams(host)
			fmt.Fprintf(&b, "port %d host %d (dialer %d): wrote %d/%d fin %v wBlocked %v wAt %v | read %d eof %v rBlocked %v rAt %v | closed %v %v\n",
				c.port, host, c.dialer, out.written, len(out.data), out.finDone, out.wBlocked, out.wAt, len(in.got), in.eof, in.rBlocked, in.rAt, c.closed[host], c.err[host])
			if cc := n.hosts[host].ep.conn(c.h[host]); cc != nil {
				s, r := &cc.snd, &cc.rcv
				fmt.Fprintf(&b, "    snd: una %d nxt %d rtx %d credits pull %d push %d urgent %d pullsExp %d lastSent %v written %d nxtOff %d fin q/s/a %v/%v/%v rtoAt %v lastAct %v streak %d backoff %d timerAt %v\n",
					s.una-s.isn, s.nxtSeq-s.isn, s.rtxN, s.pullCredit, s.pushCredit, s.urgN, s.pullsExpected, s.lastSent, s.written, s.nxtOff,
					s.finQueued, s.finSent, s.finAcked, time.Duration(s.rtoAt), time.Duration(s.lastActivity), s.rtoStreak, s.rtt.backoff, time.Duration(cc.timerAt))
				fmt.Fprintf(&b, "    rcv: nxtOff %d readOff %d room %d trimmed %d noBuf %d owed %d pending %d handed %d finKnown %v finOff %d closed %v inQ pull/free/paced %v/%v/%v\n",
					r.nxtOff, r.readOff, r.room(), r.nTrim, r.nNoBuf, r.owedPulls, cc.pullsPending, cc.pullsHanded, r.finKnown, r.finOff, cc.closed, cc.inPullQ, cc.inFreeQ, cc.inPacedQ)
			}
		}
	}
	return b.String()
}

// TestLiveness runs random scenarios (NDP_LIVENESS=n for more; the default
// keeps the package's -race run short). NDP_LIVENESS_SEED=s runs one seed.
func TestLiveness(t *testing.T) {
	seeds, first := 64, uint64(1)
	if s, err := strconv.Atoi(os.Getenv("NDP_LIVENESS")); err == nil {
		seeds = s
	}
	if s, err := strconv.ParseUint(os.Getenv("NDP_LIVENESS_SEED"), 10, 64); err == nil {
		seeds, first = 1, s
	}
	if testing.Short() {
		seeds = min(seeds, 8)
	}
	var tot livenessTotals
	for seed := first; seed < first+uint64(seeds); seed++ {
		runLiveness(t, randomLiveness(seed), &tot)
	}
	t.Logf("%d scenarios, %d connections, %d bytes, %v virtual (longest %v, seed %d): trimmed %d, no-buffer NACKs %d, NACKs %d, RTO losses %d, stall probes %d, bounced %d, duplicates %d, retransmits %d; writers blocked %d times, readers %d",
		tot.scenarios, tot.conns, tot.bytes, time.Duration(tot.virtual), time.Duration(tot.maxVirtual), tot.maxSeed, tot.trimmed, tot.noBuf, tot.nacks, tot.rtos, tot.probes, tot.bounced, tot.dups, tot.rtx, tot.writeBlocks, tot.readBlocks)
}

// FuzzLiveness derives a scenario from the fuzzer's input (seed plus knobs).
func FuzzLiveness(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(0), uint8(0))
	f.Add(uint64(7), uint8(200), uint8(3), uint8(90))
	f.Fuzz(func(t *testing.T, seed uint64, loss, recvPkts, late uint8) {
		p := randomLiveness(seed)
		p.loss = float64(loss) / 255 * 0.05
		p.recvPkts = 2 + int(recvPkts%16)
		p.lateP = float64(late) / 255 * 0.3
		p.maxSize = min(p.maxSize, 60<<10)
		var tot livenessTotals
		runLiveness(t, p, &tot)
	})
}

package ndp

import (
	"testing"
)

// pairLoop is an allocation-free two-endpoint loop: fixed frame buffers,
// a fixed in-flight ring, immediate pull release.
type pairLoop struct {
	a, b    *Endpoint
	ha, hb  Handle
	now     Time
	bufs    [512][]byte
	lens    [512]int
	dst     [512]*Endpoint
	head, n int
	rd      []byte
	chunk   []byte
	read    int
	pulls   [1024]Handle
	np      int
}

func newPairLoop(t testing.TB, mtu int, coalesce ...bool) *pairLoop {
	p := &pairLoop{}
	cfg := func(c *Config) {
		c.MTU, c.SendBuffer, c.RecvBuffer = mtu, 2<<20, 2<<20
		c.CoalesceControl = len(coalesce) > 0 && coalesce[0]
	}
	p.a = mkEP(t, ipA, cfg)
	p.b = mkEP(t, ipB, cfg)
	for i := range p.bufs {
		p.bufs[i] = make([]byte, MaxFrameLen(mtu))
	}
	p.rd = make([]byte, 64<<10)
	p.chunk = pattern(5, 40*MaxPayload(mtu)) // more than IW: part pushed, part pulled
	p.b.Listen(80)
	h, err := p.a.Dial(addrOf(p.b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.ha = h
	return p
}

func (p *pairLoop) pollInto(from, to *Endpoint) {
	for p.n < len(p.bufs) {
		i := (p.head + p.n) % len(p.bufs)
		l, _ := from.PollFrame(p.bufs[i], p.now, true)
		if l == 0 {
			return
		}
		p.lens[i], p.dst[i] = l, to
		p.n++
	}
}

// step: write a chunk, move every frame once, release pulls, read.
func (p *pairLoop) step() {
	p.now += 10 * us
	p.a.Write(p.ha, p.chunk, p.now)
	p.pollInto(p.a, p.b)
	p.pollInto(p.b, p.a)
	for p.n > 0 {
		i := p.head
		p.dst[i].HandleFrame(p.bufs[i][:p.lens[i]], p.now)
		p.head = (p.head + 1) % len(p.bufs)
		p.n--
	}
	for {
		ev, ok := p.b.PollEvent()
		if !ok {
			break
		}
		switch ev.Kind {
		case EventAccepted:
			p.hb = ev.Handle
		case EventPulls:
			for k := 0; k < ev.Count && p.np < len(p.pulls); k++ {
				p.pulls[p.np] = ev.Handle
				p.np++
			}
		case EventDropPulls:
			p.np = 0
		}
	}
	for k := 0; k < p.np; k++ {
		p.b.PullReleased(p.pulls[k], p.now)
	}
	p.np = 0
	for {
		if _, ok := p.a.PollEvent(); !ok {
			break
		}
	}
	if p.hb != 0 {
		for {
			n, _ := p.b.Read(p.hb, p.rd)
			if n == 0 {
				break
			}
			p.read += n
		}
	}
	p.a.HandleTimers(p.now)
	p.b.HandleTimers(p.now)
}

func TestSteadyStateNoAllocs(t *testing.T) {
	for _, tc := range []struct {
		mtu      int
		coalesce bool // the engine's setting: merged ACK/PULL frames, ACKs carried in DATA
	}{{1500, false}, {9000, false}, {1500, true}, {9000, true}} {
		mtu := tc.mtu
		p := newPairLoop(t, mtu, tc.coalesce)
		for i := 0; i < 200; i++ { // warm up: accept, pools, event ring
			p.step()
		}
		before, samples := p.read, p.a.Stats().RTTSamples
		allocs := testing.AllocsPerRun(500, p.step)
		if allocs != 0 {
			t.Fatalf("MTU %d: %v allocations per steady-state step", mtu, allocs)
		}
		if p.a.Stats().RTTSamples-samples < 500*10 {
			t.Fatalf("MTU %d: RTT estimator not exercised (%d samples)", mtu, p.a.Stats().RTTSamples-samples)
		}
		if p.read-before < 500*10*MaxPayload(mtu) {
			t.Fatalf("MTU %d: only %d bytes moved in 500 steps (< 10 packets per step)", mtu, p.read-before)
		}
		st := p.a.Stats()
		if tc.coalesce && p.b.Stats().ControlMerged == 0 {
			t.Fatalf("MTU %d: coalescing not exercised", mtu)
		}
		t.Logf("MTU %d coalesce %v: %d bytes read, sender %d data frames, %d pushed, %d pulled", mtu, tc.coalesce, p.read, st.DataOut, st.PushedOut, st.PulledOut)
	}
}

// Accepting a connection on a listened port does not allocate (Listen
// preallocates connection objects).
func TestAcceptNoAllocs(t *testing.T) {
	b := mkEP(t, ipB, func(c *Config) { c.ListenReserve = 64; c.MaxConns = 128 })
	b.Listen(80)
	a := mkEP(t, ipA, func(c *Config) { c.MaxConns = 128 })
	var frames [][]byte
	for i := 0; i < 40; i++ {
		h, _ := a.Dial(addrOf(b, 80), DialOptions{}, 0)
		a.Write(h, []byte("request"), 0)
		for _, r := range poll(t, a, 0, true) {
			frames = append(frames, r.b)
		}
	}
	i := 0
	buf := make([]byte, 2000)
	allocs := testing.AllocsPerRun(30, func() {
		b.HandleFrame(frames[i], us)
		i++
		for {
			if n, _ := b.PollFrame(buf, us, true); n == 0 {
				break
			}
		}
		for {
			if _, ok := b.PollEvent(); !ok {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per accepted connection", allocs)
	}
	if st := b.Stats(); st.ConnsOpened < 30 {
		t.Fatalf("opened %d", st.ConnsOpened)
	}
}

func BenchmarkSteadyStateStep1500(b *testing.B) { benchStep(b, 1500) }
func BenchmarkSteadyStateStep9000(b *testing.B) { benchStep(b, 9000) }

func benchStep(b *testing.B, mtu int) {
	p := newPairLoop(b, mtu)
	for i := 0; i < 100; i++ {
		p.step()
	}
	start := p.read
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.step()
	}
	b.SetBytes(int64((p.read - start) / max(1, b.N)))
}

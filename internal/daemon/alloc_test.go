package daemon

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// sinkTransport takes every byte written and has readBytes to deliver
// whenever armed; it never allocates.
type sinkTransport struct {
	armed bool
	ev    bool
}

func (t *sinkTransport) Listen(uint16) error { return nil }
func (t *sinkTransport) Unlisten(uint16)     {}
func (t *sinkTransport) Dial(netip.AddrPort, DialOptions) (ConnID, bool, error) {
	return 1, false, nil
}
func (t *sinkTransport) SetWakeup(func())                              {}
func (t *sinkTransport) Write(_ ConnID, p []byte, _ bool) (int, error) { return len(p), nil }
func (t *sinkTransport) CloseWrite(ConnID) error                       { return nil }
func (t *sinkTransport) Read(_ ConnID, p []byte) (int, error) {
	if !t.armed {
		return 0, nil
	}
	t.armed = false
	return copy(p, "response bytes"), nil
}
func (t *sinkTransport) Release(ConnID)              {}
func (t *sinkTransport) Abort(ConnID, ndp.ResetCode) {}
func (t *sinkTransport) Poll(bool, bool) bool        { return false }
func (t *sinkTransport) Events(dst []TransportEvent) int {
	if !t.ev {
		return 0
	}
	t.ev = false
	dst[0] = TransportEvent{Kind: TEReadable, Conn: 1}
	return 1
}
func (t *sinkTransport) PollTimeout() time.Duration { return -1 }
func (t *sinkTransport) WaitFD() int                { return -1 }

// TestCoreSteadyStateAllocs drives the core's per-iteration work by hand
// (no Run goroutine, so nothing else allocates meanwhile): one TX
// descriptor in, written, completed; one RX delivery out, released. The
// data path must not allocate.
// manualCore is a core with one attached app whose iterations the test
// drives by hand (no Run goroutine).
func manualCore(t testing.TB, tr Transport) (*Core, *session, *ring.AppEnd, *ring.BufferArea, ring.Layout) {
	c, err := NewCore(smallConfig(), tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.shutdown)
	_, att, err := c.attach(PeerCred{}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bufFD := att.Buffer
	region, err := ring.OpenRegion(att)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { region.Close() })
	l := region.Layout()
	buf, err := ring.MapBufferArea(bufFD, l.BufferFrames, l.FrameSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	app, err := region.AppEnd()
	if err != nil {
		t.Fatal(err)
	}
	return c, c.sessions[0], app, buf, l
}

// TestCoreSteadyStateAllocs drives the core's per-iteration work by hand
// (no Run goroutine, so nothing else allocates meanwhile): one TX
// descriptor in, written, completed; one RX delivery out, released. The
// data path must not allocate.
func TestCoreSteadyStateAllocs(t *testing.T) {
	tr := &sinkTransport{}
	c, s, app, buf, l := manualCore(t, tr)
	aux, _ := PackAddr(netip.MustParseAddrPort("10.0.0.2:7"))
	app.Cmd.Produce([]ring.Desc{{Frame: ring.NoFrame, Op: ring.OpConnect, Aux: aux, Cookie: connectCookie}})
	c.pollSession(s)
	var ev [4]ring.Desc
	if n, _ := app.Events.Consume(ev[:]); n != 1 || Status(ev[0].Aux) != StatusOK {
		t.Fatalf("connect reply: %d %+v", n, ev[0])
	}
	frames := ring.NewFrameStack(l.Part)
	var fr [1]uint32
	var d [4]ring.Desc
	iteration := func() {
		frames.Pop(fr[:])
		n := copy(buf.Frame(fr[0]), "request bytes")
		d[0] = ring.Desc{Frame: fr[0], Len: uint16(n), Op: ring.OpData}
		app.Sockets[0].TX.Produce(d[:1])
		tr.armed, tr.ev = true, true
		c.transportEvents()
		c.pollSession(s)
		if k, _ := app.Completions.Consume(d[:]); k != 1 {
			t.Fatalf("completions: %d", k)
		}
		frames.PushDescs(d[:1])
		if k, _ := app.Sockets[0].RX.Consume(d[:]); k != 1 || d[0].Len != 14 {
			t.Fatalf("rx: %d %+v", k, d[0])
		}
		app.Releases.Produce(d[:1])
		c.pollSession(s) // takes the release back
	}
	iteration()
	if allocs := testing.AllocsPerRun(200, iteration); allocs != 0 {
		t.Fatalf("core data path allocates %.1f times per request/response", allocs)
	}
	if err := c.pool.Audit(); err != nil {
		t.Fatal(err)
	}
	if st := c.pool.Stats(); st.Lent != 0 || st.InFlight != 0 {
		t.Fatalf("pool after the loop: %+v", st)
	}
}

// FuzzHostileApp feeds arbitrary descriptors to the core on the cmd, TX
// and release rings, as a buggy or hostile application could: the core
// must not panic, and the pool ledger must stay consistent.
func FuzzHostileApp(f *testing.F) {
	seed := make([]byte, 33)
	seed[0] = 0
	ring.PutDesc(seed[1:], &ring.Desc{Frame: ring.NoFrame, Op: ring.OpConnect, Aux: 0x0a00000200007})
	f.Add(seed)
	tx := make([]byte, 33)
	tx[0] = 1
	ring.PutDesc(tx[1:], &ring.Desc{Frame: 600, Len: 100, Op: ring.OpData})
	f.Add(append(seed, tx...))
	f.Fuzz(runHostile)
}

func runHostile(t *testing.T, data []byte) {
	{
		c, s, app, _, _ := manualCore(t, newLoopTransport(4096))
		c.listen(s, 7)
		var d [1]ring.Desc
		for len(data) >= 1+ring.DescSize {
			which := data[0]
			ring.GetDesc(data[1:1+ring.DescSize], &d[0])
			data = data[1+ring.DescSize:]
			switch which % 4 {
			case 0:
				app.Cmd.Produce(d[:])
			case 1:
				app.Sockets[int(which/4)%len(app.Sockets)].TX.Produce(d[:])
			case 2:
				app.Releases.Produce(d[:])
			case 3:
				c.transportEvents()
			}
			c.pollSession(s)
			if s.dead {
				break
			}
		}
		if err := c.pool.Audit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFINRidesWithLastData: when the app's OpCloseWrite is read together
// with its last TX descriptor, the core hands the FIN to the transport
// with that data (one packet); when the OpCloseWrite comes later, it is a
// separate CloseWrite. The peer sees the stream end either way.
func TestFINRidesWithLastData(t *testing.T) {
	for _, together := range []bool{true, false} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) {
			tr := newLoopTransport(4096)
			c, s, app, buf, l := manualCore(t, tr)
			c.listen(s, 7)
			aux, _ := PackAddr(netip.MustParseAddrPort("10.0.0.2:7"))
			frames := ring.NewFrameStack(l.Part)
			var fr [1]uint32
			frames.Pop(fr[:])
			n := copy(buf.Frame(fr[0]), "last words")
			app.Cmd.Produce([]ring.Desc{{Frame: ring.NoFrame, Op: ring.OpConnect, Aux: aux, Cookie: connectCookie}})
			app.Sockets[0].TX.Produce([]ring.Desc{{Frame: fr[0], Len: uint16(n), Op: ring.OpData}})
			closeWrite := ring.Desc{Frame: ring.NoFrame, Op: OpCloseWrite}
			if together {
				app.Cmd.Produce([]ring.Desc{closeWrite})
			}
			c.pollSession(s)
			if !together {
				app.Cmd.Produce([]ring.Desc{closeWrite})
				c.pollSession(s)
			}
			tr.mu.Lock()
			defer tr.mu.Unlock()
			want := 0
			if together {
				want = 1
			}
			if tr.finWrites != want {
				t.Fatalf("writes carrying the FIN: %d, want %d", tr.finWrites, want)
			}
			var peer *loopConn
			for _, lc := range tr.conns {
				if !lc.dialer {
					peer = lc
				}
			}
			if peer == nil || string(peer.rbuf) != "last words" || !peer.fin {
				t.Fatalf("acceptor side: %+v", peer)
			}
		})
	}
}

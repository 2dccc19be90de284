package main

import (
	"strings"
	"sync/atomic"
	"time"

	asavie "github.com/asavie/xdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

// The same raw ping-pong as xdpPingpong, through github.com/asavie/xdp
// v0.3.3 (its default program redirects every frame of the queue to the
// socket; attached with netlink, driver-chosen mode: native on veth).
// Imported only here, for comparison.

type asavieEnd struct {
	ns      *testbed.Namespace
	ifindex int
	xsk     *asavie.Socket
	prog    *asavie.Program
}

// openAsavie retries for a second: asavie does not retry bind on EBUSY.
func openAsavie(ns *testbed.Namespace, ifindex int) (*asavieEnd, error) {
	deadline := time.Now().Add(time.Second)
	for {
		e, err := openAsavieOnce(ns, ifindex)
		if err == nil || !strings.Contains(err.Error(), "busy") || time.Now().After(deadline) {
			return e, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func openAsavieOnce(ns *testbed.Namespace, ifindex int) (*asavieEnd, error) {
	e := &asavieEnd{ns: ns, ifindex: ifindex}
	err := ns.Do(func() error {
		var err error
		e.xsk, err = asavie.NewSocket(ifindex, 0, &asavie.SocketOptions{
			NumFrames: 1024, FrameSize: 2048,
			FillRingNumDescs: 256, CompletionRingNumDescs: 256, RxRingNumDescs: 256, TxRingNumDescs: 256,
		})
		if err != nil {
			return err
		}
		e.prog, err = asavie.NewProgram(1)
		if err != nil {
			return err
		}
		if err := e.prog.Attach(ifindex); err != nil {
			return err
		}
		return e.prog.Register(0, e.xsk.FD())
	})
	if err != nil {
		e.close()
		return nil, err
	}
	e.refill()
	return e, nil
}

func (e *asavieEnd) close() {
	_ = e.ns.Do(func() error {
		if e.prog != nil {
			e.prog.Unregister(0)
			e.prog.Detach(e.ifindex)
			e.prog.Close()
		}
		if e.xsk != nil {
			e.xsk.Close()
		}
		return nil
	})
}

// refill gives every free frame to the fill ring (asavie's idiom).
func (e *asavieEnd) refill() {
	if n := e.xsk.NumFreeFillSlots(); n > 0 {
		e.xsk.Fill(e.xsk.GetDescs(n))
	}
}

type asaviePingpong struct {
	a, b *asavieEnd
	seq  uint64
	tmpl []byte
}

func newAsaviePingpong(pair *testbed.Pair, o pingpongOpts) (*asaviePingpong, error) {
	a, err := openAsavie(pair.A, pair.Veth.A.Index)
	if err != nil {
		return nil, err
	}
	b, err := openAsavie(pair.B, pair.Veth.B.Index)
	if err != nil {
		a.close()
		return nil, err
	}
	f := ppFrame(pair, ppXDPPort)
	tmpl := make([]byte, testbed.UDPHeaderLen+o.size)
	f.Build(tmpl, make([]byte, o.size))
	return &asaviePingpong{a: a, b: b, tmpl: tmpl}, nil
}

func (p *asaviePingpong) name() string { return "asavie" }
func (p *asaviePingpong) mode() string {
	return "github.com/asavie/xdp v0.3.3, default socket flags, netlink attach"
}

func (p *asaviePingpong) echo(stop *atomic.Bool) error {
	b := p.b
	for !stop.Load() {
		n := b.xsk.NumReceived()
		if n == 0 {
			continue
		}
		rx := b.xsk.Receive(n)
		for _, d := range rx {
			testbed.SwapUDP(b.xsk.GetFrame(d))
		}
		b.xsk.Transmit(rx)
		if c := b.xsk.NumCompleted(); c > 0 {
			b.xsk.Complete(c)
		}
		b.refill()
	}
	return nil
}

func (p *asaviePingpong) roundTrip(timeout time.Duration) (time.Duration, error) {
	a := p.a
	if c := a.xsk.NumCompleted(); c > 0 {
		a.xsk.Complete(c)
	}
	tx := a.xsk.GetDescs(1)
	for len(tx) == 0 {
		if c := a.xsk.NumCompleted(); c > 0 {
			a.xsk.Complete(c)
		}
		tx = a.xsk.GetDescs(1)
	}
	frame := a.xsk.GetFrame(tx[0])
	tx[0].Len = uint32(copy(frame, p.tmpl))
	p.seq++
	setSeq(frame[testbed.UDPHeaderLen:], p.seq)
	fixUDPChecksum(frame[:tx[0].Len])
	t0 := time.Now()
	a.xsk.Transmit(tx)
	for {
		if n := a.xsk.NumReceived(); n > 0 {
			match := false
			for _, d := range a.xsk.Receive(n) {
				match = match || getSeq(a.xsk.GetFrame(d)[testbed.UDPHeaderLen:]) == p.seq
			}
			rtt := time.Since(t0)
			a.refill()
			if match {
				return rtt, nil
			}
		}
		if time.Since(t0) > timeout {
			return 0, errLost
		}
	}
}

func (p *asaviePingpong) close() {
	p.a.close()
	p.b.close()
}

package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	asavie "github.com/asavie/xdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

// The same raw ping-pong as pingpongXDP, through github.com/asavie/xdp
// v0.3.3 (its default program redirects every frame of the queue to the
// socket; attached with netlink, native mode on veth). Imported only here,
// for comparison.

type asavieEnd struct {
	ifindex int
	xsk     *asavie.Socket
	prog    *asavie.Program
}

// openAsavie retries for a second: asavie does not retry bind on EBUSY, which
// it gets while the previous transport's socket on the queue is torn down.
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
	e := &asavieEnd{ifindex: ifindex}
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
		e.close(ns)
		return nil, err
	}
	return e, nil
}

func (e *asavieEnd) close(ns *testbed.Namespace) {
	_ = ns.Do(func() error {
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

func pingpongAsavie(pair *testbed.Pair, o pingpongOpts) (latencyResult, error) {
	a, err := openAsavie(pair.A, pair.Veth.A.Index)
	if err != nil {
		return latencyResult{}, err
	}
	defer a.close(pair.A)
	b, err := openAsavie(pair.B, pair.Veth.B.Index)
	if err != nil {
		return latencyResult{}, err
	}
	defer b.close(pair.B)
	a.refill()
	b.refill()
	cpuClient, cpuEcho := cpuPair()

	var stop atomic.Bool
	echoErr := make(chan error, 1)
	go func() {
		if err := lockAndPin(cpuEcho); err != nil {
			echoErr <- err
			return
		}
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
		echoErr <- nil
	}()
	var res latencyResult
	var cerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cerr = lockAndPin(cpuClient); cerr != nil {
			return
		}
		f := ppFrame(pair, ppXDPPort)
		tmpl := make([]byte, testbed.UDPHeaderLen+o.size)
		f.Build(tmpl, make([]byte, o.size))
		rtts := make([]time.Duration, 0, o.n)
		lost := 0
		for i := 0; i < o.warmup+o.n; i++ {
			if c := a.xsk.NumCompleted(); c > 0 {
				a.xsk.Complete(c)
			}
			tx := a.xsk.GetDescs(1)
			if len(tx) == 0 {
				i--
				continue
			}
			tx[0].Len = uint32(copy(a.xsk.GetFrame(tx[0]), tmpl))
			t0 := time.Now()
			a.xsk.Transmit(tx)
			n := 0
			for n == 0 {
				n = a.xsk.NumReceived()
				if n == 0 && time.Since(t0) > o.timeout {
					break
				}
			}
			if n > 0 {
				a.xsk.Receive(n)
			}
			rtt := time.Since(t0)
			a.refill()
			if n == 0 {
				lost++
				continue
			}
			if i >= o.warmup {
				rtts = append(rtts, rtt)
			}
		}
		res = summarize("asavie", rtts, lost, "github.com/asavie/xdp v0.3.3, default socket flags, netlink attach")
	}()
	<-done
	stop.Store(true)
	if err := <-echoErr; err != nil {
		return res, fmt.Errorf("echo: %w", err)
	}
	return res, cerr
}

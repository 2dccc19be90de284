package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// dropDataLink drops the first DATA frame with payload it receives once
// armed: a real loss on the wire, which nothing trims or reports.
type dropDataLink struct {
	Link
	armed   atomic.Bool
	dropped atomic.Int32
	f       ndp.Frame
}

func (l *dropDataLink) Receive(frames [][]byte) int {
	n := l.Link.Receive(frames)
	if !l.armed.Load() {
		return n
	}
	for i := 0; i < n; i++ {
		if ndp.ParseFrame(frames[i], &l.f) == nil && l.f.Header.Type == ndp.TypeData && len(l.f.Payload) > 0 {
			copy(frames[i:], frames[i+1:n]) // ReleaseReceived still releases it
			l.armed.Store(false)
			l.dropped.Add(1)
			return n - 1
		}
	}
	return n
}

// The RTO keeps its job while it stays off late peers' spikes: on a
// persistent connection over a veth, a request lost on the wire (no trim,
// no NACK) is resent and answered within the sender's RTO in force (the
// 1 ms floor unless the late-peer memory raised it) plus a few ms.
func TestXDPLossRepairedByRTO(t *testing.T) {
	var drop *dropDataLink
	v := newVethPairCfg(t, func(c *Config) {
		if c.Endpoint.LocalIP[3] == 2 { // the server's side (testbed: .1 and .2)
			drop = &dropDataLink{Link: c.Link}
			c.Link = drop
		}
	})
	if drop == nil {
		t.Fatal("no server link wrapped")
	}
	l, err := v.b.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := l.Accept(nil)
		if err != nil {
			return
		}
		buf := make([]byte, 1024)
		for {
			if _, err := readFullConn(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf, false, nil); err != nil {
				return
			}
		}
	}()
	c, err := v.a.Dial(context.Background(), v.ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, resp := make([]byte, 1024), make([]byte, 1024)
	exchange := func() time.Duration {
		t0 := time.Now()
		if _, err := c.Write(req, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := readFullConn(c, resp); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 200 {
		exchange()
	}
	info := rttOfConn(t, v.a, c)
	before := v.a.Stats().Endpoint
	drop.armed.Store(true)
	took := exchange()
	after := v.a.Stats().Endpoint
	if drop.dropped.Load() != 1 {
		t.Fatal("no request was dropped")
	}
	t.Logf("the lost request's exchange took %v (RTO in force %v, SRTT %v)", took, info.RTO, info.SRTT)
	if after.RTOFires == before.RTOFires || after.SpuriousRTOs != before.SpuriousRTOs {
		t.Fatalf("RTO fires %d -> %d, spurious %d -> %d: the loss was not repaired by the RTO", before.RTOFires, after.RTOFires, before.SpuriousRTOs, after.SpuriousRTOs)
	}
	if limit := info.RTO + 5*time.Millisecond; took > limit {
		t.Fatalf("the lost request was answered after %v, beyond its RTO %v + 5 ms", took, info.RTO)
	}
}

// rttOfConn is c's RTT estimate and RTO in force.
func rttOfConn(t *testing.T, s *Stack, c *Conn) ndp.RTTInfo {
	t.Helper()
	s.mu.Lock()
	info, ok := s.ep.RTT(c.h)
	s.mu.Unlock()
	if !ok {
		t.Fatal("no RTT for the connection")
	}
	return info
}

package ndp

import (
	"bytes"
	"testing"
	"time"
)

// manyToOne: senders hosts 1..k each send size bytes to host 0 over a
// 10 Gb/s downlink with an 8-packet NDP data queue; verify every byte.
func manyToOne(t *testing.T, k, size, mtu int, seed uint64) *testNet {
	cfgs := make([]Config, k+1)
	for i := range cfgs {
		cfgs[i] = Config{MTU: mtu, MaxConns: 256, RecvBuffer: 1 << 20, SendBuffer: 1 << 20}
	}
	n := newTestNet(t, seed, cfgs...)
	n.rate = 1.25 // 10 Gb/s in bytes/ns
	n.queueBytes = 8 * (mtu + 14)
	n.latency = Time(2 * time.Microsecond)
	n.hosts[0].pullGap = Time(float64(mtu+14+24) / n.rate)
	rcv := n.hosts[0].ep
	if err := rcv.Listen(80); err != nil {
		t.Fatal(err)
	}
	hs := make([]Handle, k)
	for i := 1; i <= k; i++ {
		h, err := n.hosts[i].ep.Dial(n.addr(0, 80), DialOptions{LocalPort: uint16(1000 + i)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		hs[i-1] = h
		if w, err := n.hosts[i].ep.Write(h, pattern(i, size), 0); err != nil || w != size {
			t.Fatalf("write %d %v", w, err)
		}
		n.hosts[i].ep.CloseWrite(h, 0)
	}
	done := func() bool {
		if len(n.hosts[0].accepted) != k {
			return false
		}
		for _, h := range n.hosts[0].accepted {
			if !n.hosts[0].eof[h] {
				return false
			}
		}
		return true
	}
	if !n.run(10_000_000, done) {
		t.Fatalf("incast did not complete: accepted %d: %v", len(n.hosts[0].accepted), n.hosts[0].ep.Stats())
	}
	// match content by remote port
	for _, h := range n.hosts[0].accepted {
		c := rcv.conn(h)
		i := int(c.remote.Port) - 1000
		if !bytes.Equal(n.hosts[0].got(h), pattern(i, size)) {
			t.Fatalf("sender %d: content mismatch (%d bytes)", i, len(n.hosts[0].got(h)))
		}
	}
	return n
}

func TestIncast100x15(t *testing.T) {
	mss := MaxPayload(1500)
	n := manyToOne(t, 100, 15*mss, 1500, 1)
	st := n.hosts[0].ep.Stats()
	ideal := time.Duration(float64(100*15*(1500+14+24)) / 1.25)
	t.Logf("100x15 pkts: finished at %v (ideal %v at 10Gb/s); trimmed %d, receiver %+v",
		time.Duration(n.now), ideal, n.trimmedAt, st)
	if st.ConnsOpened != 100 {
		t.Fatalf("opened %d", st.ConnsOpened)
	}
	if time.Duration(n.now) > 3*ideal {
		t.Errorf("incast took %v, more than 3x the ideal %v", time.Duration(n.now), ideal)
	}
}

func TestSevenJumboFlows(t *testing.T) {
	n := manyToOne(t, 7, 1<<20, 9000, 2)
	ideal := time.Duration(7 * (1 << 20) * 8 / 10) // bytes at 1.25 B/ns
	var rtx uint64
	for _, h := range n.hosts[1:] {
		rtx += h.ep.Stats().Retransmits
	}
	st := n.hosts[0].ep.Stats()
	t.Logf("7x1MB jumbo: finished at %v (ideal %v); trimmed %d, retransmits %d, receiver dataIn %d",
		time.Duration(n.now), ideal, n.trimmedAt, rtx, st.DataIn)
	if time.Duration(n.now) > 2*ideal {
		t.Errorf("7x1MB took %v, more than 2x the ideal %v", time.Duration(n.now), ideal)
	}
}

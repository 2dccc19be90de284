package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
)

// An interface MTU above what a 2 KB UMEM frame holds gets 4 KB frames and
// packets as large as the interface allows: up to the 4 KB frame (MTU
// 3826) in one frame, above it as multi-buffer chains of frames (MTU 9000:
// 9014-byte frames over three). XDPConfig.MTU below the interface's sets
// the stack's MTU and the frames: at 3826 and below one frame per packet,
// no multi-buffer. Fewer packets per byte; data crosses intact at each size.
func TestXDPJumboMTU(t *testing.T) {
	for _, tc := range []struct {
		ifMTU, mtu, wantMTU int // mtu: XDPConfig.MTU
		batch               int // Config.Batch; 1: a receive batch smaller than a chain
	}{
		{1500, 0, 1500, 0},
		{3800, 0, 3800, 0},
		{9000, 0, 9000, 0},
		{9000, 0, 9000, 1},
		{9000, 4096 - xdpHeadroom - 14, 3826, 0}, // what one frame holds
		{9000, 1500, 1500, 0},
	} {
		t.Run(fmt.Sprintf("%d/mtu=%d/batch=%d", tc.ifMTU, tc.mtu, tc.batch), func(t *testing.T) {
			tb := testbed.NewT(t)
			p, err := tb.NewPair(testbed.VethConfig{MTU: tc.ifMTU})
			if err != nil {
				t.Fatal(err)
			}
			mode := func(c *Config) { c.Mode, c.Batch = PollAdaptive, tc.batch }
			a := openXDPStackLink(t, p.A, XDPConfig{Interface: p.Veth.A.Name, MTU: tc.mtu}, p.Veth.A, mode, 1)
			b := openXDPStackLink(t, p.B, XDPConfig{Interface: p.Veth.B.Name, MTU: tc.mtu}, p.Veth.B, mode, 2)
			if got := a.Config().Endpoint.MTU; got != tc.wantMTU {
				t.Fatalf("stack MTU %d, want %d", got, tc.wantMTU)
			}
			if mb := a.cfg.Link.(*XDPLink).Port().Info().MultiBuffer; mb != (tc.wantMTU > 3826) {
				t.Fatalf("multi-buffer %v at MTU %d", mb, tc.wantMTU)
			}
			l, err := b.Listen(9, 0)
			if err != nil {
				t.Fatal(err)
			}
			const size = 2 << 20
			msg := make([]byte, size)
			for i := range msg {
				msg[i] = byte(i*7 + i>>11)
			}
			got := make(chan []byte, 1)
			go func() {
				c, err := l.Accept(nil)
				if err != nil {
					got <- nil
					return
				}
				defer c.Close()
				out, _ := readAll(c)
				got <- out
			}()
			c, err := a.Dial(context.Background(), p.Veth.B.Addr.Addr().As4(), 9, ndp.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(msg, true, nil); err != nil {
				t.Fatal(err)
			}
			if out := <-got; !bytes.Equal(out, msg) {
				t.Fatalf("received %d bytes, not the %d sent", len(out), size)
			}
			c.Close()
			st := a.Stats().Endpoint
			mss := tc.wantMTU - ndp.HeaderOverhead + 14
			// First transmissions (retransmissions are the RTO's business).
			if first, min := st.DataOut-st.Retransmits, uint64((size+mss-1)/mss); first < min || first > min+min/8 {
				t.Errorf("%d DATA packets (%d of them retransmissions) for %d bytes at MSS %d (want %d first transmissions)", st.DataOut, st.Retransmits, size, mss, min)
			}
			ls := a.Stats().Link
			if ls.TxFrames < st.FramesOut || ls.TxKicks == 0 || ls.TxKicks > ls.TxFrames || ls.InvalidDescriptors != 0 {
				t.Errorf("link counters %+v do not match the endpoint's %d frames out", ls, st.FramesOut)
			}
			t.Logf("interface MTU %d: stack MTU %d, %d DATA packets, %d retransmitted", tc.ifMTU, tc.wantMTU, st.DataOut, st.Retransmits)
		})
	}
}

// An XDPConfig.MTU above the interface's is a configuration error.
func TestXDPMTUAboveInterface(t *testing.T) {
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	err = p.A.Do(func() error {
		l, err := OpenXDP(XDPConfig{Interface: p.Veth.A.Name, MTU: 1501})
		if err == nil {
			l.Close()
		}
		return err
	})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MTU 1501 on an MTU 1500 interface: %v, want ErrInvalidConfig", err)
	}
}

// A bulk transfer over multi-buffer links (MTU 9000: each DATA frame a
// chain of three UMEM frames, joined on receive, split on transmit)
// allocates nothing per packet at either end.
func TestXDPJumboBulkNoAllocsPerPacket(t *testing.T) {
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{MTU: 9000})
	if err != nil {
		t.Fatal(err)
	}
	a := openXDPStack(t, p.A, p.Veth.A, nil, 1)
	b := openXDPStack(t, p.B, p.Veth.B, nil, 2)
	if got := a.Config().Endpoint.MTU; got != 9000 {
		t.Fatalf("stack MTU %d, want 9000", got)
	}
	checkBulkAllocsSize(t, a, b, p.Veth.B.Addr.Addr().As4(), 16<<20, 1500)
}

package engine

import (
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// BenchmarkXDPRPC: 1 KB request / 1 KB response, a new connection per RPC,
// both stacks PollBusy without background pollers, over veth. One op is one
// RPC; run with -cpuprofile to see where an RPC's time goes.
func BenchmarkXDPRPC(b *testing.B) {
	v := newVethPairCfg(b, func(c *Config) { c.Mode = PollBusy; c.NoBackground = true })
	l, err := v.b.Listen(7, 0)
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		buf := make([]byte, 1024)
		for {
			c, err := l.Accept(stop)
			if err != nil {
				return
			}
			if _, err := readFullConn(c, buf); err != nil {
				b.Error(err)
				return
			}
			c.Write(buf, true, nil)
			c.Close()
		}
	}()
	defer close(stop)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	req, resp := make([]byte, 1024), make([]byte, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := v.a.Dial(context.Background(), v.ipB, 7, ndp.DialOptions{})
		if err != nil {
			b.Fatal(err)
		}
		c.Write(req, true, nil)
		if _, err := readFullConn(c, resp); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(resp[:1], nil); err != io.EOF {
			b.Fatal(err)
		}
		c.Close()
	}
	b.StopTimer()
	for _, s := range []*Stack{v.a, v.b} {
		st := s.Stats()
		qs, _ := s.link.(*XDPLink).Port().Stats()
		b.Logf("N=%d polls %d rx %d tx %d kicks %d txbatches %d retransmits %d", b.N, st.Polls, st.RxFrames, st.TxFrames, qs[0].TxKicks, qs[0].TxBatches, st.Endpoint.Retransmits)
	}
}

func readFullConn(c *Conn, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := c.Read(p[n:], nil)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

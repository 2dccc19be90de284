package engine

import (
	"context"
	"io"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// BenchmarkMemRPC is the software cost of one RPC (1 KB request, 1 KB
// response, a new connection per RPC) through both stacks, with no link
// cost: one goroutine drives client and server over an in-memory cable,
// each call finding its data already there. Run with -cpuprofile to see
// where an RPC's CPU time goes (BenchmarkXDPRPC adds the kernel's share).
func BenchmarkMemRPC(b *testing.B) {
	a, s, _, _ := memPair(b, PollBusy, func(c *Config) { c.NoBackground = true })
	l, err := s.Listen(7, 0)
	if err != nil {
		b.Fatal(err)
	}
	req, resp, buf := make([]byte, 1024), make([]byte, 1024), make([]byte, 1024)
	rpc := func() {
		c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req, true, nil); err != nil {
			b.Fatal(err)
		}
		sc, err := l.Accept(nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := readFullConn(sc, buf); err != nil {
			b.Fatal(err)
		}
		if _, err := sc.Write(buf, true, nil); err != nil {
			b.Fatal(err)
		}
		sc.CloseAndReuse() // as sockapi's servers that drop their Conns: no allocation per accept
		if _, err := readFullConn(c, resp); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(resp[:1], nil); err != io.EOF {
			b.Fatalf("want EOF, got %v", err)
		}
		c.CloseAndReuse() // as sockapi's CallInto
	}
	for i := 0; i < 100; i++ {
		rpc()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rpc()
	}
	b.StopTimer()
	if st := a.Stats(); st.Endpoint.Retransmits != 0 {
		b.Errorf("client retransmitted %d packets", st.Endpoint.Retransmits)
	}
}

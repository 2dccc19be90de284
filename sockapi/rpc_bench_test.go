package sockapi

import (
	"context"
	"io"
	"testing"
)

// BenchmarkPipeRPC is the CPU cost of one RPC through the public API (1 KB
// request and response, a new connection per RPC), both stacks over an
// in-memory pipe driven by one goroutine, every call finding its data
// already there: compare with internal/engine's BenchmarkMemRPC for what
// this layer adds.
func BenchmarkPipeRPC(b *testing.B) {
	cli, srv, err := OpenPipe(Config{PollMode: PollBusy, NoBackgroundPoller: true}, addrA, addrB)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	defer srv.Close()
	l, err := srv.Listen(7)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	addr := Addr{IP: addrB, Port: 7}
	req, resp, buf := make([]byte, 1024), make([]byte, 1024), make([]byte, 1024)
	rpc := func() { pipeRPC(b, cli, l, addr, req, resp, buf) }
	for i := 0; i < 100; i++ {
		rpc()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rpc()
	}
}

// pipeRPC makes one new-connection RPC by hand, as CallInto does, with the
// server's side on the calling goroutine too: the client dials and sends
// req with its FIN, the server accepts, reads it into buf and answers it
// with its FIN, and the client reads the answer into resp. Both ends close
// with CloseAndReuse, so the client's ACK of the answer waits for its
// stack's next call (PollBusy).
func pipeRPC(tb testing.TB, cli *Stack, l *Listener, addr Addr, req, resp, buf []byte) {
	tb.Helper()
	c, err := cli.DialAddr(context.Background(), addr)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := c.WriteAndClose(req); err != nil {
		tb.Fatal(err)
	}
	sc, err := l.AcceptNDP()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadFull(sc, buf); err != nil {
		tb.Fatal(err)
	}
	if _, err := sc.WriteAndClose(buf); err != nil {
		tb.Fatal(err)
	}
	sc.CloseAndReuse() // a server that drops its accepted Conns
	if n, err := readMessage(c, resp); err != nil || n != len(resp) {
		tb.Fatalf("response: %d bytes, %v", n, err)
	}
	c.CloseAndReuse() // as CallInto
}

package sockapi

import (
	"context"
	"testing"
)

// BenchmarkRecvMessageRPC is one Call answered by a RecvMessage server
// loop (1 KB each way), both stacks over an in-memory pipe, adaptive
// polling: what a message server adds to an RPC.
func BenchmarkRecvMessageRPC(b *testing.B) {
	cli, srv, err := OpenPipe(Config{}, addrA, addrB)
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
	echoServer(l, 0)
	req := make([]byte, 1024)
	ctx := context.Background()
	addr := addrB.String() + ":7"
	for i := 0; i < 100; i++ {
		if _, err := cli.Call(ctx, addr, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cli.Call(ctx, addr, req); err != nil {
			b.Fatal(err)
		}
	}
}

package sockapi

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
)

// TestConnReadWriteAllocs: request/response on an established Conn (Write
// then Read on both ends, 1 KiB and 64 KiB) allocates nothing, in either
// polling mode.
func TestConnReadWriteAllocs(t *testing.T) {
	for _, mode := range []PollMode{PollAdaptive} {
		cli, srv, err := OpenPipe(Config{PollMode: mode}, addrA, addrB)
		if err != nil {
			t.Fatal(err)
		}
		l, err := srv.Listen(7)
		if err != nil {
			t.Fatal(err)
		}
		c, err := cli.DialAddr(context.Background(), Addr{IP: addrB, Port: 7})
		if err != nil {
			t.Fatal(err)
		}
		const max = 64 << 10
		req, resp := make([]byte, max), make([]byte, max)
		if _, err := c.Write(req[:1]); err != nil {
			t.Fatal(err)
		}
		sc, err := l.AcceptNDP()
		if err != nil {
			t.Fatal(err)
		}
		echoed := make(chan error, 1)
		go func() { // echo: a 4-byte length, then that many bytes back
			buf := make([]byte, max)
			if _, err := io.ReadFull(sc, buf[:1]); err != nil {
				echoed <- err
				return
			}
			for {
				if _, err := io.ReadFull(sc, buf[:4]); err != nil {
					echoed <- err
					return
				}
				n := int(buf[0]) | int(buf[1])<<8 | int(buf[2])<<16
				if _, err := io.ReadFull(sc, buf[:n]); err != nil {
					echoed <- err
					return
				}
				if _, err := sc.Write(buf[:n]); err != nil {
					echoed <- err
					return
				}
			}
		}()
		hdr := make([]byte, 4)
		for _, size := range []int{1024, max} {
			rpc := func() {
				hdr[0], hdr[1], hdr[2] = byte(size), byte(size>>8), byte(size>>16)
				if _, err := c.Write(hdr); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write(req[:size]); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, resp[:size]); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 20; i++ { // warm up
				rpc()
			}
			if n := testing.AllocsPerRun(20, rpc); n != 0 {
				t.Errorf("mode %d, %d bytes: %v allocations per exchange on an established Conn, want 0", mode, size, n)
			}
		}
		c.Close()
		if err := <-echoed; err != io.EOF && !errors.Is(err, net.ErrClosed) {
			t.Errorf("echo: %v", err)
		}
		cli.Close()
		srv.Close()
	}
}

// TestCallIntoAllocs: a whole new-connection RPC through CallInto (1 KiB
// each way) allocates nothing in steady state: the client's Conns are
// reused by the stack. The server answers through the engine directly
// (internal/engine's Accept, Read, Write with FIN, CloseAndReuse), so it
// allocates nothing either and the count is the client's.
func TestCallIntoAllocs(t *testing.T) {
	for _, mode := range []PollMode{PollAdaptive} {
		t0 := time.Now()
		cli, srv, err := OpenPipe(Config{PollMode: mode}, addrA, addrB)
		if err != nil {
			t.Fatal(err)
		}
		es := srv.b.(*embedded).s
		l, err := es.Listen(7, 0)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() {
			buf := make([]byte, 1024)
			for {
				c, err := l.Accept(nil)
				if err != nil {
					served <- err
					return
				}
				for got := 0; got < len(buf); {
					n, err := c.Read(buf[got:], nil)
					if err != nil {
						served <- err
						return
					}
					got += n
				}
				if _, err := c.Write(buf, true, nil); err != nil {
					served <- err
					return
				}
				c.CloseAndReuse()
			}
		}()
		addr := Addr{IP: addrB, Port: 7}
		req, resp := make([]byte, 1024), make([]byte, 1024)
		ctx := context.Background()
		rpc := func() {
			n, err := cli.CallInto(ctx, addr, req, resp)
			if err != nil || n != len(resp) {
				t.Fatalf("CallInto: %d bytes, %v", n, err)
			}
		}
		for i := 0; i < 200; i++ { // warm up: free lists, tables, time-wait at their steady size
			rpc()
		}
		if n := testing.AllocsPerRun(200, rpc); n != 0 {
			t.Errorf("mode %d: %v allocations per CallInto, want 0", mode, n)
		}
		t.Logf("mode %d: %v", mode, time.Since(t0))
		l.Close()
		if err := <-served; !errors.Is(err, net.ErrClosed) && !errors.Is(err, engine.ErrStackClosed) {
			t.Errorf("server: %v", err)
		}
		cli.Close()
		srv.Close()
	}
}

// TestAcceptAllocs: a whole new-connection RPC between a CallInto client
// and a net.Conn server (AcceptNDP, io.ReadFull, WriteAndClose,
// CloseAndReuse) allocates nothing in steady state on either side: the
// server's accepted Conns, and their engine connections, are reused.
func TestAcceptAllocs(t *testing.T) {
	cli, srv, err := OpenPipe(Config{PollMode: PollAdaptive}, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	defer srv.Close()
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		buf := make([]byte, 1024)
		for {
			c, err := l.AcceptNDP()
			if err != nil {
				served <- err
				return
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				served <- err
				return
			}
			if _, err := c.WriteAndClose(buf); err != nil {
				served <- err
				return
			}
			if err := c.CloseAndReuse(); err != nil {
				served <- err
				return
			}
		}
	}()
	addr := Addr{IP: addrB, Port: 7}
	req, resp := make([]byte, 1024), make([]byte, 1024)
	for i := range req {
		req[i] = byte(i)
	}
	ctx := context.Background()
	rpc := func() {
		clear(resp)
		n, err := cli.CallInto(ctx, addr, req, resp)
		if err != nil || n != len(resp) || string(resp) != string(req) {
			t.Fatalf("CallInto: %d bytes, %v (echo intact: %v)", n, err, string(resp) == string(req))
		}
	}
	for i := 0; i < 200; i++ { // warm up: free lists, tables, time-wait at their steady size
		rpc()
	}
	if n := testing.AllocsPerRun(200, rpc); n != 0 {
		t.Errorf("%v allocations per RPC (CallInto client, AcceptNDP server with CloseAndReuse), want 0", n)
	}
	l.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("server: %v", err)
	}
}

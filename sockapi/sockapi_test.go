package sockapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

var (
	addrA = netip.MustParseAddr("10.99.0.1")
	addrB = netip.MustParseAddr("10.99.0.2")
)

func pipe(t testing.TB) (*Stack, *Stack) {
	t.Helper()
	a, b, err := OpenPipe(Config{}, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

var portSeq atomic.Uint32

// TestNetConn runs x/net/nettest's conformance suite for net.Conn
// (deadlines, Close unblocking, concurrent Read/Write, ordering).
func TestNetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b, err := OpenPipe(Config{}, addrA, addrB)
		if err != nil {
			return nil, nil, nil, err
		}
		c1, c2, closePair, err := connectedPair(a, b, addrB.String(), uint16(1000+portSeq.Add(1)))
		if err != nil {
			a.Close()
			b.Close()
			return nil, nil, nil, err
		}
		return c1, c2, func() { closePair(); a.Close(); b.Close() }, nil
	})
}

// connectedPair listens on port of srv, dials it from cli at host, and pushes one
// byte so the zero-RTT connection reaches the listener (which learns of a
// connection with its first data); stop closes both ends and the listener.
func connectedPair(cli, srv *Stack, host string, port uint16) (c1, c2 net.Conn, stop func(), err error) {
	l, err := srv.Listen(port)
	if err != nil {
		return nil, nil, nil, err
	}
	c1, err = cli.Dial(context.Background(), fmt.Sprintf("%s:%d", host, port))
	if err != nil {
		l.Close()
		return nil, nil, nil, err
	}
	if _, err := c1.Write([]byte{0}); err != nil {
		c1.Close()
		l.Close()
		return nil, nil, nil, err
	}
	if c2, err = l.Accept(); err != nil {
		c1.Close()
		l.Close()
		return nil, nil, nil, err
	}
	var one [1]byte
	if _, err := io.ReadFull(c2, one[:]); err != nil {
		c1.Close()
		c2.Close()
		l.Close()
		return nil, nil, nil, err
	}
	return c1, c2, func() { c1.Close(); c2.Close(); l.Close() }, nil
}

func TestCallAndRecvMessage(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := l.RecvMessage(0)
			if err != nil {
				return
			}
			m.Reply(append([]byte("echo: "), m.Data...))
		}
	}()
	for i := 0; i < 100; i++ {
		req := bytes.Repeat([]byte{byte('a' + i%26)}, i*100)
		resp, err := a.Call(context.Background(), addrB.String()+":7", req)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(resp, append([]byte("echo: "), req...)) {
			t.Fatalf("call %d: wrong response (%d bytes)", i, len(resp))
		}
	}
	buf := make([]byte, 10)
	if _, err := a.CallInto(context.Background(), Addr{addrB, 7}, bytes.Repeat([]byte{1}, 100), buf); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("CallInto small buffer: %v", err)
	}
	if err := a.SendMessage(context.Background(), addrB.String()+":7", []byte("one-way")); err != nil {
		t.Errorf("SendMessage: %v", err)
	}
}

func TestRefused(t *testing.T) {
	a, _ := pipe(t)
	_, err := a.Call(context.Background(), addrB.String()+":9999", []byte("hi"))
	if !errors.Is(err, ErrConnRefused) {
		t.Fatalf("got %v, want ErrConnRefused", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" {
		t.Errorf("want a *net.OpError from read, got %#v", err)
	}
}

func TestContextCancelsCall(t *testing.T) {
	a, b := pipe(t)
	l, _ := b.Listen(7)
	go func() { // accept, never answer
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
			time.Sleep(time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := a.Call(ctx, addrB.String()+":7", []byte("hi"))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestStackCloseUnblocks(t *testing.T) {
	a, b := pipe(t)
	l, _ := b.Listen(7)
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStackClosed) {
			t.Errorf("Accept after Stack.Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stack.Close did not unblock Accept")
	}
	_ = a
}

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"10.0.0.1:7", true}, {"10.0.0.1:0", false}, {"[::1]:7", false}, {"nonsense", false}, {"10.0.0.1:65535", true},
	} {
		_, err := ParseAddr(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseAddr(%q) = %v", tc.in, err)
		}
	}
}

func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"10.0.0.1:7", "[::1]:7", "1.2.3.4:65536", ":", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddr(s)
		if err == nil && (!a.IP.Is4() || a.Port == 0) {
			t.Fatalf("ParseAddr(%q) = %v without error", s, a)
		}
	})
}

// TestDeadlineUnmeetable: under PolicyDeadline a connection whose D3 hints
// ask for more than the link (1 GiB in 1 ms at 10 Gb/s) is quenched by the
// receiver's pull scheduler; the client gets ErrDeadlineUnmeetable at once.
func TestDeadlineUnmeetable(t *testing.T) {
	a, b, err := OpenPipe(Config{Policy: PolicyDeadline}, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	l, _ := b.Listen(7)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c)
		}
	}()
	start := time.Now()
	c, err := a.Dial(context.Background(), addrB.String()+":7", WithSize(1<<30), WithDeadline(time.Now().Add(time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(make([]byte, 1024))
	_, err = c.Read(make([]byte, 16))
	if !errors.Is(err, ErrDeadlineUnmeetable) {
		t.Fatalf("got %v, want ErrDeadlineUnmeetable", err)
	}
	t.Logf("quenched after %v", time.Since(start))
	// A feasible request on the same stacks still works.
	c2, err := a.Dial(context.Background(), addrB.String()+":7", WithSize(1024), WithDeadline(time.Now().Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
}

// PullBatch reaches the engine (zero: the engine's default), and one outside
// the engine's range fails Open.
func TestPullBatchConfig(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, tc := range []struct{ set, want int }{{0, 8}, {1, 1}, {4, 4}} {
		sa, sb, err := OpenPipe(Config{PullBatch: tc.set}, a, b)
		if err != nil {
			t.Fatal(err)
		}
		if got := sa.b.(*embedded).s.Config().PullBatch; got != tc.want {
			t.Errorf("PullBatch %d: engine has %d, want %d", tc.set, got, tc.want)
		}
		sa.Close()
		sb.Close()
	}
	if _, _, err := OpenPipe(Config{PullBatch: 17}, a, b); err == nil {
		t.Error("PullBatch 17 (above PullBurst 16): no error")
	}
}

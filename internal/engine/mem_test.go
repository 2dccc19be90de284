package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

var (
	ipA  = [4]byte{10, 9, 0, 1}
	ipB  = [4]byte{10, 9, 0, 2}
	macA = [6]byte{2, 0, 0, 0, 0, 1}
	macB = [6]byte{2, 0, 0, 0, 0, 2}
)

// memPair builds two stacks joined by an in-memory cable.
func memPair(t testing.TB, mode PollMode, tweak func(*Config)) (*Stack, *Stack, *MemLink, *MemLink) {
	t.Helper()
	la, lb := NewMemPipe(MemConfig{}, macA, macB)
	mk := func(l *MemLink, ip [4]byte, seed uint64) *Stack {
		cfg := Config{
			Link:     l,
			Endpoint: ndp.Config{LocalIP: ip, Seed: seed, MaxConns: 4096},
			Resolver: StaticResolver{ipA: macA, ipB: macB},
			Mode:     mode,
		}
		if tweak != nil {
			tweak(&cfg)
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return mk(la, ipA, 1), mk(lb, ipB, 2), la, lb
}

func readAll(c *Conn) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf, nil)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// echoServer answers each connection with what it read, until EOF.
func echoServer(t testing.TB, l *Listener) {
	go func() {
		for {
			c, err := l.Accept(nil)
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				data, err := readAll(c)
				if err != nil {
					return
				}
				c.Write(data, true, nil)
			}()
		}
	}()
}

// openConn listens on b's port 9, dials it from a (ipB is b's address),
// writes n bytes and accepts: a connection both ends have set up, as its
// client and server Conns.
func openConn(t *testing.T, a, b *Stack, n int) (c, sc *Conn) {
	t.Helper()
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err = a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, n), false, nil); err != nil {
		t.Fatal(err)
	}
	if sc, err = l.Accept(nil); err != nil {
		t.Fatal(err)
	}
	return c, sc
}

func call(s *Stack, ip [4]byte, port uint16, req []byte) ([]byte, error) {
	c, err := s.Dial(context.Background(), ip, port, ndp.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write(req, true, nil); err != nil {
		return nil, err
	}
	return readAll(c)
}

func TestMemEcho(t *testing.T) {
	for _, mode := range []PollMode{PollAdaptive, PollBusy} {
		t.Run(mode.String(), func(t *testing.T) {
			a, b, _, _ := memPair(t, mode, nil)
			l, err := b.Listen(7, 0)
			if err != nil {
				t.Fatal(err)
			}
			echoServer(t, l)
			for i := 0; i < 200; i++ {
				req := []byte(fmt.Sprintf("request %d %s", i, bytes.Repeat([]byte{'x'}, i*37)))
				resp, err := call(a, ipB, 7, req)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if !bytes.Equal(resp, req) {
					t.Fatalf("call %d: got %d bytes, want %d", i, len(resp), len(req))
				}
			}
		})
	}
}

func TestMemBulkWithLoss(t *testing.T) {
	a, b, la, _ := memPair(t, PollAdaptive, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	la.Drop = func([]byte) bool { mu.Lock(); defer mu.Unlock(); return rng.IntN(100) == 0 } // 1% loss A->B
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	want := sha256.Sum256(data)
	got := make(chan [32]byte, 1)
	go func() {
		c, err := l.Accept(nil)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		d, err := readAll(c)
		if err != nil {
			t.Error(err)
		}
		c.Close()
		got <- sha256.Sum256(d)
	}()
	c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(data, true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(c); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if h := <-got; h != want {
		t.Fatal("sha256 mismatch")
	}
	if st := a.Stats(); st.Endpoint.Retransmits == 0 {
		t.Errorf("1%% loss but no retransmits: %+v", st.Endpoint)
	}
}

func TestMemRefused(t *testing.T) {
	a, _, _, _ := memPair(t, PollAdaptive, nil)
	c, err := a.Dial(context.Background(), ipB, 4444, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write([]byte("hello"), false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 10), nil)
	if !errors.Is(err, ndp.ErrConnRefused) {
		t.Fatalf("read: %v, want ErrConnRefused", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v", d)
	}
}

func TestMemCloseUnblocks(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, nil)
	l, _ := b.Listen(7, 0)
	c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("x"), false, nil)
	sc, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	errc := make(chan error, 2)
	go func() { _, err := c.Read(make([]byte, 10), nil); errc <- err }()
	go func() {
		// Fill the peer's receive window and the send buffer so Write blocks.
		_, err := c.Write(make([]byte, 4<<20), false, nil)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // let both block (not a timing assertion)
	c.Close()
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked call returned %v, want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock")
		}
	}
	// Accept unblocks on listener close.
	go func() { _, err := l.Accept(nil); errc <- err }()
	l.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
}

func TestMemCancel(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, nil)
	l, _ := b.Listen(7, 0)
	_ = l
	c, _ := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	cancel := make(chan struct{})
	close(cancel)
	if _, err := c.Read(make([]byte, 1), cancel); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestMemManyConcurrent(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, nil)
	l, _ := b.Listen(7, 0)
	echoServer(t, l)
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := []byte(fmt.Sprintf("conn %d", i))
			resp, err := call(a, ipB, 7, req)
			if err == nil && !bytes.Equal(resp, req) {
				err = fmt.Errorf("conn %d: bad echo %q", i, resp)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// DialWrite queues what fits of its message with the dial, and the FIN only
// when all of it fit: an empty message is a FIN alone, one larger than the
// send buffer leaves the rest (and the FIN) to Write. The echo server reads
// each message to its end and answers it whole.
func TestMemDialWrite(t *testing.T) {
	const sendBuf = 64 << 10
	a, b, _, _ := memPair(t, PollBusy, func(c *Config) { c.Endpoint.SendBuffer = sendBuf })
	l, err := b.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l)
	for _, size := range []int{0, 1, 1000, sendBuf + 12345} {
		req := bytes.Repeat([]byte{byte(size)}, size)
		c, n, err := a.DialWrite(context.Background(), ipB, 7, ndp.DialOptions{}, req, true)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if want := min(size, sendBuf); n != want {
			t.Fatalf("%d bytes: DialWrite took %d, want %d", size, n, want)
		}
		if n < size {
			if _, err := c.Write(req[n:], true, nil); err != nil {
				t.Fatalf("%d bytes: the rest: %v", size, err)
			}
		}
		resp, err := readAll(c)
		c.Close()
		if err != nil || !bytes.Equal(resp, req) {
			t.Fatalf("%d bytes: echo of %d bytes (%v)", size, len(resp), err)
		}
	}
	// Without closeWrite the connection stays open for more.
	c, n, err := a.DialWrite(context.Background(), ipB, 7, ndp.DialOptions{}, []byte("ab"), false)
	if err != nil || n != 2 {
		t.Fatalf("DialWrite without FIN: %d, %v", n, err)
	}
	if _, err := c.Write([]byte("cd"), true, nil); err != nil {
		t.Fatal(err)
	}
	if resp, err := readAll(c); err != nil || string(resp) != "abcd" {
		t.Fatalf("echo %q, %v", resp, err)
	}
	c.Close()
}

// CloseAndReuseSoon leaves the release to the stack's next poll that
// receives nothing: the application's count drops at once, the endpoint's
// connection stays until that poll, then the Conn is reused by the next
// Dial. A second call releases the first at once; a Conn whose stream had
// not ended is reset when released, as Close does with unread data.
func TestMemCloseAndReuseSoon(t *testing.T) {
	// a polls only in its calls and Poll: no background poller releases
	// the Conn behind the test's back.
	a, b, _, _ := memPair(t, PollBusy, func(c *Config) { c.NoBackground = c.Endpoint.LocalIP == ipA })
	l, err := b.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l)
	active := func() int { return a.Stats().Endpoint.ConnsActive }
	c, err := call1(a)
	if err != nil {
		t.Fatal(err)
	}
	c.CloseAndReuseSoon()
	if n := a.appConns.Load(); n != 0 {
		t.Fatalf("the application still holds %d Conns", n)
	}
	if a.lateClose.Load() != c {
		t.Fatal("released on the caller's path")
	}
	for i := 0; i < 100 && a.lateClose.Load() != nil; i++ {
		a.Poll()
	}
	if a.lateClose.Load() != nil || active() != 0 {
		t.Fatalf("not released by the idle poll: %d connections", active())
	}
	c2, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c2 != c {
		t.Fatal("the released Conn was not reused")
	}
	c2.Close()

	// Two in a row: the second call releases the first at once (and its
	// poll may release the second).
	c, _ = call1(a)
	d, _ := call1(a)
	c.CloseAndReuseSoon()
	d.CloseAndReuseSoon()
	if c.s != nil { // released: reset for reuse
		t.Fatal("the first was not released by the second call")
	}
	for i := 0; i < 100 && a.lateClose.Load() != nil; i++ {
		a.Poll()
	}
	if d.s != nil || active() != 0 {
		t.Fatalf("the second not released: %d connections", active())
	}

	// A stream not read to its end is reset.
	sc := make(chan *Conn, 1)
	l2, err := b.Listen(8, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		s, err := l2.Accept(nil)
		if err == nil {
			s.Write([]byte("unread"), false, nil)
		}
		sc <- s
	}()
	e, err := a.Dial(context.Background(), ipB, 8, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Write([]byte("x"), false, nil)
	srv := <-sc
	if srv == nil {
		t.Fatal("not accepted")
	}
	buf := make([]byte, 1)
	if _, err := e.Read(buf, nil); err != nil { // part of the peer's stream only
		t.Fatal(err)
	}
	e.CloseAndReuseSoon()
	for i := 0; i < 100 && a.lateClose.Load() != nil; i++ {
		a.Poll()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := srv.Read(buf, nil); errors.Is(err, ndp.ErrConnReset) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("peer of a released unfinished stream: %v", err)
		}
	}
	srv.Close()
}

// call1 runs one request and reads the echo to its end; the Conn is the
// caller's to close.
func call1(s *Stack) (*Conn, error) {
	c, _, err := s.DialWrite(context.Background(), ipB, 7, ndp.DialOptions{}, []byte("ping"), true)
	if err != nil {
		return nil, err
	}
	if resp, err := readAll(c); err != nil || string(resp) != "ping" {
		return nil, fmt.Errorf("echo %q, %v", resp, err)
	}
	return c, nil
}

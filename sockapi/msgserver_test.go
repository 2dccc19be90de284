package sockapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndpstack/ndpstack/internal/engine"
)

// openHub returns embedded stacks with addresses addrs joined by an
// in-memory switch (engine.NewMemHub): a server and several peers.
func openHub(t testing.TB, cfg Config, addrs ...netip.Addr) []*Stack {
	t.Helper()
	macs := make([][6]byte, len(addrs))
	res := engine.StaticResolver{}
	for i, a := range addrs {
		macs[i] = [6]byte{0x02, 0x6e, 0x64, 0x70, 1, byte(i + 1)}
		res[a.As4()] = macs[i]
	}
	links := engine.NewMemHub(engine.MemConfig{}, macs...)
	stacks := make([]*Stack, len(addrs))
	for i, a := range addrs {
		s, err := openMem(cfg, links[i], a, res)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stacks[i] = s
	}
	return stacks
}

// echoServer answers every message on l with its bytes until RecvMessage
// fails; the error goes to the returned channel.
func echoServer(l *Listener, maxSize int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			m, err := l.RecvMessage(maxSize)
			if err != nil {
				done <- err
				return
			}
			m.Reply(m.Data)
		}
	}()
	return done
}

// checkServing fails unless the server loop is still running.
func checkServing(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("RecvMessage ended the server loop: %v", err)
	default:
	}
}

func callN(t *testing.T, s *Stack, addr string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				req := []byte(fmt.Sprintf("call %d", i))
				resp, err := s.Call(ctx, addr, req)
				if err == nil && !bytes.Equal(resp, req) {
					err = fmt.Errorf("call %d: response %q", i, resp)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d calls failed", failed, n)
	}
}

// A sender that writes part of a message and stalls holds up nobody: 100
// Calls beside it are all answered while it stays open.
func TestRecvMessageStalledSender(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := echoServer(l, 0)
	stalled, err := a.Dial(context.Background(), addrB.String()+":7")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	callN(t, a, addrB.String()+":7", 100)
	checkServing(t, done)
	st, _ := b.Stats()
	if st.Messages.Received != 100 || st.Messages.Pending != 1 {
		t.Errorf("messages %+v, want 100 received and the stalled one pending", st.Messages)
	}
}

// An oversized message and a timed-out one are reset and counted; the
// oversized one's client gets ErrMessageTooLarge, the stalled one's a
// reset; the server loop goes on answering.
func TestRecvMessageOversizedAndTimedOut(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetMessageConfig(MessageConfig{ReadTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	done := echoServer(l, 1<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := addrB.String() + ":7"

	if _, err := a.Call(ctx, addr, make([]byte, 2<<10)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversized call: %v, want ErrMessageTooLarge", err)
	}
	callN(t, a, addr, 10)
	if err := l.SetMessageConfig(MessageConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("SetMessageConfig after RecvMessage: %v, want ErrInvalidConfig", err)
	}

	stalled, err := a.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	var buf [16]byte
	if _, err := stalled.Read(buf[:]); !errors.Is(err, ErrConnReset) {
		t.Fatalf("stalled sender's read: %v, want ErrConnReset (reset at ReadTimeout)", err)
	}
	callN(t, a, addr, 10)
	checkServing(t, done)
	st, _ := b.Stats()
	if m := st.Messages; m.TooLarge != 1 || m.TimedOut != 1 || m.Received != 20 || m.Pending != 0 {
		t.Errorf("messages %+v, want 1 too large, 1 timed out, 20 received, none pending", m)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.Collector())
	want := `
# HELP ndp_messages_reset_total Messages a message server reset, by reason (MessageConfig bounds, or the connection failed).
# TYPE ndp_messages_reset_total counter
ndp_messages_reset_total{reason="failed"} 0
ndp_messages_reset_total{reason="refused_peer"} 0
ndp_messages_reset_total{reason="timed_out"} 1
ndp_messages_reset_total{reason="too_large"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ndp_messages_reset_total"); err != nil {
		t.Error(err)
	}

	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("after Close RecvMessage returned %v, want net.ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("RecvMessage still blocked after Close")
	}
}

// 1,000 stalled message connections from one peer: at most
// MaxPendingPerPeer of them hold buffers (the rest are reset on arrival),
// those are reset at ReadTimeout, another peer's Calls are answered
// meanwhile, and the server's heap stays bounded.
func TestRecvMessageStalledFlood(t *testing.T) {
	srvIP, floodIP, goodIP := netip.MustParseAddr("10.98.0.1"), netip.MustParseAddr("10.98.0.2"), netip.MustParseAddr("10.98.0.3")
	st := openHub(t, Config{}, srvIP, floodIP, goodIP)
	srv, flood, good := st[0], st[1], st[2]
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const perPeer, timeout = 32, time.Second
	if err := l.SetMessageConfig(MessageConfig{ReadTimeout: timeout, MaxPendingPerPeer: perPeer}); err != nil {
		t.Fatal(err)
	}
	done := echoServer(l, 0)
	addr := srvIP.String() + ":7"
	goroutines := runtime.NumGoroutine()
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 1000
	conns := make([]*Conn, n)
	for i := range conns {
		c, err := flood.Dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(make([]byte, 100)); err != nil {
			t.Fatalf("stalled conn %d: %v", i, err)
		}
		conns[i] = c
	}
	callN(t, good, addr, 100)
	checkServing(t, done)
	runtime.GC()
	runtime.ReadMemStats(&during)
	t.Logf("heap in use with %d stalled conns (both ends, one process): +%d KiB", n, (int64(during.HeapInuse)-int64(before.HeapInuse))>>10)
	if g := runtime.NumGoroutine() - goroutines; g > perPeer+8 {
		t.Errorf("%d more goroutines during the flood, want at most %d (one per pending message)", g, perPeer+8)
	}
	ms := srv.msg.snapshot()
	if ms.Pending > perPeer {
		t.Errorf("%d messages pending, want at most %d", ms.Pending, perPeer)
	}

	// Every stalled connection is reset: on arrival beyond the bound, or
	// at ReadTimeout.
	var reset, refused int
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var buf [16]byte
		_, err := c.Read(buf[:])
		switch {
		case errors.Is(err, ErrConnReset):
			reset++
		case errors.Is(err, ErrConnRefused): // the listener's backlog overflowed
			refused++
		default:
			t.Fatalf("stalled conn %d: read %v, want a reset", i, err)
		}
	}
	ms = srv.msg.snapshot()
	t.Logf("%d stalled conns: %d reset, %d refused by the backlog; server messages %+v", n, reset, refused, ms)
	// Connections that arrive after the first ones timed out take their
	// slots: more than perPeer may time out in all, never more than
	// perPeer at once (checked above).
	if ms.RefusedPeer+ms.TimedOut != uint64(reset) || ms.RefusedPeer == 0 || ms.Pending != 0 {
		t.Errorf("messages %+v: want %d resets = refused per peer + timed out", ms, reset)
	}
	callN(t, flood, addr, 10) // the flooding peer is served again once its stalled messages are gone
	checkServing(t, done)
}

// The listener's deadline bounds RecvMessage; a later one reopens it.
func TestRecvMessageDeadline(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := l.RecvMessage(0); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("RecvMessage past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	l.SetDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go a.SendMessage(ctx, addrB.String()+":7", []byte("late"))
	m, err := l.RecvMessage(0)
	if err != nil || string(m.Data) != "late" {
		t.Fatalf("RecvMessage after clearing the deadline: %v", err)
	}
	m.Close()
}

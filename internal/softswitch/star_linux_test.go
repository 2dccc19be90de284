package softswitch_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
	"golang.org/x/sys/unix"
)

// TestStarIncast runs a small NDP incast through the switch at an emulated 1 Gb/s:
// three servers answer one client at once, so the first-RTT windows overflow the
// client's 8-packet port and the switch trims; every byte is verified. Then
// malformed frames are thrown at the switch and a host's link is removed, and the
// remaining hosts still exchange verified responses.
func TestStarIncast(t *testing.T) { testStarIncast(t, softswitch.TrimNDP, 0) }

// TestStarIncastCommodity is the incast through the commodity personality: the
// switch cuts frames to 128 bytes and rewrites their DSCP, the stacks (with
// CommodityTrim) take them as trimmed headers, and every byte arrives. The
// switch's loop sleeps a 50 µs tick between busy passes (Config.Tick, as
// ndpperf incast runs it), and the test checks it did.
func TestStarIncastCommodity(t *testing.T) {
	testStarIncast(t, softswitch.TrimCommodity, 50*time.Microsecond)
}

func testStarIncast(t *testing.T, personality softswitch.Personality, tick time.Duration) {
	tb := testbed.NewT(t)
	star, err := softswitch.NewStar(tb, softswitch.StarConfig{Hosts: 4, Switch: softswitch.Config{Rate: 1e9, Personality: personality, Tick: tick}})
	if err != nil {
		t.Fatal(err)
	}
	var ct sockapi.CommodityTrim
	if personality == softswitch.TrimCommodity {
		d := softswitch.DefaultCommodity()
		ct = sockapi.CommodityTrim{DataDSCP: d.DataDSCP, ControlDSCP: d.ControlDSCP, TrimDSCPs: []uint8{d.TrimDSCP}}
	}
	stacks := make([]*sockapi.Stack, len(star.Hosts))
	for i, h := range star.Hosts {
		if err := h.NS.Do(func() (err error) {
			stacks[i], err = sockapi.Open(sockapi.Config{Interface: h.Link.Name, LinkRate: 1e9, CommodityTrim: ct})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stacks[i].Close() })
	}
	const size = 200 << 10
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11)
	}
	for _, s := range stacks[1:] {
		l, err := s.Listen(7)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				m, err := l.RecvMessage(64)
				if err != nil {
					if errors.Is(err, net.ErrClosed) || errors.Is(err, sockapi.ErrStackClosed) {
						return
					}
					continue
				}
				m.Reply(payload)
			}
		}()
	}
	round := func(servers []int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(servers))
		for j, srv := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				resp := make([]byte, size)
				addr := sockapi.Addr{IP: star.Hosts[srv].Link.Addr.Addr(), Port: 7}
				n, err := stacks[0].CallInto(ctx, addr, []byte("GET"), resp)
				if err == nil && (n != size || !bytes.Equal(resp, payload)) {
					err = fmt.Errorf("server %d: %d bytes, want %d verified", srv, n, size)
				}
				errs[j] = err
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < 3; r++ {
		round([]int{1, 2, 3})
	}
	st := star.Switch.Stats()
	if st.Trimmed == 0 {
		t.Fatalf("three-to-one incast at 1 Gb/s trimmed nothing: %+v", st)
	}
	t.Logf("switch: rx %d trimmed %d bounced %d ndp dropped %d flooded %d, %d busy passes, %d ticks, %d kicks",
		st.RxFrames, st.Trimmed, st.Bounced, st.NDPDropped, st.Flooded, st.BusyPasses, st.Ticks, st.TxKicks)
	if tick > 0 && st.Ticks == 0 {
		t.Fatalf("a switch with a %v tick never slept one during the incast: %+v", tick, st)
	}
	cs, err := stacks[0].Stats()
	if err != nil {
		t.Fatal(err)
	}
	if cs.Endpoint.TrimmedIn == 0 {
		t.Fatalf("the client took no trimmed header: %+v", cs)
	}
	if personality == softswitch.TrimCommodity {
		return
	}

	// Malformed frames from host 1: a runt, garbage claiming to be NDP toward the
	// client, and a frame with a bogus IP header.
	h1 := star.Hosts[1]
	client := star.Hosts[0].Link.MAC
	ndpLike := make([]byte, 120)
	copy(ndpLike, client)
	copy(ndpLike[6:], h1.Link.MAC)
	binary.BigEndian.PutUint16(ndpLike[12:], 0x0800)
	ndpLike[14], ndpLike[23] = 0x45, 17
	binary.BigEndian.PutUint16(ndpLike[36:], 6420)
	for i := 42; i < len(ndpLike); i++ {
		ndpLike[i] = byte(i * 13)
	}
	badIP := append([]byte(nil), ndpLike...)
	badIP[14] = 0x4f
	before := star.Switch.Stats()
	sendRaw(t, h1.NS, h1.Link.Index, [][]byte{make([]byte, 8), ndpLike, ndpLike[:50], badIP})
	round([]int{1, 2, 3})
	if d := star.Switch.Stats().Sub(before); d.RxFrames == 0 {
		t.Fatal("switch counted no frames after the malformed ones")
	}

	// Remove host 3's link: the switch keeps serving the others.
	stacks[3].Close()
	if _, err := star.Hosts[3].NS.Run("link", "del", star.Hosts[3].Link.Name); err != nil {
		t.Fatal(err)
	}
	round([]int{1, 2})
	// A frame toward the removed host makes the switch notice the port is gone.
	toGone := append([]byte(nil), ndpLike[:60]...)
	copy(toGone, star.Hosts[3].Link.MAC)
	deadline := time.Now().Add(5 * time.Second)
	for !star.Switch.Stats().Ports[3].Down && time.Now().Before(deadline) {
		sendRaw(t, h1.NS, h1.Link.Index, [][]byte{toGone})
		time.Sleep(10 * time.Millisecond)
	}
	if !star.Switch.Stats().Ports[3].Down {
		t.Fatal("switch did not take the removed port out of service")
	}
	round([]int{1, 2})
}

// sendRaw sends frames as they are on interface ifindex in ns (AF_PACKET).
func sendRaw(t *testing.T, ns *testbed.Namespace, ifindex int, frames [][]byte) {
	t.Helper()
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
		for _, f := range frames {
			if err := unix.Sendto(fd, f, 0, sa); err != nil && len(f) >= 14 {
				return fmt.Errorf("send %d-byte frame: %w", len(f), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStarRealtime checks that Run's thread runs under SCHED_FIFO while the
// switch runs (Config.Priority's default) and that the thread is back under the
// normal policy once Close returns.
func TestStarRealtime(t *testing.T) {
	tb := testbed.NewT(t)
	star, err := softswitch.NewStar(tb, softswitch.StarConfig{Hosts: 2, Switch: softswitch.Config{Rate: 1e9}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	n := fifoThreads(t)
	for n != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = fifoThreads(t)
	}
	if n != 1 {
		t.Fatalf("%d threads under SCHED_FIFO while the switch runs, want 1", n)
	}
	if err := star.Switch.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fifoThreads(t); n != 0 {
		t.Fatalf("%d threads under SCHED_FIFO after Close, want 0", n)
	}
}

// fifoThreads counts the process's threads whose policy is SCHED_FIFO
// (/proc/self/task/*/stat, field 41).
func fifoThreads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 38 && f[38] == strconv.Itoa(unix.SCHED_FIFO) {
			n++
		}
	}
	return n
}

// TestStarMTULimit: the switch's ports run native XDP, which veth refuses
// above MTU 3506 without multi-buffer; the switch says so (ErrConfig)
// instead of failing the attach, and runs at 3506.
func TestStarMTULimit(t *testing.T) {
	tb := testbed.NewT(t)
	if _, err := softswitch.NewStar(tb, softswitch.StarConfig{Hosts: 2, MTU: 3507, Switch: softswitch.Config{Rate: 1e9}}); !errors.Is(err, softswitch.ErrConfig) {
		t.Fatalf("MTU 3507: %v, want ErrConfig", err)
	}
	star, err := softswitch.NewStar(tb, softswitch.StarConfig{Hosts: 2, MTU: 3506, Switch: softswitch.Config{Rate: 1e9}})
	if err != nil {
		t.Fatalf("MTU 3506: %v", err)
	}
	if err := star.Switch.Close(); err != nil {
		t.Fatal(err)
	}
}

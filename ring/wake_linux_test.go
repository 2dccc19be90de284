package ring

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/eventfd"
	"golang.org/x/sys/unix"
)

func TestNotifyOnlyWhenPeerSleeps(t *testing.T) {
	de, ae, _, _ := pairInProcess(t, RegionConfig{Sockets: 1})
	// Nobody sleeps: no syscall.
	if woke, err := de.Notifier.Notify(); woke || err != nil {
		t.Fatalf("Notify with the app awake: %v, %v", woke, err)
	}
	// Pending work: Wait returns without sleeping and lowers the flag.
	var d [1]Desc
	de.Sockets[0].RX.Produce(d[:])
	if err := ae.Waiter.Wait(ae.Sockets[0].RX.Pending, -1); err != nil {
		t.Fatal(err)
	}
	if atomic.LoadUint32(ae.Waiter.flag) != 0 {
		t.Fatal("sleep flag left raised")
	}
	if woke, _ := de.Notifier.Notify(); woke {
		t.Fatal("Notify made a syscall for an awake app")
	}
	if de.Notifier.Wakeups.Load() != 0 {
		t.Fatal("wakeups counted")
	}
}

func TestWaitTimeoutAndInterrupt(t *testing.T) {
	de, _, dr, _ := pairInProcess(t, RegionConfig{Sockets: 1})
	never := func() bool { return false }
	// A zero timeout polls once and returns.
	if err := de.Waiter.Wait(never, 0); err != nil {
		t.Fatal(err)
	}
	// Interrupt from another goroutine ends an unbounded wait.
	done := make(chan error)
	go func() { done <- de.Waiter.Wait(never, -1) }()
	de.Waiter.Interrupt()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Shutdown makes every wait return net.ErrClosed.
	go func() { done <- de.Waiter.Wait(never, -1) }()
	dr.Shutdown()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Shutdown: %v", err)
	}
	if err := de.Waiter.Wait(never, -1); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second wait after Shutdown: %v", err)
	}
}

// TestNoLostWakeup drives ping-pong with both sides always going to sleep
// when their ring is empty, with no timeout: a single lost wakeup deadlocks
// and the watchdog fails the test.
func TestNoLostWakeup(t *testing.T) {
	de, ae, dr, ar := pairInProcess(t, RegionConfig{Sockets: 1, SocketSlots: 4})
	const rounds = 20000
	fail := make(chan string, 2)
	watchdog := time.AfterFunc(90*time.Second, func() {
		fail <- "deadlock: a wakeup was lost"
		dr.Shutdown()
		ar.Shutdown()
	})
	defer watchdog.Stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // app: echo RX back on TX
		defer wg.Done()
		var d [1]Desc
		rx, tx := ae.Sockets[0].RX, ae.Sockets[0].TX
		for i := 0; i < rounds; i++ {
			for {
				n, err := rx.Consume(d[:])
				if err != nil {
					fail <- err.Error()
					return
				}
				if n == 1 {
					break
				}
				if err := ae.Waiter.Wait(rx.Pending, -1); err != nil {
					fail <- err.Error()
					return
				}
			}
			if n, _ := tx.Produce(d[:]); n != 1 {
				fail <- "tx full"
				return
			}
			ae.Notifier.Notify()
		}
	}()
	var d [1]Desc
	rx, tx := de.Sockets[0].TX, de.Sockets[0].RX
	for i := 0; i < rounds; i++ {
		d[0].Aux = uint64(i)
		if n, _ := tx.Produce(d[:]); n != 1 {
			t.Fatal("rx full")
		}
		de.Notifier.Notify()
		for {
			n, err := rx.Consume(d[:])
			if err != nil {
				t.Fatal(err, <-fail)
			}
			if n == 1 {
				break
			}
			if err := de.Waiter.Wait(rx.Pending, -1); err != nil {
				t.Fatal(err, <-fail)
			}
		}
		if d[0].Aux != uint64(i) {
			t.Fatalf("round %d echoed %d", i, d[0].Aux)
		}
	}
	wg.Wait()
	select {
	case m := <-fail:
		t.Fatal(m)
	default:
	}
	t.Logf("%d round trips; daemon woke app %d times, app woke daemon %d times",
		rounds, de.Notifier.Wakeups.Load(), ae.Notifier.Wakeups.Load())
}

func TestAttachmentRoundTrip(t *testing.T) {
	a, b := unixPair(t)
	buf, err := NewBufferArea(16, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	r, err := CreateRegion(RegionConfig{Sockets: 1}, 9, BufferGeometry{FrameSize: 2048, Frames: 16, Part: Partition{8, 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := SendAttachment(a, r.Attachment(buf.FD())); err != nil {
		t.Fatal(err)
	}
	att, err := RecvAttachment(b)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := OpenRegion(att)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	mb, err := MapBufferArea(att.Buffer, 16, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	// Same memory on both sides.
	copy(buf.Frame(3), "hello")
	if string(mb.Frame(3)[:5]) != "hello" {
		t.Fatal("buffer area not shared")
	}
	if l := ar.Layout(); l.App != 9 || l.Part != (Partition{8, 8}) || l.FrameSize != 2048 || l.BufferFrames != 16 {
		t.Fatalf("layout %+v", l)
	}
	if mb.Frame(16) != nil || mb.Data(&Desc{Frame: 1, Off: 2040, Len: 9}) != nil {
		t.Fatal("out-of-range frame access not refused")
	}
}

func TestRecvAttachmentRejects(t *testing.T) {
	a, b := unixPair(t)
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	null := int(f.Fd())
	before := countFDs(t)
	for _, tc := range []struct {
		name string
		msg  []byte
		fds  []int
	}{
		{"wrong magic", []byte("0123456789abcdef"), []int{null, null, null, null}},
		{"too few fds", attachMsg(Version, 2), []int{null, null}},
		{"wrong version", attachMsg(Version+1, 4), []int{null, null, null, null}},
		{"short", []byte("x"), []int{null}},
	} {
		if err := SendFDs(a, tc.msg, tc.fds); err != nil {
			t.Fatal(err)
		}
		_, err := RecvAttachment(b)
		if !errors.Is(err, ErrBadAttachment) && !errors.Is(err, ErrVersion) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := countFDs(t); got != before {
			t.Errorf("%s: %d descriptors open, %d before: leaked", tc.name, got, before)
		}
	}
	// An unsealed memfd is refused as a region or buffer area.
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	unix.Ftruncate(fd, 1<<20)
	if err := CheckSealed(fd); !errors.Is(err, ErrBadAttachment) {
		t.Errorf("CheckSealed(unsealed) = %v", err)
	}
	if _, err := MapBufferArea(fd, 16, 2048); !errors.Is(err, ErrBadAttachment) {
		t.Errorf("MapBufferArea(unsealed) = %v", err)
	}
}

func attachMsg(version, n uint32) []byte {
	b := make([]byte, attachLen)
	le := [4]uint32{attachMagic, version, n, 0}
	for i, v := range le {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return b
}

func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conv := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conv(fds[0]), conv(fds[1])
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestWaitSetManyRegions puts three regions' daemon Waiters and an extra
// descriptor in one WaitSet: a notify from any application, or the extra
// descriptor becoming readable, wakes it; pending work skips the sleep.
func TestWaitSetManyRegions(t *testing.T) {
	var des []*DaemonEnd
	var aes []*AppEnd
	var set WaitSet
	for i := 0; i < 3; i++ {
		de, ae, _, _ := pairInProcess(t, RegionConfig{Sockets: 1, SocketSlots: 4})
		des, aes = append(des, de), append(aes, ae)
		set.Add(de.Waiter)
	}
	extra, err := newEventfd()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(extra)
	set.AddFD(extra)
	pending := func() bool {
		for _, de := range des {
			if de.Cmd.Pending() {
				return true
			}
		}
		return false
	}
	var d [1]Desc
	// Work already there: no sleep, flags lowered again.
	aes[1].Cmd.Produce(d[:])
	if err := set.Wait(pending, -1); err != nil {
		t.Fatal(err)
	}
	for i, de := range des {
		if atomic.LoadUint32(de.Waiter.flag) != 0 {
			t.Fatalf("region %d flag left raised", i)
		}
	}
	des[1].Cmd.Consume(d[:])
	// Each application in turn wakes the sleeping set.
	for i := range aes {
		done := make(chan error)
		go func() { done <- set.Wait(pending, -1) }()
		// Wait until the set is asleep (its flags are up), then notify.
		for atomic.LoadUint32(des[i].Waiter.flag) == 0 {
			time.Sleep(time.Millisecond)
		}
		aes[i].Cmd.Produce(d[:])
		if woke, err := aes[i].Notifier.Notify(); err != nil {
			t.Fatal(err)
		} else if !woke {
			// The set saw the work in S2 before sleeping: also correct.
			t.Logf("region %d: work seen before sleeping", i)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n, _ := des[i].Cmd.Consume(d[:]); n != 1 {
			t.Fatalf("region %d: woke without its descriptor", i)
		}
	}
	// The extra descriptor wakes it too.
	done := make(chan error)
	go func() { done <- set.Wait(pending, -1) }()
	eventfd.Signal(extra)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Remove, then a member's Shutdown makes Wait fail fast.
	set.Remove(des[0].Waiter)
	if set.Len() != 2 {
		t.Fatalf("Len %d after Remove", set.Len())
	}
	des[2].Waiter.closed.Store(true)
	if err := set.Wait(pending, -1); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Wait with a shut-down member: %v", err)
	}
}

package ring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Cross-process tests: the test binary re-executes itself as the
// application (os.Args[0] -test.run=^TestRingChild$ with NDP_RING_CHILD set
// to the role), hands it the region over a Unix control socket with
// SCM_RIGHTS, and plays the daemon. None of this needs root.

const (
	childEnv      = "NDP_RING_CHILD"
	childCountEnv = "NDP_RING_COUNT"
	payloadLen    = 64
)

// crossGeo is the pool geometry every cross-process test uses: 256 daemon
// frames, then four partitions of 128.
var crossPool = PoolConfig{Frames: 768, FrameSize: 2048, DaemonFrames: 256, AppFrames: 128}

type daemonSide struct {
	pool   *Pool
	buf    *BufferArea
	region *Region
	end    *DaemonEnd
	app    AppID
	part   Partition
	conn   *net.UnixConn
	cmd    *exec.Cmd
	out    *bytes.Buffer
	// initial is the pool's accounting before the application attached.
	initial PoolStats
}

// spawnApp starts the child in role mode and attaches it: pool partition,
// region, SCM_RIGHTS handoff.
func spawnApp(t *testing.T, mode string, env ...string) *daemonSide {
	t.Helper()
	pool, err := NewPool(crossPool)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := NewBufferArea(crossPool.Frames, crossPool.FrameSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	d := &daemonSide{pool: pool, buf: buf, initial: pool.Stats()}
	d.app, d.part, err = pool.AttachApp()
	if err != nil {
		t.Fatal(err)
	}
	d.region, err = CreateRegion(RegionConfig{Sockets: 2, SocketSlots: 256}, d.app,
		BufferGeometry{FrameSize: crossPool.FrameSize, Frames: crossPool.Frames, Part: d.part})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.region.Close() })
	if d.end, err = d.region.DaemonEnd(); err != nil {
		t.Fatal(err)
	}
	d.conn, d.cmd, d.out = startChild(t, mode, env...)
	if err := SendAttachment(d.conn, d.region.Attachment(buf.FD())); err != nil {
		t.Fatal(err)
	}
	return d
}

// startChild re-executes the test binary in role mode with one end of a
// SOCK_SEQPACKET socketpair as fd 3.
func startChild(t *testing.T, mode string, env ...string) (*net.UnixConn, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	pf := os.NewFile(uintptr(fds[0]), "ctl-daemon")
	cf := os.NewFile(uintptr(fds[1]), "ctl-app")
	c, err := net.FileConn(pf)
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	t.Cleanup(func() { conn.Close() })
	cmd := exec.Command(os.Args[0], "-test.run=^TestRingChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.ExtraFiles = []*os.File{cf}
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cf.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return conn, cmd, out
}

func (d *daemonSide) waitChild(t *testing.T) {
	t.Helper()
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("child %v: %v\n%s", d.cmd.Args, err, d.out)
	}
}

// watchPeer reads the control connection until it fails (the application
// closed it or died), then interrupts the daemon's waiter. The returned
// channel is closed at that moment; messages read before are forwarded.
func watchPeer(conn *net.UnixConn, w *Waiter) (dead <-chan struct{}, msgs <-chan string) {
	d := make(chan struct{})
	m := make(chan string, 16)
	go func() {
		defer close(d)
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				w.Interrupt()
				return
			}
			m <- string(buf[:n])
		}
	}()
	return d, m
}

// payload fills p with a pattern derived from seq and returns its CRC-32C.
func payload(p []byte, seq uint64) uint32 {
	binary.LittleEndian.PutUint64(p, seq)
	x := seq
	for i := 8; i+8 <= len(p); i += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(p[i:], z^z>>31)
	}
	return crc32.Checksum(p, castagnoli)
}

// TestCrossProcessStream sends streamCount descriptors (10 million without
// -race) from the application process to the daemon through one TX ring,
// every payload in a partition frame, checksummed by the sender and verified
// by the receiver, frames returned on the completion ring. Both sides spin
// briefly then sleep on their eventfd, so wakeups are exercised too.
func TestCrossProcessStream(t *testing.T) {
	d := spawnApp(t, "stream", childCountEnv+"="+strconv.Itoa(streamCount))
	initial := d.initial
	dead, _ := watchPeer(d.conn, d.end.Waiter)
	watchdog := time.AfterFunc(4*time.Minute, func() { d.cmd.Process.Kill(); d.region.Shutdown() })
	defer watchdog.Stop()

	tx := d.end.Sockets[0].TX
	batch := make([]Desc, 64)
	comp := make([]Desc, 64)
	frames := make([]uint32, 64)
	var got uint64
	idle := 0
	start := time.Now()
	for got < streamCount {
		n, err := tx.Consume(batch)
		if err != nil {
			t.Fatal(err)
		}
		if k := d.pool.AcceptTX(d.app, batch[:n]); k != n {
			t.Fatalf("%d of %d descriptors rejected: %+v", n-k, n, d.pool.Counters())
		}
		for i := range batch[:n] {
			desc := &batch[i]
			data := d.buf.Data(desc)
			if desc.Aux != got || len(data) != payloadLen || binary.LittleEndian.Uint64(data) != got {
				t.Fatalf("descriptor %d: %+v", got, *desc)
			}
			if c := crc32.Checksum(data, castagnoli); uint64(c) != desc.Cookie {
				t.Fatalf("descriptor %d: payload crc %#x, sender said %#x", got, c, desc.Cookie)
			}
			got++
			comp[i] = Desc{Frame: desc.Frame, Op: OpData}
			frames[i] = desc.Frame
		}
		if n > 0 {
			if k, err := d.end.Completions.Produce(comp[:n]); k != n || err != nil {
				t.Fatalf("completion ring took %d of %d: %v", k, n, err)
			}
			if k, err := d.pool.CompleteTX(d.app, frames[:n]); k != n || err != nil {
				t.Fatalf("CompleteTX %d of %d: %v", k, n, err)
			}
			idle = 0
			if _, err := d.end.Notifier.Notify(); err != nil {
				t.Fatal(err)
			}
		}
		if n == 0 {
			select {
			case <-dead:
				t.Fatalf("application died after %d descriptors\n%s", got, d.out)
			default:
			}
			if idle++; idle > 2048 {
				if err := d.end.Waiter.Wait(tx.Pending, -1); err != nil {
					t.Fatalf("after %d descriptors: %v", got, err)
				}
			}
		}
	}
	el := time.Since(start)
	<-dead
	d.waitChild(t)
	t.Logf("%d descriptors in %v (%.1f M/s), daemon woke the app %d times; child: %s",
		got, el.Round(time.Millisecond), float64(got)/el.Seconds()/1e6, d.end.Notifier.Wakeups.Load(), strings.TrimSpace(d.out.String()))
	if _, err := d.pool.Reclaim(d.app); err != nil {
		t.Fatal(err)
	}
	if s := d.pool.Stats(); s != initial {
		t.Errorf("pool after reclaim %+v, want %+v", s, initial)
	}
	if err := d.pool.Audit(); err != nil {
		t.Error(err)
	}
}

// TestCrossProcessKill kills the application with SIGKILL mid-stream, while
// it holds lent RX frames and the daemon holds its TX frames in flight, and
// checks the daemon reclaims every buffer: pool accounting back to its
// initial state, partition reusable.
func TestCrossProcessKill(t *testing.T) {
	d := spawnApp(t, "forever")
	initial := d.initial
	dead, _ := watchPeer(d.conn, d.end.Waiter)
	watchdog := time.AfterFunc(2*time.Minute, func() { d.cmd.Process.Kill(); d.region.Shutdown() })
	defer watchdog.Stop()

	const window = 96 // TX frames the daemon keeps in flight (as AF_XDP would)
	var inflight []uint32
	rxd := make([]Desc, 32)
	fr := make([]uint32, 32)
	in := make([]Desc, 64)
	comp := make([]Desc, 64)
	var accepted, lentTotal uint64
	killed := false
	var atKill PoolStats
loop:
	for {
		select {
		case <-dead:
			break loop
		default:
		}
		// Deliver RX: lend daemon frames on socket 0's RX ring.
		if n := d.pool.Alloc(fr); n > 0 {
			for i := range fr[:n] {
				payload(d.buf.Frame(fr[i])[:payloadLen], lentTotal+uint64(i))
				rxd[i] = Desc{Frame: fr[i], Len: payloadLen, Op: OpData, Aux: lentTotal + uint64(i)}
			}
			k, err := d.end.Sockets[0].RX.Produce(rxd[:n])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.pool.Lend(d.app, fr[:k]); err != nil {
				t.Fatal(err)
			}
			if _, err := d.pool.Free(fr[k:n]); err != nil {
				t.Fatal(err)
			}
			lentTotal += uint64(k)
		}
		// Take released RX frames back.
		n, err := d.end.Releases.Consume(in)
		if err != nil {
			t.Fatal(err)
		}
		if k := d.pool.AcceptReleased(d.app, in[:n]); k != n {
			t.Fatalf("release rejected: %d of %d", k, n)
		}
		// Accept TX, keep a window in flight, complete the rest.
		n, err = d.end.Sockets[0].TX.Consume(in)
		if err != nil {
			t.Fatal(err)
		}
		k := d.pool.AcceptTX(d.app, in[:n])
		if k != n {
			t.Fatalf("TX rejected: %d of %d", k, n)
		}
		for _, desc := range in[:k] {
			inflight = append(inflight, desc.Frame)
		}
		accepted += uint64(k)
		if len(inflight) > window {
			done := inflight[:len(inflight)-window]
			for i, f := range done {
				comp[i] = Desc{Frame: f}
			}
			c, err := d.end.Completions.Produce(comp[:len(done)])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.pool.CompleteTX(d.app, done[:c]); err != nil {
				t.Fatal(err)
			}
			inflight = append(inflight[:0], inflight[c:]...)
		}
		d.end.Notifier.Notify()
		if !killed && accepted >= killAfterCount {
			atKill = d.pool.Stats()
			if err := d.cmd.Process.Signal(unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		if n == 0 && killed {
			d.end.Waiter.Wait(func() bool { return false }, 10*time.Millisecond)
		}
	}
	if !killed {
		t.Fatalf("application died on its own after %d TX descriptors\n%s", accepted, d.out)
	}
	err := d.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != unix.SIGKILL {
		t.Fatalf("child exit: %v", err)
	}
	// The application is gone: reclaim. The region goes first (nothing else maps it).
	d.region.Close()
	r, err := d.pool.Reclaim(d.app)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("at kill: %+v; reclaim: %+v; daemon still had %d in flight; %d TX accepted, %d RX lent",
		atKill, r, len(inflight), accepted, lentTotal)
	if r.InFlight != uint32(len(inflight)) || r.InFlight == 0 {
		t.Errorf("reclaim saw %d in flight, daemon holds %d", r.InFlight, len(inflight))
	}
	if atKill.Lent == 0 {
		t.Errorf("application held no RX frames when killed: %+v", atKill)
	}
	if s := d.pool.Stats(); s.AppsDraining != 1 || s.Lent != 0 {
		t.Errorf("before completions: %+v", s)
	}
	// The daemon's AF_XDP completions for the dead app's frames arrive.
	if n, err := d.pool.CompleteTX(d.app, inflight); n != len(inflight) || err != nil {
		t.Fatalf("CompleteTX after death: %d, %v", n, err)
	}
	if s := d.pool.Stats(); s != initial {
		t.Errorf("pool after reclaim %+v, want initial %+v", s, initial)
	}
	if err := d.pool.Audit(); err != nil {
		t.Error(err)
	}
	if _, part, err := d.pool.AttachApp(); err != nil || part != d.part {
		t.Errorf("partition not reusable: %v %v", part, err)
	}
}

// TestCrossProcessHostile has the application submit every kind of bad
// buffer index, release frames it was never lent, corrupt ring indices and
// the header, and try to truncate the shared memfds. The daemon rejects and
// counts each one and keeps serving the well-formed rings.
func TestCrossProcessHostile(t *testing.T) {
	d := spawnApp(t, "hostile")
	bystander, otherPart, err := d.pool.AttachApp()
	if err != nil {
		t.Fatal(err)
	}
	if otherPart.First != d.part.First+d.part.Count {
		t.Fatalf("partitions %+v %+v not adjacent as the child assumes", d.part, otherPart)
	}
	// Lend frames 0-3 to the application (RX ring) and 4-7 to the bystander.
	fr := make([]uint32, 8)
	if d.pool.Alloc(fr) != 8 || fr[0] != 0 || fr[7] != 7 {
		t.Fatalf("alloc order %v", fr)
	}
	rx := make([]Desc, 4)
	for i := range rx {
		rx[i] = Desc{Frame: fr[i], Len: 10}
	}
	if n, _ := d.end.Sockets[0].RX.Produce(rx); n != 4 {
		t.Fatal("rx produce")
	}
	d.pool.Lend(d.app, fr[:4])
	d.pool.Lend(bystander, fr[4:])
	d.end.Notifier.Notify()

	dead, msgs := watchPeer(d.conn, d.end.Waiter)
	select {
	case m := <-msgs:
		if m != "done" {
			t.Fatalf("child: %s", m)
		}
	case <-dead:
		t.Fatalf("child died\n%s", d.out)
	case <-time.After(time.Minute):
		t.Fatal("timeout waiting for the child")
	}
	before := *snapshot(d.pool)
	in := make([]Desc, 64)
	n, err := d.end.Sockets[0].TX.Consume(in)
	if err != nil || n != 8 {
		t.Fatalf("TX consume %d, %v", n, err)
	}
	if k := d.pool.AcceptTX(d.app, in[:n]); k != 2 || in[0].Frame != d.part.First || in[1].Frame != d.part.First+1 {
		t.Errorf("TX accepted %d: %+v", k, in[:k])
	}
	n, _ = d.end.Releases.Consume(in)
	if k := d.pool.AcceptReleased(d.app, in[:n]); n != 5 || k != 1 {
		t.Errorf("releases: %d consumed, %d accepted", n, k)
	}
	after := *snapshot(d.pool)
	want := counts{rng: 3, owned: 6, length: 1}
	if diff := (counts{after.rng - before.rng, after.owned - before.owned, after.length - before.length, after.stale - before.stale, after.dbl - before.dbl}); diff != want {
		t.Errorf("rejections %+v, want %+v", diff, want)
	}
	// Socket 1's TX producer index was set far ahead; the completion ring's
	// consumer index was moved past our producer.
	if _, err := d.end.Sockets[1].TX.Consume(in); !errors.Is(err, ErrRingCorrupt) {
		t.Errorf("socket 1 TX: %v, want ErrRingCorrupt", err)
	}
	if _, err := d.end.Completions.Free(); !errors.Is(err, ErrRingCorrupt) {
		t.Errorf("completions: %v, want ErrRingCorrupt", err)
	}
	// The header was scribbled on; the daemon never re-reads it and socket 0
	// still works.
	if l := d.region.Layout(); l.App != d.app || l.Sockets != 2 {
		t.Errorf("daemon layout changed: %+v", l)
	}
	if n, err := d.end.Sockets[0].RX.Produce(rx[:1]); n != 1 || err != nil {
		t.Errorf("socket 0 RX after the attack: %d, %v", n, err)
	}
	if err := d.pool.Audit(); err != nil {
		t.Error(err)
	}
	d.conn.Close()
	d.waitChild(t)
}

// TestCrossProcessCorruptHeader hands the application regions whose header
// the daemon side corrupted, and a control message that is not an
// attachment; the application must reject each with the right error, not
// crash, and not leak the descriptors it received.
func TestCrossProcessCorruptHeader(t *testing.T) {
	conn, cmd, out := startChild(t, "corrupt")
	geo := BufferGeometry{FrameSize: 2048, Frames: 768, Part: Partition{256, 128}}
	buf, err := NewBufferArea(geo.Frames, geo.FrameSize)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	cases := []struct {
		name   string
		mutate func(b []byte)
		want   string
	}{
		{"valid", func([]byte) {}, "ok"},
		{"version", func(b []byte) { binary.LittleEndian.PutUint32(b[hdrVersion:], 7) }, "version"},
		{"flipped table bit", func(b []byte) { b[hdrRingTable+5*ringEntrySize+9] ^= 4 }, "bad:crc"},
		{"magic", func(b []byte) { copy(b, "JUNK") }, "bad:magic"},
		{"overlap with valid crc", func(b []byte) {
			e := b[hdrRingTable+6*ringEntrySize:]
			binary.LittleEndian.PutUint64(e, binary.LittleEndian.Uint64(e)-lineSize)
			resum(b)
		}, "bad:ring[6].offset"},
		{"zeroed", func(b []byte) { clear(b[:4096]) }, "bad:magic"},
	}
	for _, tc := range cases {
		r, err := CreateRegion(RegionConfig{Sockets: 2}, 1, geo)
		if err != nil {
			t.Fatal(err)
		}
		tc.mutate(r.mem)
		if err := SendAttachment(conn, r.Attachment(buf.FD())); err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	// Not an attachment: wrong magic, with two descriptors the child must close.
	if err := SendFDs(conn, []byte("not an attachment"), []int{buf.FD(), buf.FD()}); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 4096)
	for _, tc := range append(cases, struct {
		name   string
		mutate func([]byte)
		want   string
	}{"bad message", nil, "badattach,nofdleak"}) {
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := conn.Read(reply)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		if got := string(reply[:n]); got != tc.want {
			t.Errorf("%s: application said %q, want %q", tc.name, got, tc.want)
		}
	}
	conn.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestRingChild is the application side of the cross-process tests. It only
// runs when re-executed by one of them.
func TestRingChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("application half of the cross-process tests; runs only when re-executed by them")
	}
	f := os.NewFile(3, "ctl-app")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	if mode == "corrupt" {
		childCorrupt(t, conn)
		return
	}
	a, err := RecvAttachment(conn)
	if err != nil {
		t.Fatal(err)
	}
	region, err := OpenRegion(a)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	l := region.Layout()
	buf, err := MapBufferArea(a.Buffer, l.BufferFrames, l.FrameSize)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	end, err := region.AppEnd()
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "stream":
		count, _ := strconv.ParseUint(os.Getenv(childCountEnv), 10, 64)
		childStream(t, end, buf, NewFrameStack(l.Part), count)
	case "forever":
		childForever(t, end, buf, NewFrameStack(l.Part))
	case "hostile":
		childHostile(t, conn, region, end, buf)
	default:
		t.Fatalf("unknown role %q", mode)
	}
}

func childStream(t *testing.T, end *AppEnd, buf *BufferArea, frames *FrameStack, count uint64) {
	tx := end.Sockets[0].TX
	batch := make([]Desc, 64)
	fr := make([]uint32, 64)
	comp := make([]Desc, 256)
	total := frames.Len()
	var seq uint64
	idle := 0
	pending := func() bool {
		return end.Completions.Pending() || (seq < count && frames.Len() > 0 && tx.HasSpace())
	}
	for seq < count || frames.Len() < total {
		progress := false
		n, err := end.Completions.Consume(comp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := frames.PushDescs(comp[:n]); err != nil {
			t.Fatal(err)
		}
		progress = n > 0
		if seq < count {
			k := frames.Pop(fr[:min(uint64(len(fr)), count-seq)])
			for i, f := range fr[:k] {
				crc := payload(buf.Frame(f)[:payloadLen], seq+uint64(i))
				batch[i] = Desc{Frame: f, Len: payloadLen, Op: OpData, Aux: seq + uint64(i), Cookie: uint64(crc)}
			}
			m, err := tx.Produce(batch[:k])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := frames.Push(fr[m:k]...); err != nil {
				t.Fatal(err)
			}
			seq += uint64(m)
			progress = progress || m > 0
		}
		if progress {
			idle = 0
			if _, err := end.Notifier.Notify(); err != nil {
				t.Fatal(err)
			}
		} else if idle++; idle > 2048 {
			if err := end.Waiter.Wait(pending, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "child: sent %d, woke the daemon %d times\n", seq, end.Notifier.Wakeups.Load())
}

// childForever receives, releases (one batch late, so it always holds some
// lent frames) and transmits until it is killed.
func childForever(t *testing.T, end *AppEnd, buf *BufferArea, frames *FrameStack) {
	rx := make([]Desc, 64)
	held := make([]Desc, 0, 128)
	batch := make([]Desc, 32)
	fr := make([]uint32, 32)
	comp := make([]Desc, 256)
	for seq := uint64(0); ; {
		n, err := end.Sockets[0].RX.Consume(rx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rx[:n] {
			data := buf.Data(&d)
			if data == nil || binary.LittleEndian.Uint64(data) != d.Aux {
				t.Fatalf("RX %+v: bad payload", d)
			}
		}
		if len(held) > 0 {
			k, err := end.Releases.Produce(held)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held[:0], held[k:]...)
		}
		held = append(held, rx[:n]...)
		n, _ = end.Completions.Consume(comp)
		if _, err := frames.PushDescs(comp[:n]); err != nil {
			t.Fatal(err)
		}
		k := frames.Pop(fr)
		for i, f := range fr[:k] {
			crc := payload(buf.Frame(f)[:payloadLen], seq)
			batch[i] = Desc{Frame: f, Len: payloadLen, Aux: seq, Cookie: uint64(crc)}
			seq++
		}
		m, _ := end.Sockets[0].TX.Produce(batch[:k])
		frames.Push(fr[m:k]...)
		end.Notifier.Notify()
	}
}

func childHostile(t *testing.T, conn *net.UnixConn, region *Region, end *AppEnd, buf *BufferArea) {
	l := region.Layout()
	p := l.Part
	o := Partition{p.First + p.Count, p.Count} // the bystander's partition
	fs := uint16(l.FrameSize)
	// Wait for the four lent RX frames.
	rx := make([]Desc, 8)
	for got := 0; got < 4; {
		n, err := end.Sockets[0].RX.Consume(rx[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
		if n == 0 {
			end.Waiter.Wait(end.Sockets[0].RX.Pending, time.Second)
		}
	}
	tx := []Desc{
		{Frame: p.First, Len: 64},                  // valid
		{Frame: p.First + 1, Len: 64},              // valid
		{Frame: o.First, Len: 64},                  // another app's frame
		{Frame: 5, Len: 64},                        // a daemon frame
		{Frame: l.BufferFrames, Len: 1},            // one past the buffer area
		{Frame: 0xfffffff0, Len: 1},                // far out of range
		{Frame: p.First + 2, Off: fs - 8, Len: 64}, // runs past the frame
		{Frame: p.First, Len: 64},                  // resubmitted while in flight
	}
	rel := []Desc{{Frame: 0}, {Frame: 0}, {Frame: 4}, {Frame: 1000}, {Frame: p.First + 44}}
	for _, c := range []struct {
		p  *Producer
		ds []Desc
	}{{end.Sockets[0].TX, tx}, {end.Releases, rel}} {
		if n, err := c.p.Produce(c.ds); n != len(c.ds) || err != nil {
			t.Fatalf("produce %d of %d: %v", n, len(c.ds), err)
		}
	}
	// Raw attacks on the shared words.
	atomicStore(region.mem, l.Rings[ringIndex(KindTX, 1)].Offset+ringProducerOff, 1<<40)
	atomicStore(region.mem, l.Rings[ringIndex(KindCompletion, 0)].Offset+ringConsumerOff, 12345)
	copy(region.mem[:hdrRingTable], bytes.Repeat([]byte{0xA5}, hdrRingTable))
	// The memfds are sealed: no truncating them under the daemon.
	for name, fd := range map[string]int{"region": region.fd, "buffer": buf.fd} {
		if err := unix.Ftruncate(fd, 4096); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate of the %s memfd: %v, want EPERM", name, err)
		}
	}
	if _, err := conn.Write([]byte("done")); err != nil {
		t.Fatal(err)
	}
	// Wait for the daemon to hang up.
	io.Copy(io.Discard, conn)
}

func childCorrupt(t *testing.T, conn *net.UnixConn) {
	for i := 0; ; i++ {
		fdsBefore := countFDs(t)
		a, err := RecvAttachment(conn)
		if errors.Is(err, io.EOF) {
			return
		}
		var reply string
		switch {
		case errors.Is(err, ErrBadAttachment):
			reply = "badattach"
			if countFDs(t) == fdsBefore {
				reply += ",nofdleak"
			}
		case err != nil:
			t.Fatalf("message %d: %v", i, err)
		default:
			r, err := OpenRegion(a)
			var he *HeaderError
			switch {
			case err == nil:
				reply = "ok"
				r.Close()
			case errors.Is(err, ErrVersion):
				reply = "version"
			case errors.As(err, &he):
				reply = "bad:" + he.Field
			default:
				reply = "other:" + err.Error()
			}
			unix.Close(a.Buffer)
		}
		if _, err := conn.Write([]byte(reply)); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(reply, "badattach") {
			return
		}
	}
}

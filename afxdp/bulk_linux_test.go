package afxdp

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"golang.org/x/sys/unix"
)

// TestMillionFrames pushes 1e6 frames from A's AF_XDP socket to B's and
// accounts for every one: every transmit completes, every frame either
// arrives exactly once with its sequence number or is counted as dropped by
// B's kernel (fill or RX ring exhausted while the receiver was descheduled:
// AF_XDP's backpressure, frequent under -race on a loaded 2-vCPU machine),
// and both pools get all their frames back. No flow control: a window would
// make the run time hostage to the receiver's scheduling.
func TestMillionFrames(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	cfg := Config{UDPPort: testPort, NumFrames: 8192, RingSize: 2048}
	cfg.Interface = v.A.Name
	pa := openIn(t, pair.A, cfg)
	cfg.Interface = v.B.Name
	pb := openIn(t, pair.B, cfg)

	f := frameTo(v, testPort)
	const payload = 64
	var wg sync.WaitGroup
	seen := make([]bool, total)
	var received, dups, bad int
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // receiver: owns pb
		defer wg.Done()
		u, q := pb.UMEM(), pb.Queues()[0]
		descs := make([]Desc, 256)
		for {
			n := q.Receive(descs)
			for _, d := range descs[:n] {
				b := u.Bytes(d)
				if len(b) != testbed.UDPHeaderLen+payload {
					bad++
					continue
				}
				seq := binary.LittleEndian.Uint64(b[testbed.UDPHeaderLen:])
				if seq >= uint64(total) || seen[seq] {
					dups++
					continue
				}
				seen[seq] = true
				received++
			}
			if _, err := u.Release(descs[:n]); err != nil {
				t.Error(err)
				return
			}
			if n == 0 {
				select {
				case <-stop:
					return
				default:
				}
				runtime.Gosched()
			}
		}
	}()

	start := time.Now()
	// Sender: owns pa. Build each frame's headers once per frame.
	u, q := pa.UMEM(), pa.Queues()[0]
	descs := make([]Desc, 256)
	var pl [payload]byte
	sent := 0
	deadline := time.Now().Add(2 * time.Minute)
	for sent < total {
		want := min(len(descs), total-sent)
		n := u.Alloc(descs[:want])
		if n == 0 {
			q.Transmit(nil) // reap completions, kick leftovers
			continue
		}
		for i := range descs[:n] {
			binary.LittleEndian.PutUint64(pl[:], uint64(sent+i))
			descs[i].Len = uint32(f.Build(u.Buffer(descs[i]), pl[:]))
		}
		off := 0
		for off < n {
			k, err := q.Transmit(descs[off:n])
			if err != nil {
				t.Fatal(err)
			}
			off += k
		}
		sent += n
		if time.Now().After(deadline) {
			t.Fatalf("too slow: %d sent", sent)
		}
	}
	for q.TxOutstanding() > 0 {
		q.Transmit(nil)
		if time.Now().After(deadline) {
			t.Fatalf("completions stuck: %d outstanding", q.TxOutstanding())
		}
	}
	elapsed := time.Since(start)
	// Every frame is now either on B's RX ring / already counted, or was
	// dropped by B's kernel (counted in XDP_STATISTICS). Wait until the
	// equation closes.
	var st QueueStats
	for {
		st, err = pb.Queues()[0].Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.RxFrames+st.KernelRxDropped+st.KernelRxRingFull >= uint64(total) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond) // polling a counter, not timing an assertion
	}
	close(stop)
	wg.Wait()
	sa, _ := pa.Queues()[0].Stats()
	t.Logf("%d frames in %v (%.0f frames/s); sender %+v; receiver %+v", total, elapsed, float64(total)/elapsed.Seconds(), sa, st)
	drops := st.KernelRxDropped + st.KernelRxRingFull
	if bad != 0 || dups != 0 {
		t.Fatalf("%d malformed, %d duplicate frames", bad, dups)
	}
	if uint64(received)+drops != uint64(total) {
		t.Fatalf("received %d + kernel drops %d != sent %d", received, drops, total)
	}
	if received == 0 {
		t.Fatal("no frame received")
	}
	if sa.TxCompleted != uint64(total) || sa.TxFrames != uint64(total) {
		t.Fatalf("sender: %d transmitted, %d completed, want %d", sa.TxFrames, sa.TxCompleted, total)
	}
	for name, p := range map[string]*Port{"sender": pa, "receiver": pb} {
		acc := p.UMEM().Accounting()
		if err := acc.Check(); err != nil {
			t.Fatalf("%s: %v (%+v)", name, err, acc)
		}
	}
}

// TestOwnershipViolationsCaught drives the real rings with a double
// release and a transmit of a frame the app does not own.
func TestOwnershipViolationsCaught(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := openIn(t, pair.A, Config{Interface: pair.Veth.A.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32})
	u, q := p.UMEM(), p.Queues()[0]
	d := make([]Desc, 2)
	u.Alloc(d)
	if n, err := u.Release(d[:1]); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	n, err := u.Release(d[:1])
	var fe *FrameError
	if n != 0 || !errors.As(err, &fe) || fe.Have != OwnerFree || fe.Want != OwnerApp {
		t.Fatalf("double release: n=%d err=%v", n, err)
	}
	d[1].Len = 60
	bogus := []Desc{d[1], {Addr: d[0].Addr, Len: 60}} // second was released
	n, err = q.Transmit(bogus)
	if n != 1 || !errors.Is(err, ErrFrameOwnership) {
		t.Fatalf("transmit of a free frame: n=%d err=%v", n, err)
	}
	n, err = q.Transmit([]Desc{{Addr: uint64(u.Size()) + 10, Len: 60}})
	if n != 0 || !errors.Is(err, ErrBadDescriptor) {
		t.Fatalf("transmit outside UMEM: n=%d err=%v", n, err)
	}
	for q.TxOutstanding() > 0 {
		q.Transmit(nil)
	}
	acc := u.Accounting()
	if acc.Violations != 2 || acc.App != 0 || acc.Tx != 0 {
		t.Fatalf("accounting %+v", acc)
	}
	if err := acc.Check(); err == nil {
		t.Fatal("Check passes despite violations")
	}
}

// TestUMEMSharedMapping maps the UMEM's memfd a second time, as an
// application process would, and reads a received frame through it.
func TestUMEMSharedMapping(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	pa := openIn(t, pair.A, Config{Interface: v.A.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32})
	pb := openIn(t, pair.B, Config{Interface: v.B.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32})
	fd, err := pb.UMEM().DupFD()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// The memfd is sealed: another process can neither shrink nor grow it.
	if err := unix.Ftruncate(fd, 4096); err == nil {
		t.Fatal("the UMEM memfd could be shrunk by a process it is shared with")
	}
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		t.Fatalf("UMEM memfd seals = %#x, %v", seals, err)
	}
	other, err := unix.Mmap(fd, 0, pb.UMEM().Size(), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(other)
	sendFrames(t, pa, frameTo(v, testPort), [][]byte{[]byte("through the memfd")})
	descs := make([]Desc, 4)
	var n int
	for deadline := time.Now().Add(5 * time.Second); n == 0 && time.Now().Before(deadline); {
		n = pb.Queues()[0].Receive(descs)
	}
	if n != 1 {
		t.Fatalf("received %d", n)
	}
	d := descs[0]
	if got := string(other[d.Addr+testbed.UDPHeaderLen : d.Addr+uint64(d.Len)]); got != "through the memfd" {
		t.Fatalf("second mapping reads %q", got)
	}
	pb.UMEM().Release(descs[:1])
}

// TestMultiQueueSharedUMEM binds two queues of one interface over one UMEM
// (XDP_SHARED_UMEM) and checks both sockets transmit and receive.
func TestMultiQueueSharedUMEM(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	cfg := Config{UDPPort: testPort, Queues: []int{0, 1}, NumFrames: 512, RingSize: 64}
	cfg.Interface = v.A.Name
	pa := openIn(t, pair.A, cfg)
	cfg.Interface = v.B.Name
	pb := openIn(t, pair.B, cfg)
	if in := pb.Info(); in.Driver == "veth" && in.Attach != AttachNative {
		t.Fatalf("multi-queue veth port attached %v, want native (generic veth delivers everything on queue 0)", in.Attach)
	}
	for _, q := range pb.Queues() {
		if q.wakeup != pb.Queues()[0].wakeup {
			t.Fatalf("queue %d need_wakeup %v differs from the first socket's", q.ID(), q.wakeup)
		}
	}
	if got := pb.Info().Queues; len(got) != 2 || pb.Queue(1) == nil || pb.Queue(7) != nil {
		t.Fatalf("queues %v", got)
	}
	f := frameTo(v, testPort)
	u := pa.UMEM()
	// Send 8 frames from each of A's queues; veth delivers a frame on the
	// peer's RX queue matching the TX queue it left on.
	for _, q := range pa.Queues() {
		descs := make([]Desc, 8)
		u.Alloc(descs)
		for i := range descs {
			descs[i].Len = uint32(f.Build(u.Buffer(descs[i]), []byte{byte(q.ID()), byte(i)}))
		}
		for sent := 0; sent < len(descs) || q.TxOutstanding() > 0; {
			n, err := q.Transmit(descs[sent:])
			if err != nil {
				t.Fatal(err)
			}
			sent += n
		}
	}
	perQueue := map[int]int{}
	total := 0
	descs := make([]Desc, 32)
	for deadline := time.Now().Add(5 * time.Second); total < 16 && time.Now().Before(deadline); {
		for _, q := range pb.Queues() {
			n := q.Receive(descs)
			for _, d := range descs[:n] {
				b := pb.UMEM().Bytes(d)
				if int(b[testbed.UDPHeaderLen]) != q.ID() {
					t.Errorf("frame from TX queue %d arrived on RX queue %d", b[testbed.UDPHeaderLen], q.ID())
				}
				perQueue[q.ID()]++
			}
			pb.UMEM().Release(descs[:n])
			total += n
		}
	}
	if total != 16 || perQueue[0] != 8 || perQueue[1] != 8 {
		t.Fatalf("received %d frames, per queue %v", total, perQueue)
	}
	for _, p := range []*Port{pa, pb} {
		if err := p.UMEM().Accounting().Check(); err != nil {
			t.Fatal(err)
		}
	}
}

const childEnv = "AFXDP_TEST_CHILD_NETNS"

// TestChildHoldsProgram is the child half of TestSIGKILLDetachesProgram: it
// opens a Port in the namespace named by the environment, reports "ready"
// and waits to be killed.
func TestChildHoldsProgram(t *testing.T) {
	nsPath := os.Getenv(childEnv)
	if nsPath == "" {
		t.Skip("helper process for TestSIGKILLDetachesProgram (runs only when re-executed by it)")
	}
	ns := &testbed.Namespace{Name: strings.TrimPrefix(nsPath, "/run/netns/")}
	err := ns.Do(func() error {
		_, err := Open(Config{Interface: os.Getenv(childEnv + "_IFACE"), UDPPort: testPort, NumFrames: 256, RingSize: 32})
		return err
	})
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	select {} // until SIGKILL
}

func TestSIGKILLDetachesProgram(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ifname := pair.Veth.B.Name
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildHoldsProgram$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+pair.B.Path(), childEnv+"_IFACE="+ifname)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 256)
	ready := make(chan string, 1)
	go func() {
		n, _ := out.Read(line)
		ready <- string(line[:n])
	}()
	select {
	case s := <-ready:
		if !strings.HasPrefix(s, "ready") {
			t.Fatalf("child: %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not report ready")
	}
	show, _ := pair.B.Run("link", "show", "dev", ifname)
	if !strings.Contains(show, "xdp") {
		t.Fatalf("child's program not visible on %s: %q", ifname, show)
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The kernel closes the dead process's bpf_link fd on exit, which
	// detaches the program. Verify both through ip and by attaching our own.
	show, _ = pair.B.Run("link", "show", "dev", ifname)
	if strings.Contains(show, "xdp") {
		t.Fatalf("program still attached after SIGKILL: %q", show)
	}
	err = pair.B.Do(func() error {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: steeringInstructions(1, xdpPass, false)[22:]})
		if err != nil {
			return err
		}
		defer prog.Close()
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.Veth.B.Index})
		if err != nil {
			return err
		}
		return l.Close()
	})
	if err != nil {
		t.Fatalf("interface not free after SIGKILL: %v", err)
	}
}

// TestOpenEachPortPerQueue opens a port per queue (OpenEach: a UMEM each,
// one steering program): each queue's frames reach its own port, and the
// program stays attached while any port is open.
func TestOpenEachPortPerQueue(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	cfg := Config{UDPPort: testPort, Queues: []int{0, 1}, NumFrames: 512, RingSize: 64}
	cfg.Interface = v.A.Name
	pa := openIn(t, pair.A, cfg)
	cfg.Interface = v.B.Name
	var pbs []*Port
	if err := pair.B.Do(func() (err error) { pbs, err = OpenEach(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range pbs {
			p.Close()
		}
	})
	if len(pbs) != 2 || pbs[0].UMEM() == pbs[1].UMEM() || pbs[1].Queue(1) == nil || pbs[0].Queue(1) != nil {
		t.Fatalf("OpenEach: %d ports, queues %v %v", len(pbs), pbs[0].Info().Queues, pbs[len(pbs)-1].Info().Queues)
	}
	if in := pbs[1].Info(); in.Driver == "veth" && in.Attach != AttachNative {
		t.Fatalf("per-queue ports on veth attached %v, want native", in.Attach)
	}
	f := frameTo(v, testPort)
	send := func(q *Queue, tag byte) {
		descs := make([]Desc, 4)
		pa.UMEM().Alloc(descs)
		for i := range descs {
			descs[i].Len = uint32(f.Build(pa.UMEM().Buffer(descs[i]), []byte{tag}))
		}
		for sent := 0; sent < len(descs) || q.TxOutstanding() > 0; {
			n, err := q.Transmit(descs[sent:])
			if err != nil {
				t.Fatal(err)
			}
			sent += n
		}
	}
	recv := func(p *Port, want int) {
		descs := make([]Desc, 16)
		got := 0
		for deadline := time.Now().Add(5 * time.Second); got < want && time.Now().Before(deadline); {
			n := p.Queues()[0].Receive(descs)
			for _, d := range descs[:n] {
				if tag := p.UMEM().Bytes(d)[testbed.UDPHeaderLen]; int(tag) != p.Queues()[0].ID() {
					t.Errorf("frame from TX queue %d on port of queue %d", tag, p.Queues()[0].ID())
				}
			}
			p.UMEM().Release(descs[:n])
			got += n
		}
		if got != want {
			t.Fatalf("port of queue %d received %d frames, want %d", p.Queues()[0].ID(), got, want)
		}
	}
	for _, q := range pa.Queues() {
		send(q, byte(q.ID()))
	}
	recv(pbs[0], 4)
	recv(pbs[1], 4)
	// Queue 0's port closes; queue 1's keeps the program and its frames.
	if err := pbs[0].Close(); err != nil {
		t.Fatal(err)
	}
	send(pa.Queue(1), 1)
	recv(pbs[1], 4)
	if err := pbs[1].UMEM().Accounting().Check(); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/ndpstack/ndpstack/ring"
	"golang.org/x/sys/unix"
)

// ndpperf ring: the cross-process shared-memory ring against a Unix domain
// socket pair moving the same 32-byte messages between two processes.
//
// Phases (each a fresh child process, re-executed as `ndpperf ring -child=PHASE`
// with the control socket on fd 3 and, for the socket phases, the data socket
// on fd 4; the child is the producer, this process the consumer):
//
//	ring-thru  child produces -n descriptors in batches of 64, parent consumes
//	           in batches of up to 256. Each side spins ringSpinLimit empty
//	           polls, then sleeps on its eventfd (Waiter.Wait) and is woken by
//	           the other (Notifier.Notify): the way the engine runs, and the
//	           only way a ring keeps its throughput when the two processes do
//	           not both hold a CPU all the time. Messages per second.
//	uds-thru   child writes -uds-n 32-byte messages one per write(2) on a
//	           SOCK_SEQPACKET pair, parent reads one per read(2); both block.
//	ring-lat   child stamps CLOCK_MONOTONIC into one descriptor, produces it,
//	           spins until it is consumed, waits -gap, repeats; the parent
//	           spins and records now - stamp. One-way latency, both spinning.
//	uds-lat    same over the socket pair, parent blocked in read(2); the
//	           parent acknowledges each message so none queue.
//	ring-wake  same as ring-lat but the parent sleeps in Waiter.Wait on the
//	           eventfd whenever the ring is empty (no spinning), and the
//	           child rings it with Notifier.Notify.
//	ring-pingpong-same, ring-pingpong-cross
//	           round trips: the parent puts a descriptor on one ring and
//	           notifies, the child (asleep in Waiter.Wait) takes it, puts one
//	           on the other ring and notifies, the parent (asleep too) takes
//	           it. Neither spins. -same pins the child to the parent's CPU
//	           (each half round trip is a context switch between two
//	           processes on one CPU: an application and its ndpd core on a
//	           2-CPU machine), -cross to the other CPU. Round-trip time.
//
// Parent and child pin their measuring threads to CPU 0 and CPU 1 (CPU 0
// both for ring-pingpong-same).

// ringSpinLimit is how many empty polls a throughput-phase side makes before
// sleeping on its eventfd.
const ringSpinLimit = 2000

var errMonoClock = errors.New("runtime.nanotime is not CLOCK_MONOTONIC on this system")

type ringOpts struct {
	n       int
	udsN    int
	samples int
	gap     time.Duration
	slots   uint32
	nice    int
}

type ringResult struct {
	RingMsgsPerS   float64 `json:"ring_msgs_per_s"`
	UDSMsgsPerS    float64 `json:"uds_msgs_per_s"`
	RingP50ns      int64   `json:"ring_p50_ns"`
	UDSP50ns       int64   `json:"uds_p50_ns"`
	RingWakeP50ns  int64   `json:"ring_wake_p50_ns"`
	RingP10ns      int64   `json:"ring_p10_ns"`
	RingP99ns      int64   `json:"ring_p99_ns"`
	UDSP99ns       int64   `json:"uds_p99_ns"`
	RingWakeP99ns  int64   `json:"ring_wake_p99_ns"`
	ThroughputX    float64 `json:"throughput_ratio_ring_over_uds"`
	P50Ratio       float64 `json:"p50_ratio_ring_over_uds"`
	WakeP50Ratio   float64 `json:"wake_p50_ratio_ring_over_uds"`
	RingMsgs       int     `json:"ring_msgs"`
	UDSMsgs        int     `json:"uds_msgs"`
	LatencySamples int     `json:"latency_samples"`
	MsgBytes       int     `json:"msg_bytes"`
	GapNs          int64   `json:"gap_ns"`
	Pinned         bool    `json:"pinned"`
	Nice           int     `json:"spin_phase_nice"`
	RingWakeups    uint64  `json:"ring_wake_eventfd_writes"`
	// Round trips between two processes that sleep on their eventfds
	// (ring-pingpong-same: both on CPU 0; -cross: CPU 0 and 1).
	PingPongSameCPUP50ns  int64 `json:"pingpong_same_cpu_rtt_p50_ns,omitempty"`
	PingPongSameCPUP99ns  int64 `json:"pingpong_same_cpu_rtt_p99_ns,omitempty"`
	PingPongCrossCPUP50ns int64 `json:"pingpong_cross_cpu_rtt_p50_ns,omitempty"`
	PingPongCrossCPUP99ns int64 `json:"pingpong_cross_cpu_rtt_p99_ns,omitempty"`
}

func init() {
	register(&subcommand{
		name:    "ring",
		summary: "cross-process shared-memory ring vs a Unix socket pair (throughput, one-way latency, eventfd wake, eventfd ping-pong on one CPU and across two)",
		run:     runRing,
	})
}

func runRing(args []string) error {
	fs := flag.NewFlagSet("ring", flag.ContinueOnError)
	jsonOut := fs.Bool("json", false, "print one JSON object")
	o := ringOpts{}
	fs.IntVar(&o.n, "n", 10_000_000, "descriptors for the ring throughput phase")
	fs.IntVar(&o.udsN, "uds-n", 1_000_000, "messages for the socket throughput phase")
	fs.IntVar(&o.samples, "samples", 50_000, "one-way latency samples per latency phase")
	fs.DurationVar(&o.gap, "gap", 20*time.Microsecond, "idle time between latency samples (lets a blocking receiver fall asleep)")
	slots := fs.Uint("slots", 4096, "ring slots (power of two)")
	fs.IntVar(&o.nice, "nice", 0, "nice value for both processes during the spinning latency phase (e.g. -20 as root, so the two spinners are not time-sliced with other load; 0 = leave alone)")
	child := fs.String("child", "", "internal: run as the producer child of PHASE")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.slots = uint32(*slots)
	if err := checkMonoClock(); err != nil {
		return err
	}
	if *child != "" {
		return ringChild(*child, o)
	}
	res, err := ringBench(o)
	if err != nil {
		return err
	}
	if *jsonOut {
		return printJSON(res)
	}
	fmt.Printf("ring: %.2f M msgs/s   uds: %.2f M msgs/s   (ring/uds %.1fx)\n", res.RingMsgsPerS/1e6, res.UDSMsgsPerS/1e6, res.ThroughputX)
	fmt.Printf("one-way p50/p99: ring (spin) %d/%d ns   uds (blocking) %d/%d ns   ring (eventfd wake) %d/%d ns\n",
		res.RingP50ns, res.RingP99ns, res.UDSP50ns, res.UDSP99ns, res.RingWakeP50ns, res.RingWakeP99ns)
	fmt.Printf("p50 ratio ring/uds %.3f, wake/uds %.3f\n", res.P50Ratio, res.WakeP50Ratio)
	fmt.Printf("eventfd ping-pong round trip p50/p99: same CPU %d/%d ns   across CPUs %d/%d ns\n",
		res.PingPongSameCPUP50ns, res.PingPongSameCPUP99ns, res.PingPongCrossCPUP50ns, res.PingPongCrossCPUP99ns)
	return nil
}

// pinThread locks the goroutine to its thread and pins it to cpu.
func ringPin(cpu int) bool {
	runtime.LockOSThread()
	if runtime.NumCPU() < 2 {
		return false
	}
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set) == nil
}

func ringBench(o ringOpts) (ringResult, error) {
	res := ringResult{RingMsgs: o.n, UDSMsgs: o.udsN, LatencySamples: o.samples, MsgBytes: ring.DescSize, GapNs: o.gap.Nanoseconds()}
	res.Pinned = ringPin(0)
	res.Nice = o.nice
	var err error
	var lat []int64
	if res.RingMsgsPerS, _, err = ringPhase("ring-thru", o); err != nil {
		return res, err
	}
	if res.UDSMsgsPerS, _, err = ringUDSPhase("uds-thru", o); err != nil {
		return res, err
	}
	if o.nice != 0 {
		// Only this thread (Linux nice is per thread), only for this phase.
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, o.nice); err != nil {
			return res, fmt.Errorf("setpriority %d: %w", o.nice, err)
		}
	}
	_, lat, err = ringPhase("ring-lat", o)
	if o.nice != 0 {
		unix.Setpriority(unix.PRIO_PROCESS, 0, 0)
	}
	if err != nil {
		return res, err
	}
	res.RingP10ns, res.RingP50ns, res.RingP99ns = ringPct(lat, 0.10), ringPct(lat, 0.50), ringPct(lat, 0.99)
	if _, lat, err = ringUDSPhase("uds-lat", o); err != nil {
		return res, err
	}
	res.UDSP50ns, res.UDSP99ns = ringPct(lat, 0.50), ringPct(lat, 0.99)
	var wakeups uint64
	if _, lat, err = ringPhaseWake(o, &wakeups); err != nil {
		return res, err
	}
	res.RingWakeP50ns, res.RingWakeP99ns = ringPct(lat, 0.50), ringPct(lat, 0.99)
	res.RingWakeups = wakeups
	if _, lat, err = ringPhasePingPong("ring-pingpong-same", o); err != nil {
		return res, err
	}
	res.PingPongSameCPUP50ns, res.PingPongSameCPUP99ns = ringPct(lat, 0.50), ringPct(lat, 0.99)
	if _, lat, err = ringPhasePingPong("ring-pingpong-cross", o); err != nil {
		return res, err
	}
	res.PingPongCrossCPUP50ns, res.PingPongCrossCPUP99ns = ringPct(lat, 0.50), ringPct(lat, 0.99)
	res.ThroughputX = ringRound3(res.RingMsgsPerS / res.UDSMsgsPerS)
	res.P50Ratio = ringRound3(float64(res.RingP50ns) / float64(res.UDSP50ns))
	res.WakeP50Ratio = ringRound3(float64(res.RingWakeP50ns) / float64(res.UDSP50ns))
	res.RingMsgsPerS, res.UDSMsgsPerS = float64(int64(res.RingMsgsPerS)), float64(int64(res.UDSMsgsPerS))
	return res, nil
}

func ringRound3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func ringPct(v []int64, q float64) int64 {
	if len(v) == 0 {
		return 0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[int(q*float64(len(v)-1))]
}

// spawn starts `ndpperf ring -child=phase` with the given extra files as fd 3, 4, ...
func ringSpawn(phase string, o ringOpts, files ...*os.File) (*exec.Cmd, error) {
	self, err := os.Executable() // not os.Args[0]: it may be relative or replaced on disk
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "ring", "-child="+phase,
		"-n="+strconv.Itoa(o.n), "-uds-n="+strconv.Itoa(o.udsN), "-samples="+strconv.Itoa(o.samples),
		"-gap="+o.gap.String(), "-slots="+strconv.Itoa(int(o.slots)), "-nice="+strconv.Itoa(o.nice))
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Start the child from a thread allowed on every CPU: a child inherits
	// the affinity of the thread that forks it, and this goroutine's thread
	// is pinned to CPU 0 (the child would see NumCPU() == 1 and could not
	// pin itself to CPU 1).
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		var all unix.CPUSet
		for i := 0; i < runtime.NumCPU(); i++ {
			all.Set(i)
		}
		unix.SchedSetaffinity(0, &all)
		errc <- cmd.Start()
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	for _, f := range files {
		f.Close()
	}
	return cmd, nil
}

// socketPair returns a SOCK_SEQPACKET pair: ours as a *net.UnixConn (for the
// control channel) or raw fd, and the child's as an *os.File.
func ringSocketPair() (int, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	return fds[0], os.NewFile(uintptr(fds[1]), "child-sock"), nil
}

func ringUnixConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "ctl")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// ringSetup creates the region the ring phases use and starts the child.
func ringSetup(phase string, o ringOpts) (*ring.DaemonEnd, *ring.Region, *net.UnixConn, *exec.Cmd, func(), error) {
	buf, err := ring.NewBufferArea(1, 2048)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	region, err := ring.CreateRegion(ring.RegionConfig{Sockets: 1, SocketSlots: o.slots}, 1,
		ring.BufferGeometry{FrameSize: 2048, Frames: 1})
	if err != nil {
		buf.Close()
		return nil, nil, nil, nil, nil, err
	}
	cleanup := func() { region.Close(); buf.Close() }
	end, err := region.DaemonEnd()
	if err != nil {
		cleanup()
		return nil, nil, nil, nil, nil, err
	}
	ours, theirs, err := ringSocketPair()
	if err != nil {
		cleanup()
		return nil, nil, nil, nil, nil, err
	}
	conn, err := ringUnixConn(ours)
	if err != nil {
		cleanup()
		return nil, nil, nil, nil, nil, err
	}
	cmd, err := ringSpawn(phase, o, theirs)
	if err != nil {
		conn.Close()
		cleanup()
		return nil, nil, nil, nil, nil, err
	}
	if err := ring.SendAttachment(conn, region.Attachment(buf.FD())); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		conn.Close()
		cleanup()
		return nil, nil, nil, nil, nil, err
	}
	return end, region, conn, cmd, func() { conn.Close(); cleanup() }, nil
}

// ringAwaitReady blocks until the child says it is ready, then tells it to
// go; on failure it kills and reaps the child.
func ringAwaitReady(conn *net.UnixConn, cmd *exec.Cmd) error {
	var b [8]byte
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := conn.Read(b[:])
	if err != nil {
		err = fmt.Errorf("child never became ready: %w", err)
	} else {
		conn.SetReadDeadline(time.Time{})
		_, err = conn.Write([]byte("go"))
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
	return err
}

// ringPhase runs ring-thru or ring-lat (parent spinning).
func ringPhase(phase string, o ringOpts) (float64, []int64, error) {
	end, _, conn, cmd, cleanup, err := ringSetup(phase, o)
	if err != nil {
		return 0, nil, err
	}
	defer cleanup()
	if err := ringAwaitReady(conn, cmd); err != nil {
		return 0, nil, err
	}
	rx := end.Sockets[0].TX
	batch := make([]ring.Desc, 256)
	var rate float64
	var lat []int64
	deadline := time.Now().Add(5 * time.Minute)
	switch phase {
	case "ring-thru":
		idle := 0
		start := time.Now()
		for got := 0; got < o.n; {
			n, err := rx.Consume(batch)
			if err != nil {
				return 0, nil, err
			}
			for i := range batch[:n] {
				if batch[i].Aux != uint64(got+i) {
					return 0, nil, fmt.Errorf("descriptor %d carries sequence %d", got+i, batch[i].Aux)
				}
			}
			got += n
			if n > 0 {
				idle = 0
				end.Notifier.Notify() // the producer may sleep on a full ring
				continue
			}
			if idle++; idle > ringSpinLimit {
				idle = 0
				if err := end.Waiter.Wait(rx.Pending, time.Second); err != nil {
					return 0, nil, err
				}
				if time.Now().After(deadline) {
					return 0, nil, errors.New("ring-thru: timeout")
				}
			}
		}
		rate = float64(o.n) / time.Since(start).Seconds()
	case "ring-lat":
		lat = make([]int64, 0, o.samples)
		for empty := 0; len(lat) < o.samples; {
			n, err := rx.Consume(batch[:1])
			if err != nil {
				return 0, nil, err
			}
			if n == 1 {
				lat = append(lat, monoNow()-int64(batch[0].Aux))
				continue
			}
			// A dead child must not leave us spinning forever.
			if empty++; empty&(1<<20-1) == 0 && time.Now().After(deadline) {
				return 0, nil, errors.New("ring-lat: timeout (child gone?)")
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, nil, fmt.Errorf("child %s: %w", phase, err)
	}
	return rate, lat, nil
}

// ringPhaseWake runs ring-wake: the parent sleeps on its eventfd whenever
// the ring is empty.
func ringPhaseWake(o ringOpts, wakeups *uint64) (float64, []int64, error) {
	end, _, conn, cmd, cleanup, err := ringSetup("ring-wake", o)
	if err != nil {
		return 0, nil, err
	}
	defer cleanup()
	if err := ringAwaitReady(conn, cmd); err != nil {
		return 0, nil, err
	}
	rx := end.Sockets[0].TX
	batch := make([]ring.Desc, 1)
	lat := make([]int64, 0, o.samples)
	deadline := time.Now().Add(5 * time.Minute)
	for len(lat) < o.samples {
		if time.Now().After(deadline) {
			return 0, nil, errors.New("ring-wake: timeout (child gone?)")
		}
		n, err := rx.Consume(batch)
		if err != nil {
			return 0, nil, err
		}
		if n == 1 {
			lat = append(lat, monoNow()-int64(batch[0].Aux))
			end.Notifier.Notify() // the child may sleep too (it does not, it spins)
			continue
		}
		if err := end.Waiter.Wait(rx.Pending, 10*time.Second); err != nil {
			return 0, nil, err
		}
	}
	// The child reports how many eventfd writes (syscalls) its Notifier made.
	var b [24]byte
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := conn.Read(b[:])
	if err != nil {
		return 0, nil, fmt.Errorf("ring-wake: child report: %w", err)
	}
	if *wakeups, err = strconv.ParseUint(string(b[:n]), 10, 64); err != nil {
		return 0, nil, fmt.Errorf("ring-wake: child report %q: %w", b[:n], err)
	}
	if err := cmd.Wait(); err != nil {
		return 0, nil, fmt.Errorf("child ring-wake: %w", err)
	}
	return 0, lat, nil
}

// ringPhasePingPong runs ring-pingpong-same or -cross: the parent produces
// on RX(0) and the child answers on TX(0), each sleeping on its eventfd
// until the other's descriptor is there. Round-trip times.
func ringPhasePingPong(phase string, o ringOpts) (float64, []int64, error) {
	end, _, conn, cmd, cleanup, err := ringSetup(phase, o)
	if err != nil {
		return 0, nil, err
	}
	defer cleanup()
	if err := ringAwaitReady(conn, cmd); err != nil {
		return 0, nil, err
	}
	out, in := end.Sockets[0].RX, end.Sockets[0].TX
	one := make([]ring.Desc, 1)
	lat := make([]int64, 0, o.samples)
	deadline := time.Now().Add(5 * time.Minute)
	for i := 0; i < o.samples; i++ {
		if time.Now().After(deadline) {
			return 0, nil, errors.New(phase + ": timeout (child gone?)")
		}
		start := monoNow()
		one[0] = ring.Desc{Frame: ring.NoFrame, Aux: uint64(i)}
		if n, err := out.Produce(one); n != 1 || err != nil {
			return 0, nil, fmt.Errorf("produce: %d, %v", n, err)
		}
		if _, err := end.Notifier.Notify(); err != nil {
			return 0, nil, err
		}
		for !in.Pending() {
			if err := end.Waiter.Wait(in.Pending, 10*time.Second); err != nil {
				return 0, nil, err
			}
		}
		if n, err := in.Consume(one); n != 1 || err != nil || one[0].Aux != uint64(i) {
			return 0, nil, fmt.Errorf("answer %d: %d, %v, %d", i, n, err, one[0].Aux)
		}
		lat = append(lat, monoNow()-start)
	}
	if err := cmd.Wait(); err != nil {
		return 0, nil, fmt.Errorf("child %s: %w", phase, err)
	}
	return 0, lat, nil
}

// udsPhase runs uds-thru or uds-lat over a SOCK_SEQPACKET pair (fd 4 in the child).
func ringUDSPhase(phase string, o ringOpts) (float64, []int64, error) {
	ctlOurs, ctlTheirs, err := ringSocketPair()
	if err != nil {
		return 0, nil, err
	}
	conn, err := ringUnixConn(ctlOurs)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	data, dataTheirs, err := ringSocketPair()
	if err != nil {
		return 0, nil, err
	}
	defer unix.Close(data)
	cmd, err := ringSpawn(phase, o, ctlTheirs, dataTheirs)
	if err != nil {
		return 0, nil, err
	}
	if err := ringAwaitReady(conn, cmd); err != nil {
		return 0, nil, err
	}
	var msg [ring.DescSize]byte
	var rate float64
	var lat []int64
	switch phase {
	case "uds-thru":
		start := time.Now()
		for got := 0; got < o.udsN; got++ {
			n, err := unix.Read(data, msg[:])
			if err != nil || n != len(msg) {
				return 0, nil, fmt.Errorf("uds read: %d, %v", n, err)
			}
			if binary.LittleEndian.Uint64(msg[16:]) != uint64(got) {
				return 0, nil, fmt.Errorf("message %d out of order", got)
			}
		}
		rate = float64(o.udsN) / time.Since(start).Seconds()
	case "uds-lat":
		lat = make([]int64, 0, o.samples)
		for len(lat) < o.samples {
			n, err := unix.Read(data, msg[:])
			if err != nil || n != len(msg) {
				return 0, nil, fmt.Errorf("uds read: %d, %v", n, err)
			}
			lat = append(lat, monoNow()-int64(binary.LittleEndian.Uint64(msg[16:])))
			if _, err := unix.Write(data, msg[:1]); err != nil {
				return 0, nil, err
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, nil, fmt.Errorf("child %s: %w", phase, err)
	}
	return rate, lat, nil
}

// ringChild is the producer side of every phase, pinned to CPU 1.
func ringChild(phase string, o ringOpts) error {
	if phase == "ring-pingpong-same" {
		ringPin(0)
	} else {
		ringPin(1)
	}
	ctl, err := ringUnixConn(3)
	if err != nil {
		return err
	}
	defer ctl.Close()
	ready := func() error {
		if _, err := ctl.Write([]byte("ready")); err != nil {
			return err
		}
		var b [8]byte
		_, err := ctl.Read(b[:])
		return err
	}
	switch phase {
	case "uds-thru", "uds-lat":
		return ringUDSChild(phase, o, ready)
	}
	att, err := ring.RecvAttachment(ctl)
	if err != nil {
		return err
	}
	unix.Close(att.Buffer)
	region, err := ring.OpenRegion(att)
	if err != nil {
		return err
	}
	defer region.Close()
	end, err := region.AppEnd()
	if err != nil {
		return err
	}
	tx := end.Sockets[0].TX
	if phase == "ring-lat" && o.nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, o.nice); err != nil {
			return fmt.Errorf("setpriority %d: %w", o.nice, err)
		}
	}
	if err := ready(); err != nil {
		return err
	}
	switch phase {
	case "ring-thru":
		batch := make([]ring.Desc, 64)
		idle := 0
		for seq := 0; seq < o.n; {
			k := min(len(batch), o.n-seq)
			for i := range batch[:k] {
				batch[i] = ring.Desc{Frame: ring.NoFrame, Op: ring.OpData, Aux: uint64(seq + i)}
			}
			n, err := tx.Produce(batch[:k])
			if err != nil {
				return err
			}
			seq += n
			if n > 0 {
				idle = 0
				end.Notifier.Notify() // the consumer may sleep on an empty ring
				continue
			}
			if idle++; idle > ringSpinLimit {
				idle = 0
				if err := end.Waiter.Wait(tx.HasSpace, time.Second); err != nil {
					return err
				}
			}
		}
	case "ring-lat", "ring-wake":
		one := make([]ring.Desc, 1)
		for i := 0; i < o.samples; i++ {
			ringSpin(o.gap)
			one[0] = ring.Desc{Frame: ring.NoFrame, Aux: uint64(monoNow())}
			if n, err := tx.Produce(one); n != 1 || err != nil {
				return fmt.Errorf("produce: %d, %v", n, err)
			}
			if phase == "ring-wake" {
				if _, err := end.Notifier.Notify(); err != nil {
					return err
				}
			}
			// Spin until the parent consumed it, so samples never queue.
			for {
				free, err := tx.Free()
				if err != nil {
					return err
				}
				if free == int(o.slots) {
					break
				}
			}
		}
	case "ring-pingpong-same", "ring-pingpong-cross":
		rx, one := end.Sockets[0].RX, make([]ring.Desc, 1)
		for i := 0; i < o.samples; i++ {
			for !rx.Pending() {
				if err := end.Waiter.Wait(rx.Pending, 10*time.Second); err != nil {
					return err
				}
			}
			if n, err := rx.Consume(one); n != 1 || err != nil {
				return fmt.Errorf("consume: %d, %v", n, err)
			}
			if n, err := tx.Produce(one); n != 1 || err != nil {
				return fmt.Errorf("produce: %d, %v", n, err)
			}
			if _, err := end.Notifier.Notify(); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown phase %q", phase)
	}
	if phase == "ring-wake" {
		_, err := ctl.Write([]byte(strconv.FormatUint(end.Notifier.Wakeups.Load(), 10)))
		return err
	}
	return nil
}

func ringUDSChild(phase string, o ringOpts, ready func() error) error {
	data := 4
	if err := ready(); err != nil {
		return err
	}
	var msg [ring.DescSize]byte
	switch phase {
	case "uds-thru":
		for seq := 0; seq < o.udsN; seq++ {
			binary.LittleEndian.PutUint64(msg[16:], uint64(seq))
			if _, err := unix.Write(data, msg[:]); err != nil {
				return err
			}
		}
	case "uds-lat":
		var ack [8]byte
		for i := 0; i < o.samples; i++ {
			ringSpin(o.gap)
			binary.LittleEndian.PutUint64(msg[16:], uint64(monoNow()))
			if _, err := unix.Write(data, msg[:]); err != nil {
				return err
			}
			if _, err := unix.Read(data, ack[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// spinFor busy-waits d on the monotonic clock (no sleep: the point is to
// leave the receiver alone, not to give up the CPU).
func ringSpin(d time.Duration) {
	for t := monoNow() + d.Nanoseconds(); monoNow() < t; {
	}
}

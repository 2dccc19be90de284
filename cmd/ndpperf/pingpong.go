package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"golang.org/x/sys/unix"
)

// pingpong: round-trip latency between two namespaces, measured for raw
// AF_XDP (our afxdp package), optionally the same through
// github.com/asavie/xdp, and kernel UDP sockets, side by side in one run.
//
// Raw ping-pong: the client builds an Ethernet/IPv4/UDP frame, timestamps,
// transmits it and spins on its RX ring; the echo side spins on its RX ring,
// swaps MACs, IPs and ports in place and transmits the same frame back.
//
// Every transport gets its own veth pair between the same two namespaces and
// stays open for the whole run; the measurement is split into rounds and the
// transports take turns within each round (order rotated per round), so
// background load on the shared machine hits them alike. The client side of
// every transport runs on one goroutine locked to an OS thread pinned to
// CPU 0; each transport's echo runs on its own locked goroutine pinned to
// CPU 1 and spins only during its turn.

func init() {
	register(&subcommand{
		name:    "pingpong",
		summary: "round-trip latency: raw AF_XDP vs asavie/xdp vs kernel UDP over a veth testbed (root)",
		run:     runPingpong,
	})
}

const (
	ppXDPPort    = 9900
	ppUDPPort    = 9901
	ppClientPort = 40001
)

// errLost is a round trip that timed out.
var errLost = errors.New("no reply")

// ppEnd is one transport: both ends of the ping-pong.
type ppEnd interface {
	name() string
	mode() string
	// echo answers until stop is set (on the echo thread).
	echo(stop *atomic.Bool) error
	// roundTrip sends one message and waits for the answer (on the client
	// thread); errLost after timeout.
	roundTrip(timeout time.Duration) (time.Duration, error)
	close()
}

// ppClients is implemented by transports with several concurrent clients
// (rpc --conn persistent --clients N): client i makes its round trips on
// its own connection, from its own goroutine, and the echo serves every
// connection at once.
type ppClients interface {
	clients() int
	roundTripOn(i int, timeout time.Duration) (time.Duration, error)
}

// ppTurn is implemented by transports that make a whole turn's exchanges
// themselves on the client thread (the N-way raw AF_XDP floor, xdpFloor:
// one pinned thread keeps its N exchanges in flight): warm unmeasured, then
// per measured.
type ppTurn interface {
	turn(warm, per int, timeout time.Duration) (rtts []time.Duration, lost int, err error)
}

// ppSettle is implemented by transports whose stacks move only while a
// call waits on them (ndp's new-connection RPC, NoBackgroundPoller): settle
// drives them after the turn, so that what its last exchange left to send
// (the client's ACK of the last response, which waits for the next call's
// transmit) leaves now rather than at the transport's next turn, after the
// other transports' turns, when the server's RTO for that response had
// long fired.
type ppSettle interface {
	settle()
}

// ppCPUElsewhere is implemented by transports whose work runs partly in
// processes of their own (ndpd): their CPU time so far, added to this
// process's over the transport's turns.
type ppCPUElsewhere interface {
	cpuElsewhere() cpuTime
}

// turnCPU is the CPU time so far of this process and of e's own processes.
func turnCPU(e ppEnd) cpuTime {
	c := processCPU()
	if o, ok := e.(ppCPUElsewhere); ok {
		c = c.add(o.cpuElsewhere())
	}
	return c
}

type pingpongOpts struct {
	size    int // UDP payload bytes
	n       int
	warmup  int
	rounds  int
	timeout time.Duration
	attach  afxdp.AttachMode
}

func runPingpong(args []string) error {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	transports := fs.String("transports", "xdp,udp", "comma-separated: xdp (afxdp), asavie (github.com/asavie/xdp), udp (blocking kernel sockets), udpspin (kernel sockets, non-blocking busy poll)")
	size := fs.Int("size", 1024, "UDP payload bytes per message")
	n := fs.Int("n", 20000, "measured round trips per transport")
	warmup := fs.Int("warmup", 2000, "unmeasured round trips per transport before measuring (plus 200 at each turn)")
	rounds := fs.Int("rounds", 10, "turns per transport the measurement is split into")
	asJSON := fs.Bool("json", false, "print JSON")
	attach := fs.String("attach", "auto", "XDP attach mode for the xdp transport: auto, native or generic")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := parseAttach(*attach)
	if err != nil {
		return err
	}
	if *size < 8 || *size > 1472 {
		return fmt.Errorf("--size %d: want 8..1472 (one 1500-MTU frame)", *size)
	}
	if *n < 1 || *rounds < 1 || *rounds > *n {
		return errors.New("--n and --rounds must be positive, rounds <= n")
	}
	names := strings.Split(*transports, ",")
	for _, tr := range names {
		switch tr {
		case "xdp", "asavie", "udp", "udpspin":
		default:
			return fmt.Errorf("unknown transport %q", tr)
		}
	}
	if err := requireRoot(); err != nil {
		return err
	}
	opts := pingpongOpts{size: *size, n: *n, warmup: *warmup, rounds: *rounds, timeout: time.Second, attach: mode}
	tb, err := newTestbed()
	if err != nil {
		return err
	}
	defer tb.Close()
	nsA, err := tb.NewNamespace()
	if err != nil {
		return err
	}
	nsB, err := tb.NewNamespace()
	if err != nil {
		return err
	}
	var ends []ppEnd
	defer func() {
		for _, e := range ends {
			e.close()
		}
	}()
	for i, tr := range names {
		v, err := tb.NewVeth(nsA, nsB, testbed.VethConfig{
			AddrA: fmt.Sprintf("10.201.%d.1/24", i), AddrB: fmt.Sprintf("10.201.%d.2/24", i)})
		if err != nil {
			return err
		}
		pair := &testbed.Pair{A: nsA, B: nsB, Veth: v}
		var e ppEnd
		switch tr {
		case "xdp":
			e, err = newXDPPingpong(pair, opts)
		case "asavie":
			e, err = newAsaviePingpong(pair, opts)
		case "udp":
			e, err = newUDPPingpong(pair, opts, false)
		case "udpspin":
			e, err = newUDPPingpong(pair, opts, true)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tr, err)
		}
		ends = append(ends, e)
	}
	results, err := measurePingpong(ends, opts)
	if err != nil {
		return err
	}
	out := struct {
		Results []latencyResult    `json:"results"`
		Ratios  map[string]float64 `json:"ratios,omitempty"`
		Size    int                `json:"size"`
		Rounds  int                `json:"rounds"`
		CPUs    int                `json:"cpus"`
	}{Results: results, Size: *size, Rounds: *rounds, CPUs: runtime.NumCPU(), Ratios: map[string]float64{}}
	by := map[string]latencyResult{}
	for _, r := range results {
		by[r.Transport] = r
	}
	if x, ok := by["xdp"]; ok {
		for _, other := range []string{"udp", "udpspin", "asavie"} {
			if o, ok := by[other]; ok && o.P50us > 0 && o.P99us > 0 {
				out.Ratios["xdp_p50_over_"+other+"_p50"] = round2(x.P50us / o.P50us)
				out.Ratios["xdp_p99_over_"+other+"_p99"] = round2(x.P99us / o.P99us)
			}
		}
	}
	if *asJSON {
		return printJSON(out)
	}
	fmt.Printf("%-8s %9s %9s %9s %9s %7s  %s\n", "transport", "p50_us", "p90_us", "p99_us", "p999_us", "lost", "mode")
	for _, r := range results {
		fmt.Printf("%-8s %9.2f %9.2f %9.2f %9.2f %7d  %s\n", r.Transport, r.P50us, r.P90us, r.P99us, r.P999us, r.Lost, r.Mode)
	}
	for k, v := range out.Ratios {
		fmt.Printf("%s = %.2f\n", k, v)
	}
	return nil
}

// echoCtl runs one transport's echo on a pinned thread, during its turns.
type echoCtl struct {
	start   chan struct{}
	running chan struct{} // the echo's thread has its turn's start
	done    chan error
	stop    atomic.Bool
}

func measurePingpong(ends []ppEnd, o pingpongOpts) ([]latencyResult, error) {
	cpuClient, cpuEcho := cpuPair()
	ctls := make([]*echoCtl, len(ends))
	for i, e := range ends {
		c := &echoCtl{start: make(chan struct{}), running: make(chan struct{}), done: make(chan error)}
		ctls[i] = c
		go func() {
			err := lockAndPin(cpuEcho)
			for range c.start {
				c.running <- struct{}{}
				if err == nil {
					err = e.echo(&c.stop)
				}
				c.done <- err
			}
		}()
	}
	defer func() {
		for _, c := range ctls {
			close(c.start)
		}
	}()
	type acc struct {
		rtts []time.Duration
		lost int
		// Over the counted turns (all but the first, see below):
		cpu       cpuTime
		wall      time.Duration
		exchanges int           // warmup included
		made      []int         // per client of several: round trips made
		rttSum    time.Duration // of the measured ones
		rttN      int
	}
	accs := make([]acc, len(ends))
	for i := range accs {
		accs[i].rtts = make([]time.Duration, 0, o.n)
	}
	var cerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cerr = lockAndPin(cpuClient); cerr != nil {
			return
		}
		for r := 0; r < o.rounds; r++ {
			per := o.n / o.rounds
			if r == o.rounds-1 {
				per = o.n - per*(o.rounds-1)
			}
			warm := 200
			if r == 0 {
				warm = o.warmup
			}
			for k := range ends {
				i := (k + r) % len(ends) // rotate the order every round
				c := ctls[i]
				c.stop.Store(false)
				c.start <- struct{}{}
				// The turn starts once the echo runs: a locked goroutine
				// readied while both Ps spin or sit in syscalls could wait
				// up to tens of ms for one (after an ndp turn the floor's
				// first exchange did), which is the harness's, not the
				// transport's.
				<-c.running
				cpu0, wall0, measured0 := turnCPU(ends[i]), time.Now(), len(accs[i].rtts)
				serial := warm + per
				var rtts []time.Duration
				var lost int
				var err error
				if m, ok := ends[i].(ppTurn); ok {
					serial = 0
					rtts, lost, err = m.turn(warm, per, o.timeout)
				} else if m, ok := ends[i].(ppClients); ok && m.clients() > 1 {
					serial = 0
					var made []int
					rtts, lost, made, err = roundTripsConcurrent(m, warm, per, o.timeout)
					if r > 0 || o.rounds == 1 {
						accs[i].made = addMade(accs[i].made, made)
					}
				}
				accs[i].rtts = append(accs[i].rtts, rtts...)
				accs[i].lost += lost
				if err != nil {
					cerr = fmt.Errorf("%s: %w", ends[i].name(), err)
				}
				for j := 0; j < serial; j++ {
					rtt, err := ends[i].roundTrip(o.timeout)
					if errors.Is(err, errLost) {
						accs[i].lost++
						continue
					}
					if err != nil {
						cerr = fmt.Errorf("%s: %w", ends[i].name(), err)
					}
					if cerr != nil {
						break
					}
					if j >= warm {
						accs[i].rtts = append(accs[i].rtts, rtt)
					}
				}
				c.stop.Store(true)
				if err := <-c.done; err != nil && cerr == nil {
					cerr = fmt.Errorf("%s echo: %w", ends[i].name(), err)
				}
				if st, ok := ends[i].(ppSettle); ok {
					st.settle()
				}
				// CPU and wall time are counted from the second round on
				// (the first turn carries the whole warmup, from cold), or
				// over the one round there is.
				if r > 0 || o.rounds == 1 {
					a := &accs[i]
					a.cpu = a.cpu.add(turnCPU(ends[i]).sub(cpu0))
					a.wall += time.Since(wall0)
					a.exchanges += warm + per
					for _, rtt := range a.rtts[measured0:] {
						a.rttSum += rtt
					}
					a.rttN += len(a.rtts) - measured0
				}
				if cerr != nil {
					return
				}
			}
		}
	}()
	<-done
	if cerr != nil {
		return nil, cerr
	}
	res := make([]latencyResult, len(ends))
	for i, e := range ends {
		res[i] = summarize(e.name(), accs[i].rtts, accs[i].lost, e.mode())
		a := accs[i]
		res[i].perExchange(a.cpu, a.wall, a.exchanges, a.rttSum, a.rttN)
		res[i].clientShares(a.made)
	}
	return res, nil
}

// addMade adds per-client round-trip counts.
func addMade(sum, made []int) []int {
	if sum == nil {
		sum = make([]int, len(made))
	}
	for i, n := range made {
		sum[i] += n
	}
	return sum
}

// roundTripsConcurrent runs warm+per round trips over m's clients at once,
// each client on its own goroutine, and returns the measured (post-warmup)
// times of all of them and how many round trips each client made. The
// clients start together (each goroutine parks until all have started: a
// goroutine started while the others spin could otherwise wait for a P for
// tens of ms) and draw their round trips from one pool until it is empty,
// so all of them stay busy until the turn's last few exchanges: with a
// fixed share each, a client that got more of the CPUs finished its share
// early and the rest ran with fewer exchanges in flight (ndp's 4 clients
// overlapped 1.8-2.2 on average). The first warm drawn are not measured.
func roundTripsConcurrent(m ppClients, warm, per int, timeout time.Duration) ([]time.Duration, int, []int, error) {
	k := m.clients()
	type share struct {
		rtts []time.Duration
		made int
		lost int
		err  error
	}
	shares := make([]share, k)
	var next atomic.Int64 // round trips drawn from the pool
	total := int64(warm + per)
	var ready sync.WaitGroup
	ready.Add(k)
	start := make(chan struct{})
	done := make(chan struct{}, k)
	for i := range shares {
		sh := &shares[i]
		sh.rtts = make([]time.Duration, 0, per/k+1)
		go func() {
			defer func() { done <- struct{}{} }()
			ready.Done()
			<-start
			for {
				j := next.Add(1) - 1
				if j >= total {
					return
				}
				rtt, err := m.roundTripOn(i, timeout)
				sh.made++
				if errors.Is(err, errLost) {
					sh.lost++
					continue
				}
				if err != nil {
					sh.err = fmt.Errorf("client %d: %w", i, err)
					next.Store(total) // the others stop too
					return
				}
				if j >= int64(warm) {
					sh.rtts = append(sh.rtts, rtt)
				}
			}
		}()
	}
	ready.Wait()
	close(start)
	for range shares {
		<-done
	}
	var rtts []time.Duration
	made := make([]int, k)
	lost := 0
	var err error
	for i, sh := range shares {
		rtts = append(rtts, sh.rtts...)
		made[i] = sh.made
		lost += sh.lost
		if err == nil {
			err = sh.err
		}
	}
	return rtts, lost, made, err
}

// ppFrame is the client's frame template (A -> B). Both ports are the NDP
// port, so the swapped reply also matches the client side's steering program.
func ppFrame(pair *testbed.Pair, port uint16) testbed.UDPFrame {
	v := pair.Veth
	return testbed.UDPFrame{SrcMAC: v.A.MAC, DstMAC: v.B.MAC, SrcIP: v.A.Addr.Addr(), DstIP: v.B.Addr.Addr(),
		SrcPort: port, DstPort: port}
}

// xdpPingpong is the raw ping-pong over two afxdp Ports.
type xdpPingpong struct {
	pa, pb *afxdp.Port
	seq    uint64
	tmpl   []byte
	tx, rx []afxdp.Desc
	erx    []afxdp.Desc
}

func newXDPPingpong(pair *testbed.Pair, o pingpongOpts) (*xdpPingpong, error) {
	cfg := afxdp.Config{UDPPort: ppXDPPort, NumFrames: 1024, RingSize: 256, Attach: o.attach}
	x := &xdpPingpong{tx: make([]afxdp.Desc, 1), rx: make([]afxdp.Desc, 8), erx: make([]afxdp.Desc, 64)}
	cfg.Interface = pair.Veth.A.Name
	if err := pair.A.Do(func() (err error) { x.pa, err = afxdp.Open(cfg); return err }); err != nil {
		return nil, err
	}
	cfg.Interface = pair.Veth.B.Name
	if err := pair.B.Do(func() (err error) { x.pb, err = afxdp.Open(cfg); return err }); err != nil {
		x.pa.Close()
		return nil, err
	}
	f := ppFrame(pair, ppXDPPort)
	x.tmpl = make([]byte, testbed.UDPHeaderLen+o.size)
	f.Build(x.tmpl, make([]byte, o.size))
	return x, nil
}

func (x *xdpPingpong) name() string { return "xdp" }

func (x *xdpPingpong) mode() string {
	in := x.pa.Info()
	return fmt.Sprintf("afxdp zerocopy=%v attach=%v need_wakeup=%v", in.ZeroCopy, in.Attach, in.NeedWakeup)
}

func (x *xdpPingpong) echo(stop *atomic.Bool) error {
	u, q := x.pb.UMEM(), x.pb.Queues()[0]
	for !stop.Load() {
		n := q.Receive(x.erx)
		if n == 0 {
			q.Transmit(nil) // re-kick after a transient sendto error
			continue
		}
		for _, d := range x.erx[:n] {
			testbed.SwapUDP(u.Bytes(d))
		}
		for sent := 0; sent < n; {
			k, err := q.Transmit(x.erx[sent:n])
			if err != nil {
				return err
			}
			sent += k
		}
	}
	return nil
}

func (x *xdpPingpong) roundTrip(timeout time.Duration) (time.Duration, error) {
	u, q := x.pa.UMEM(), x.pa.Queues()[0]
	for u.Alloc(x.tx) != 1 {
		q.Transmit(nil) // reap completions
	}
	buf := u.Buffer(x.tx[0])
	x.tx[0].Len = uint32(copy(buf, x.tmpl))
	x.seq++
	setSeq(buf[testbed.UDPHeaderLen:], x.seq) // payload only: rebuild the UDP checksum
	fixUDPChecksum(buf[:x.tx[0].Len])
	t0 := time.Now()
	if _, err := q.Transmit(x.tx); err != nil {
		return 0, err
	}
	for {
		got := q.Receive(x.rx)
		if got > 0 {
			rtt := time.Since(t0)
			match := false
			for _, d := range x.rx[:got] {
				match = match || getSeq(u.Bytes(d)[testbed.UDPHeaderLen:]) == x.seq
			}
			if _, err := u.Release(x.rx[:got]); err != nil {
				return 0, err
			}
			if match {
				return rtt, nil
			}
			// A late reply to an earlier, timed-out round trip: keep waiting.
		}
		if time.Since(t0) > timeout {
			return 0, errLost
		}
		// Re-kick if a transient sendto error left the frame on the TX ring
		// (no syscall when the kernel took it).
		if _, err := q.Transmit(nil); err != nil {
			return 0, err
		}
	}
}

func (x *xdpPingpong) close() {
	x.pa.Close()
	x.pb.Close()
}

// udpPingpong measures kernel UDP sockets: blocking read/write on locked
// threads, or (spin) non-blocking reads in a busy loop.
type udpPingpong struct {
	spin     bool
	seq      uint64
	cfd, efd int
	msg, buf []byte
	ebuf     []byte
}

func newUDPPingpong(pair *testbed.Pair, o pingpongOpts, spin bool) (*udpPingpong, error) {
	v := pair.Veth
	aAddr, bAddr := v.A.Addr.Addr(), v.B.Addr.Addr()
	u := &udpPingpong{spin: spin, cfd: -1, efd: -1, msg: make([]byte, o.size), buf: make([]byte, 2048), ebuf: make([]byte, 2048)}
	if err := pair.B.Do(func() (err error) {
		u.efd, err = udpSocket(bAddr, ppUDPPort, aAddr, ppClientPort)
		return err
	}); err != nil {
		return nil, err
	}
	if err := pair.A.Do(func() (err error) {
		u.cfd, err = udpSocket(aAddr, ppClientPort, bAddr, ppUDPPort)
		return err
	}); err != nil {
		u.close()
		return nil, err
	}
	// A blocking echo read wakes every 10 ms to see stop.
	tv := unix.Timeval{Usec: 10_000}
	if err := unix.SetsockoptTimeval(u.efd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		u.close()
		return nil, err
	}
	tvc := unix.NsecToTimeval(o.timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(u.cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tvc); err != nil {
		u.close()
		return nil, err
	}
	return u, nil
}

func (u *udpPingpong) name() string {
	if u.spin {
		return "udpspin"
	}
	return "udp"
}

func (u *udpPingpong) mode() string {
	if u.spin {
		return "kernel UDP, MSG_DONTWAIT busy poll"
	}
	return "kernel UDP, blocking recvfrom"
}

func (u *udpPingpong) flags() int {
	if u.spin {
		return unix.MSG_DONTWAIT
	}
	return 0
}

func (u *udpPingpong) echo(stop *atomic.Bool) error {
	for !stop.Load() {
		n, _, err := unix.Recvfrom(u.efd, u.ebuf, u.flags())
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		if _, err := unix.Write(u.efd, u.ebuf[:n]); err != nil {
			return err
		}
	}
	return nil
}

func (u *udpPingpong) roundTrip(timeout time.Duration) (time.Duration, error) {
	u.seq++
	setSeq(u.msg, u.seq)
	t0 := time.Now()
	if _, err := unix.Write(u.cfd, u.msg); err != nil {
		return 0, err
	}
	for {
		n, _, err := unix.Recvfrom(u.cfd, u.buf, u.flags())
		switch {
		case err == nil:
			if n >= 8 && getSeq(u.buf) == u.seq {
				return time.Since(t0), nil
			}
			// late reply to a timed-out round trip: keep waiting
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			if !u.spin || time.Since(t0) > timeout {
				return 0, errLost
			}
		default:
			return 0, err
		}
	}
}

func (u *udpPingpong) close() {
	if u.cfd >= 0 {
		unix.Close(u.cfd)
	}
	if u.efd >= 0 {
		unix.Close(u.efd)
	}
}

// udpSocket returns a UDP socket bound to local:lport and connected to
// remote:rport, in the calling thread's namespace.
func udpSocket(local netip.Addr, lport int, remote netip.Addr, rport int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: local.As4(), Port: lport}); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("bind", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: remote.As4(), Port: rport}); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("connect", err)
	}
	return fd, nil
}

// setSeq and getSeq put a round trip's sequence number in the first 8
// payload bytes, so a late reply is never taken for the current one.
func setSeq(b []byte, seq uint64) { binary.LittleEndian.PutUint64(b, seq) }

func getSeq(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// fixUDPChecksum recomputes the UDP checksum of an IPv4/UDP frame after
// its payload changed.
func fixUDPChecksum(frame []byte) {
	udp := frame[34:]
	udp[6], udp[7] = 0, 0
	binary.BigEndian.PutUint16(udp[6:8], testbed.UDPChecksum(frame[14:34], udp))
}

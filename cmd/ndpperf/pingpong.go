package main

import (
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

// pingpong: round-trip latency between two namespaces over a veth pair,
// measured for raw AF_XDP (our afxdp package), optionally the same through
// github.com/asavie/xdp, and kernel UDP sockets, in one run.
//
// Raw ping-pong: the client builds an Ethernet/IPv4/UDP frame, timestamps,
// transmits it and spins on its RX ring; the echo side spins on its RX ring,
// swaps MACs, IPs and ports in place and transmits the same frame back. Each
// end runs on its own goroutine locked to an OS thread pinned to its own CPU.

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

type pingpongOpts struct {
	size    int // UDP payload bytes
	n       int
	warmup  int
	timeout time.Duration
	attach  afxdp.AttachMode
}

func runPingpong(args []string) error {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	transports := fs.String("transports", "xdp,udp", "comma-separated: xdp (afxdp), asavie (github.com/asavie/xdp), udp (blocking kernel sockets), udpspin (kernel sockets, non-blocking busy poll)")
	size := fs.Int("size", 1024, "UDP payload bytes per message")
	n := fs.Int("n", 20000, "measured round trips per transport")
	warmup := fs.Int("warmup", 2000, "unmeasured round trips before measuring")
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
	if *n < 1 {
		return errors.New("--n must be positive")
	}
	if err := requireRoot(); err != nil {
		return err
	}
	opts := pingpongOpts{size: *size, n: *n, warmup: *warmup, timeout: time.Second, attach: mode}
	tb, pair, err := newPair()
	if err != nil {
		return err
	}
	defer tb.Close()

	var results []latencyResult
	for _, tr := range strings.Split(*transports, ",") {
		var res latencyResult
		var err error
		switch strings.TrimSpace(tr) {
		case "xdp":
			res, err = pingpongXDP(pair, opts)
		case "asavie":
			res, err = pingpongAsavie(pair, opts)
		case "udp":
			res, err = pingpongUDP(pair, opts, false)
		case "udpspin":
			res, err = pingpongUDP(pair, opts, true)
		default:
			err = fmt.Errorf("unknown transport %q", tr)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tr, err)
		}
		results = append(results, res)
	}
	out := struct {
		Results []latencyResult    `json:"results"`
		Ratios  map[string]float64 `json:"ratios,omitempty"`
		Size    int                `json:"size"`
		CPUs    int                `json:"cpus"`
	}{Results: results, Size: *size, CPUs: runtime.NumCPU(), Ratios: map[string]float64{}}
	by := map[string]latencyResult{}
	for _, r := range results {
		by[r.Transport] = r
	}
	if x, ok := by["xdp"]; ok {
		if u, ok := by["udp"]; ok && u.P50us > 0 {
			out.Ratios["xdp_p50_over_udp_p50"] = round2(x.P50us / u.P50us)
		}
		if u, ok := by["udpspin"]; ok && u.P50us > 0 {
			out.Ratios["xdp_p50_over_udpspin_p50"] = round2(x.P50us / u.P50us)
		}
		if a, ok := by["asavie"]; ok && a.P50us > 0 {
			out.Ratios["xdp_p50_over_asavie_p50"] = round2(x.P50us / a.P50us)
			out.Ratios["xdp_p99_over_asavie_p99"] = round2(x.P99us / a.P99us)
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

// ppFrame is the client's frame template (A -> B).
// Both ports are the NDP port, so the swapped reply also matches the
// client side's steering program.
func ppFrame(pair *testbed.Pair, port uint16) testbed.UDPFrame {
	v := pair.Veth
	return testbed.UDPFrame{SrcMAC: v.A.MAC, DstMAC: v.B.MAC, SrcIP: v.A.Addr.Addr(), DstIP: v.B.Addr.Addr(),
		SrcPort: port, DstPort: port}
}

func pingpongXDP(pair *testbed.Pair, o pingpongOpts) (latencyResult, error) {
	cfg := afxdp.Config{UDPPort: ppXDPPort, NumFrames: 1024, RingSize: 256, Attach: o.attach}
	var pa, pb *afxdp.Port
	cfg.Interface = pair.Veth.A.Name
	if err := pair.A.Do(func() (err error) { pa, err = afxdp.Open(cfg); return err }); err != nil {
		return latencyResult{}, err
	}
	defer pa.Close()
	cfg.Interface = pair.Veth.B.Name
	if err := pair.B.Do(func() (err error) { pb, err = afxdp.Open(cfg); return err }); err != nil {
		return latencyResult{}, err
	}
	defer pb.Close()
	cpuClient, cpuEcho := cpuPair()

	var stop atomic.Bool
	var wg sync.WaitGroup
	echoErr := make(chan error, 1)
	wg.Add(1)
	go func() { // echo: owns pb
		defer wg.Done()
		if err := lockAndPin(cpuEcho); err != nil {
			echoErr <- err
			return
		}
		u, q := pb.UMEM(), pb.Queues()[0]
		rx := make([]afxdp.Desc, 64)
		for !stop.Load() {
			n := q.Receive(rx)
			if n == 0 {
				continue
			}
			for _, d := range rx[:n] {
				testbed.SwapUDP(u.Bytes(d))
			}
			for sent := 0; sent < n; {
				k, err := q.Transmit(rx[sent:n])
				if err != nil {
					echoErr <- err
					return
				}
				sent += k
			}
		}
		echoErr <- nil
	}()

	var res latencyResult
	var cerr error
	done := make(chan struct{})
	go func() { // client: owns pa
		defer close(done)
		if cerr = lockAndPin(cpuClient); cerr != nil {
			return
		}
		u, q := pa.UMEM(), pa.Queues()[0]
		f := ppFrame(pair, ppXDPPort)
		tmpl := make([]byte, testbed.UDPHeaderLen+o.size)
		f.Build(tmpl, make([]byte, o.size))
		tx := make([]afxdp.Desc, 1)
		rx := make([]afxdp.Desc, 8)
		rtts := make([]time.Duration, 0, o.n)
		lost := 0
		for i := 0; i < o.warmup+o.n; i++ {
			if u.Alloc(tx) != 1 {
				q.Transmit(nil) // reap completions
				i--
				continue
			}
			tx[0].Len = uint32(copy(u.Buffer(tx[0]), tmpl))
			t0 := time.Now()
			if _, cerr = q.Transmit(tx); cerr != nil {
				return
			}
			var got int
			for got == 0 {
				got = q.Receive(rx)
				if got == 0 && time.Since(t0) > o.timeout {
					break
				}
			}
			rtt := time.Since(t0)
			if got == 0 {
				lost++
				continue
			}
			if _, cerr = u.Release(rx[:got]); cerr != nil {
				return
			}
			if i >= o.warmup {
				rtts = append(rtts, rtt)
			}
		}
		in := pa.Info()
		res = summarize("xdp", rtts, lost, fmt.Sprintf("zerocopy=%v attach=%v need_wakeup=%v", in.ZeroCopy, in.Attach, in.NeedWakeup))
	}()
	<-done
	stop.Store(true)
	wg.Wait()
	if err := <-echoErr; err != nil {
		return res, fmt.Errorf("echo: %w", err)
	}
	return res, cerr
}

// pingpongUDP measures kernel UDP sockets: blocking read/write on locked
// threads, or (spin) non-blocking reads in a busy loop.
func pingpongUDP(pair *testbed.Pair, o pingpongOpts, spin bool) (latencyResult, error) {
	name := "udp"
	if spin {
		name = "udpspin"
	}
	v := pair.Veth
	aAddr, bAddr := v.A.Addr.Addr(), v.B.Addr.Addr()
	var cfd, efd int
	if err := pair.B.Do(func() (err error) {
		efd, err = udpSocket(bAddr, ppUDPPort, aAddr, ppClientPort)
		return err
	}); err != nil {
		return latencyResult{}, err
	}
	defer unix.Close(efd)
	if err := pair.A.Do(func() (err error) {
		cfd, err = udpSocket(aAddr, ppClientPort, bAddr, ppUDPPort)
		return err
	}); err != nil {
		return latencyResult{}, err
	}
	defer unix.Close(cfd)
	// Blocking reads wake up every 100 ms so the echo loop sees stop.
	tv := unix.Timeval{Usec: 100_000}
	if err := unix.SetsockoptTimeval(efd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return latencyResult{}, err
	}
	tvc := unix.NsecToTimeval(o.timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tvc); err != nil {
		return latencyResult{}, err
	}
	cpuClient, cpuEcho := cpuPair()
	flags := 0
	if spin {
		flags = unix.MSG_DONTWAIT
	}
	var stop atomic.Bool
	echoErr := make(chan error, 1)
	go func() {
		if err := lockAndPin(cpuEcho); err != nil {
			echoErr <- err
			return
		}
		buf := make([]byte, 2048)
		for !stop.Load() {
			n, _, err := unix.Recvfrom(efd, buf, flags)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				echoErr <- err
				return
			}
			if _, err := unix.Write(efd, buf[:n]); err != nil {
				echoErr <- err
				return
			}
		}
		echoErr <- nil
	}()
	var res latencyResult
	var cerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cerr = lockAndPin(cpuClient); cerr != nil {
			return
		}
		msg := make([]byte, o.size)
		buf := make([]byte, 2048)
		rtts := make([]time.Duration, 0, o.n)
		lost := 0
		for i := 0; i < o.warmup+o.n; i++ {
			t0 := time.Now()
			if _, cerr = unix.Write(cfd, msg); cerr != nil {
				return
			}
			var err error
			for {
				_, _, err = unix.Recvfrom(cfd, buf, flags)
				if spin && errors.Is(err, unix.EAGAIN) && time.Since(t0) < o.timeout {
					continue
				}
				if errors.Is(err, unix.EINTR) {
					continue
				}
				break
			}
			rtt := time.Since(t0)
			if err != nil {
				lost++
				continue
			}
			if i >= o.warmup {
				rtts = append(rtts, rtt)
			}
		}
		mode := "blocking recvfrom"
		if spin {
			mode = "MSG_DONTWAIT busy poll"
		}
		res = summarize(name, rtts, lost, mode)
	}()
	<-done
	stop.Store(true)
	if err := <-echoErr; err != nil {
		return res, fmt.Errorf("echo: %w", err)
	}
	return res, cerr
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

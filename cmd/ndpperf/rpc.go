package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
	"golang.org/x/sys/unix"
)

// rpc: request/response latency of NDP (a new connection per RPC, embedded
// stacks, both ends busy-polling on pinned threads) next to kernel TCP
// (persistent connection, new connection per RPC, TCP Fast Open) and the
// raw AF_XDP ping-pong floor, in one run over one two-namespace veth
// testbed. Each transport gets its own veth pair; the measurement is split
// into rounds and the transports take turns (pingpong.go's measurePingpong),
// so load on the shared machine hits them alike.
//
// Not root: the same RPC workload runs on the simulator (internal/sim)
// instead, and says so.

func init() {
	register(&subcommand{
		name:    "rpc",
		summary: "RPC latency: NDP (new connection per RPC) vs raw AF_XDP, kernel TCP, TCP new-conn, TFO (root; simulator otherwise)",
		run:     runRPC,
	})
}

// runDaemonRPC is set by the daemon side (rpc_daemon*.go) to run the ndp
// transport through ndpd (sockapi.Attach) instead of embedded stacks.
var runDaemonRPC func(pair *testbed.Pair, o rpcOpts) (ppEnd, error)

type rpcOpts struct {
	size    int
	n       int
	warmup  int
	rounds  int
	compare []string
	mode    string
	poll    string
	spin    time.Duration
	json    bool
}

const (
	rpcNDPPort = 7
	rpcTCPPort = 9910
)

func parseRPCFlags(name string, args []string, defN int) (rpcOpts, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	size := fs.Int("size", 1024, "request and response bytes")
	n := fs.Int("n", defN, "measured RPCs per transport")
	warmup := fs.Int("warmup", 1000, "unmeasured RPCs per transport first")
	rounds := fs.Int("rounds", 10, "turns per transport the measurement is split into")
	compare := fs.String("compare", "xdp,tcp,tcp-newconn,tfo", "comma-separated comparisons: xdp (raw AF_XDP ping-pong), tcp (persistent kernel TCP), tcp-newconn, tfo (TCP Fast Open); empty for ndp only")
	mode := fs.String("mode", "embedded", "ndp stack: embedded (in this process) or daemon (through ndpd)")
	poll := fs.String("poll", "busy", "ndp waiting: busy (spin until done) or adaptive (spin --spin, then sleep on the AF_XDP socket)")
	spin := fs.Duration("spin", 200*time.Microsecond, "adaptive mode: how long a waiter spins before sleeping")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return rpcOpts{}, err
	}
	o := rpcOpts{size: *size, n: *n, warmup: *warmup, rounds: *rounds, mode: *mode, poll: *poll, spin: *spin, json: *asJSON}
	if o.poll != "busy" && o.poll != "adaptive" {
		return o, fmt.Errorf("--poll %q: want busy or adaptive", o.poll)
	}
	if *compare != "" {
		o.compare = strings.Split(*compare, ",")
	}
	for _, c := range o.compare {
		switch c {
		case "xdp", "tcp", "tcp-newconn", "tfo":
		default:
			return o, fmt.Errorf("unknown comparison %q", c)
		}
	}
	if o.size < 8 || o.size > 1<<20 {
		return o, fmt.Errorf("--size %d: want 8..1MiB", o.size)
	}
	if o.mode != "embedded" && o.mode != "daemon" {
		return o, fmt.Errorf("--mode %q: want embedded or daemon", o.mode)
	}
	if o.n < 1 || o.rounds < 1 || o.rounds > o.n {
		return o, errors.New("--n and --rounds must be positive, rounds <= n")
	}
	return o, nil
}

func runRPC(args []string) error {
	o, err := parseRPCFlags("rpc", args, 20000)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return rpcSimFallback(o)
	}
	out, err := rpcTestbed(o)
	if err != nil {
		return err
	}
	return printRPC(out, o.json)
}

type rpcOutput struct {
	Results []latencyResult    `json:"results"`
	Ratios  map[string]float64 `json:"ratios,omitempty"`
	Size    int                `json:"size"`
	Rounds  int                `json:"rounds"`
	CPUs    int                `json:"cpus"`
	Setup   string             `json:"setup"`
}

// rpcTestbed builds the testbed, runs every transport, removes the testbed.
func rpcTestbed(o rpcOpts) (rpcOutput, error) {
	var out rpcOutput
	tb, err := testbed.New()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	nsA, err := tb.NewNamespace()
	if err != nil {
		return out, err
	}
	nsB, err := tb.NewNamespace()
	if err != nil {
		return out, err
	}
	for _, ns := range []*testbed.Namespace{nsA, nsB} {
		// TFO for client and server; reuse of TIME_WAIT ports for tcp-newconn.
		if out, err := ns.Command("sysctl", "-q", "-w", "net.ipv4.tcp_fastopen=3", "net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=10000 65000").CombinedOutput(); err != nil {
			return rpcOutput{}, fmt.Errorf("sysctl in %s: %v: %s", ns.Name, err, out)
		}
	}
	var ends []ppEnd
	defer func() {
		for _, e := range ends {
			e.close()
		}
	}()
	transports := append([]string{"ndp"}, o.compare...)
	for i, tr := range transports {
		v, err := tb.NewVeth(nsA, nsB, testbed.VethConfig{
			AddrA: fmt.Sprintf("10.202.%d.1/24", i), AddrB: fmt.Sprintf("10.202.%d.2/24", i)})
		if err != nil {
			return out, err
		}
		pair := &testbed.Pair{A: nsA, B: nsB, Veth: v}
		var e ppEnd
		switch tr {
		case "ndp":
			if o.mode == "daemon" {
				if runDaemonRPC == nil {
					return out, errors.New("daemon mode not built")
				}
				e, err = runDaemonRPC(pair, o)
			} else {
				e, err = newNDPRPC(pair, o)
			}
		case "xdp":
			if o.size > 1472 {
				return out, fmt.Errorf("xdp comparison: --size %d exceeds one frame (1472)", o.size)
			}
			e, err = newXDPPingpong(pair, pingpongOpts{size: o.size})
		case "tcp":
			e, err = newTCPRPC(pair, o, tcpPersistent)
		case "tcp-newconn":
			e, err = newTCPRPC(pair, o, tcpNewConn)
		case "tfo":
			e, err = newTCPRPC(pair, o, tcpFastOpen)
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", tr, err)
		}
		ends = append(ends, e)
	}
	res, err := measurePingpong(ends, pingpongOpts{size: o.size, n: o.n, warmup: o.warmup, rounds: o.rounds, timeout: time.Second})
	if err != nil {
		return out, err
	}
	out = rpcOutput{Results: res, Ratios: map[string]float64{}, Size: o.size, Rounds: o.rounds, CPUs: runtime.NumCPU(),
		Setup: "two network namespaces joined by veth (one pair per transport), client and server threads pinned to different CPUs"}
	rpcRatios(&out)
	return out, nil
}

func rpcRatios(out *rpcOutput) {
	by := map[string]latencyResult{}
	for _, r := range out.Results {
		by[r.Transport] = r
	}
	n, ok := by["ndp"]
	if !ok {
		return
	}
	for _, other := range []string{"xdp", "tcp", "tcp-newconn", "tfo"} {
		if x, ok := by[other]; ok && x.P50us > 0 && x.P99us > 0 {
			out.Ratios["ndp_p50_over_"+other+"_p50"] = round2(n.P50us / x.P50us)
			out.Ratios["ndp_p99_over_"+other+"_p99"] = round2(n.P99us / x.P99us)
		}
	}
}

func printRPC(out rpcOutput, asJSON bool) error {
	if asJSON {
		return printJSON(out)
	}
	fmt.Printf("%-12s %9s %9s %9s %9s %7s  %s\n", "transport", "p50_us", "p90_us", "p99_us", "p999_us", "lost", "mode")
	for _, r := range out.Results {
		fmt.Printf("%-12s %9.2f %9.2f %9.2f %9.2f %7d  %s\n", r.Transport, r.P50us, r.P90us, r.P99us, r.P999us, r.Lost, r.Mode)
	}
	for k, v := range out.Ratios {
		fmt.Printf("%s = %.2f\n", k, v)
	}
	return nil
}

// ndpRPC: one embedded stack per namespace, PollBusy, no background poller:
// the client thread and the echo thread (pinned by measurePingpong) each
// drive their own stack. Every RPC is a new NDP connection: the request and
// its FIN go out in the first RTT, the server answers and closes.
type ndpRPC struct {
	client, server *sockapi.Stack
	l              *sockapi.Listener
	addr           sockapi.Addr
	req, resp      []byte
	ebuf           []byte
	poll           string
}

func newNDPRPC(pair *testbed.Pair, o rpcOpts) (*ndpRPC, error) {
	v := pair.Veth
	r := &ndpRPC{addr: sockapi.Addr{IP: v.B.Addr.Addr(), Port: rpcNDPPort},
		req: make([]byte, o.size), resp: make([]byte, o.size), ebuf: make([]byte, o.size), poll: o.poll}
	open := func(ns *testbed.Namespace, ifname string, ip netip.Addr) (s *sockapi.Stack, err error) {
		err = ns.Do(func() error {
			cfg := sockapi.Config{Interface: ifname, Address: ip, PollMode: sockapi.PollBusy, NoBackgroundPoller: true}
			if o.poll == "adaptive" {
				cfg.PollMode, cfg.Spin = sockapi.PollAdaptive, o.spin
			}
			s, err = sockapi.Open(cfg)
			return err
		})
		return s, err
	}
	var err error
	if r.client, err = open(pair.A, v.A.Name, v.A.Addr.Addr()); err != nil {
		return nil, err
	}
	if r.server, err = open(pair.B, v.B.Name, v.B.Addr.Addr()); err != nil {
		r.client.Close()
		return nil, err
	}
	if r.l, err = r.server.Listen(rpcNDPPort); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ndpRPC) name() string { return "ndp" }
func (r *ndpRPC) mode() string {
	if r.poll == "adaptive" {
		return "embedded sockapi, new connection per RPC, PollAdaptive (spin, then sleep on the XSK fd), pinned client and server threads"
	}
	return "embedded sockapi, new connection per RPC, PollBusy, pinned client and server threads"
}

func (r *ndpRPC) echo(stop *atomic.Bool) error {
	r.l.SetDeadline(time.Time{})
	done := make(chan struct{})
	defer close(done)
	go func() { // unblock Accept when the turn ends
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if stop.Load() {
					r.l.SetDeadline(time.Unix(1, 0))
					return
				}
			}
		}
	}()
	for !stop.Load() {
		c, err := r.l.AcceptNDP()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return err
		}
		if _, err := io.ReadFull(c, r.ebuf); err != nil {
			c.Close()
			return fmt.Errorf("server read: %w", err)
		}
		if _, err := c.WriteAndClose(r.ebuf); err != nil {
			c.Close()
			return fmt.Errorf("server write: %w", err)
		}
		c.Close()
	}
	return nil
}

func (r *ndpRPC) roundTrip(time.Duration) (time.Duration, error) {
	t0 := time.Now()
	n, err := r.client.CallInto(context.Background(), r.addr, r.req, r.resp)
	if err != nil {
		return 0, err
	}
	if n != len(r.resp) {
		return 0, fmt.Errorf("short response: %d of %d bytes", n, len(r.resp))
	}
	return time.Since(t0), nil
}

func (r *ndpRPC) close() {
	if r.l != nil {
		r.l.Close()
	}
	r.client.Close()
	r.server.Close()
}

// tcpRPC: kernel TCP with blocking syscalls on the pinned threads.
type tcpKind int

const (
	tcpPersistent tcpKind = iota
	tcpNewConn
	tcpFastOpen
)

type tcpRPC struct {
	kind      tcpKind
	lfd       int // server listening socket (namespace B)
	cfd, sfd  int // persistent: client and accepted server sockets
	nsA       *testbed.Namespace
	dst       unix.SockaddrInet4
	req, resp []byte
	ebuf      []byte
}

func newTCPRPC(pair *testbed.Pair, o rpcOpts, kind tcpKind) (*tcpRPC, error) {
	v := pair.Veth
	t := &tcpRPC{kind: kind, lfd: -1, cfd: -1, sfd: -1, nsA: pair.A,
		dst: unix.SockaddrInet4{Addr: v.B.Addr.Addr().As4(), Port: rpcTCPPort},
		req: make([]byte, o.size), resp: make([]byte, o.size), ebuf: make([]byte, o.size)}
	err := pair.B.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		t.lfd = fd
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if kind == tcpFastOpen {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 4096); err != nil {
				return fmt.Errorf("TCP_FASTOPEN: %w", err)
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: v.B.Addr.Addr().As4(), Port: rpcTCPPort}); err != nil {
			return err
		}
		// Accept wakes every 10ms to see the end of a turn.
		tv := unix.Timeval{Usec: 10_000}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		return unix.Listen(fd, 4096)
	})
	if err != nil {
		t.close()
		return nil, err
	}
	if kind == tcpPersistent {
		if t.cfd, err = t.newClientSocket(); err != nil {
			t.close()
			return nil, err
		}
		if err := unix.Connect(t.cfd, &t.dst); err != nil {
			t.close()
			return nil, err
		}
		if t.sfd, _, err = unix.Accept4(t.lfd, unix.SOCK_CLOEXEC); err != nil {
			t.close()
			return nil, err
		}
		tv := unix.Timeval{Usec: 10_000}
		unix.SetsockoptTimeval(t.sfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		unix.SetsockoptInt(t.sfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	return t, nil
}

func (t *tcpRPC) newClientSocket() (int, error) {
	var fd int
	err := t.nsA.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return fd, nil
}

func (t *tcpRPC) name() string {
	return [...]string{"tcp", "tcp-newconn", "tfo"}[t.kind]
}

func (t *tcpRPC) mode() string {
	return [...]string{"kernel TCP, persistent connection, blocking syscalls",
		"kernel TCP, new connection per RPC (connect, write, read, close)",
		"kernel TCP Fast Open (MSG_FASTOPEN), new connection per RPC"}[t.kind]
}

func readFull(fd int, b []byte) error {
	for got := 0; got < len(b); {
		n, err := unix.Read(fd, b[got:])
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		got += n
	}
	return nil
}

func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

func (t *tcpRPC) echo(stop *atomic.Bool) error {
	for !stop.Load() {
		fd := t.sfd
		if t.kind != tcpPersistent {
			var err error
			fd, _, err = unix.Accept4(t.lfd, unix.SOCK_CLOEXEC)
			if err != nil {
				if err == unix.EAGAIN || err == unix.EINTR {
					continue
				}
				return err
			}
			// The accepted socket inherits the listener's 10ms receive
			// timeout, meant only for accept: a slow client must not lose
			// its connection to it.
			var none unix.Timeval
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &none)
		}
		err := readFull(fd, t.ebuf)
		if t.kind == tcpPersistent && (err == unix.EAGAIN || err == unix.EINTR) {
			continue
		}
		if err == nil {
			err = writeFull(fd, t.ebuf)
		}
		if t.kind != tcpPersistent {
			unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("%s server: %w", t.name(), err)
		}
	}
	return nil
}

func (t *tcpRPC) roundTrip(time.Duration) (time.Duration, error) {
	t0 := time.Now()
	switch t.kind {
	case tcpPersistent:
		if err := writeFull(t.cfd, t.req); err != nil {
			return 0, err
		}
		if err := readFull(t.cfd, t.resp); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	// The socket is created in namespace A before the clock starts:
	// entering the namespace (setns) is a testbed artefact, not part of a
	// new connection's cost.
	fd, err := t.newClientSocket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	t0 = time.Now()
	if t.kind == tcpFastOpen {
		if err := unix.Sendto(fd, t.req, unix.MSG_FASTOPEN, &t.dst); err != nil {
			return 0, fmt.Errorf("sendto MSG_FASTOPEN: %w", err)
		}
	} else {
		if err := unix.Connect(fd, &t.dst); err != nil {
			return 0, err
		}
		if err := writeFull(fd, t.req); err != nil {
			return 0, err
		}
	}
	if err := readFull(fd, t.resp); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (t *tcpRPC) close() {
	for _, fd := range []int{t.cfd, t.sfd, t.lfd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
)

// rpc --mode daemon: the same RPC workload as embedded mode (rpc.go's
// ndpRPC: a new NDP connection per RPC, CallInto on the pinned client
// thread, AcceptNDP + read + WriteAndClose on the pinned echo thread), but
// the NDP stacks live in two ndpd processes, one per namespace, and the
// client and server are applications attached to them (sockapi.Attach):
// every byte crosses the shared-memory rings twice per direction.
//
// The ndpd processes are this binary re-executed as `ndpperf ndpd-child`
// inside each namespace (ip netns exec): the daemon core of cmd/ndpd
// (internal/daemon.Core over an internal/engine.Stack on AF_XDP), with a
// control socket in a temporary directory. They are separate processes,
// as in a deployment.

func init() {
	runDaemonRPC = newDaemonRPC
	startNdpds = func(pair *testbed.Pair, cpus [2]string, queues int, rate int64) (daemons, error) {
		return startNdpdPair(pair, ndpdPairOpts{cpus: cpus, spin: "0", queues: queues, rate: rate})
	}
	register(&subcommand{
		name:    "ndpd-child",
		summary: "(internal) one ndpd core on an interface, for rpc --mode daemon; SIGTERM stops it",
		run:     runNdpdChild,
	})
}

// runNdpdChild runs the daemon cores of one ndpd (one per queue, queues
// 0..n-1) in the calling process's namespace until SIGTERM. It prints
// "ready" once the control socket accepts.
func runNdpdChild(args []string) error {
	fs := flag.NewFlagSet("ndpd-child", flag.ContinueOnError)
	ifname := fs.String("interface", "", "interface (in this namespace)")
	sock := fs.String("socket", "", "control socket path")
	spin := fs.Duration("spin", 0, "core spin before sleeping (0 = daemon default)")
	cpus := fs.String("cpu", "-1", "CPU of each queue's core loop, comma-separated (-1: no pinning), as ndpd's core_cpus")
	queues := fs.Int("queues", 1, "serve queues 0..n-1, one core loop each")
	rate := fs.Int64("rate", 10e9, "pull pacer rate, bits/s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ifname == "" || *sock == "" || *queues < 1 {
		return errors.New("-interface and -socket are required, -queues at least 1")
	}
	var coreCPUs []int
	for _, f := range strings.Split(*cpus, ",") {
		cpu, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-cpu %q: %w", *cpus, err)
		}
		coreCPUs = append(coreCPUs, cpu)
	}
	ifi, err := net.InterfaceByName(*ifname)
	if err != nil {
		return err
	}
	var addr netip.Addr
	if as, err := ifi.Addrs(); err == nil {
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				addr, _ = netip.AddrFromSlice(n.IP.To4())
				break
			}
		}
	}
	if !addr.IsValid() {
		return fmt.Errorf("%s has no IPv4 address", *ifname)
	}
	qs := make([]int, *queues)
	for i := range qs {
		qs[i] = i
	}
	sts, trs, err := daemon.OpenXDPStacks(engine.XDPConfig{Interface: *ifname}, qs,
		engine.Config{Endpoint: ndp.Config{LocalIP: addr.As4()}, LinkRate: *rate}, daemon.EngineTransportConfig{})
	if err != nil {
		return err
	}
	defer func() {
		for _, st := range sts {
			st.Close()
		}
	}()
	cores := make([]*daemon.Core, len(trs))
	for i, tr := range trs {
		if cores[i], err = daemon.NewCore(daemon.Config{SpinFor: *spin, LocalAddr: addr, DrainTimeout: time.Second, Queue: i}, tr); err != nil {
			return err
		}
	}
	place := daemon.PlaceByPeer
	if *queues > 1 {
		place = daemon.PlaceSpread // veth: the children run on the testbed's veth pair
	}
	srv, err := daemon.Listen(daemon.ServerConfig{Path: *sock, Placement: place}, cores...)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- daemon.RunCores(cores, daemon.RunConfig{CPUs: coreCPUs}) }()
	go srv.Serve()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("ready")
	select {
	case <-sigs:
		srv.StopAccepting()
		for _, c := range cores {
			c.Drain()
		}
		err = <-runErr
	case err = <-runErr:
	}
	srv.Close()
	return err
}

// ndpdPair is the two ndpd children of a daemon-mode benchmark: one in
// each namespace of a pair, this binary re-executed as `ndpperf
// ndpd-child` (ip netns exec), each with a control socket in a temporary
// directory. They are separate processes, as in a deployment.
type ndpdPair struct {
	children []*exec.Cmd
	dir      string
	socks    [2]string // A's, B's
}

// ndpdPairOpts configures both children.
type ndpdPairOpts struct {
	cpus   [2]string // each side's -cpu: its core loops' CPUs
	spin   string    // -spin of both
	queues int       // queues 0..queues-1 each (the veth must have them)
	rate   int64     // pull pacer rate, bits/s (0: 10G)
}

func startNdpdPair(pair *testbed.Pair, o ndpdPairOpts) (*ndpdPair, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ndpperf-ndpd")
	if err != nil {
		return nil, err
	}
	d := &ndpdPair{dir: dir, socks: [2]string{filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")}}
	if o.rate == 0 {
		o.rate = 10e9
	}
	for i, side := range []struct {
		ns     *testbed.Namespace
		ifname string
	}{{pair.A, pair.Veth.A.Name}, {pair.B, pair.Veth.B.Name}} {
		cmd := side.ns.Command(exe, "ndpd-child", "-interface", side.ifname, "-socket", d.socks[i],
			"-cpu", o.cpus[i], "-spin", o.spin, "-queues", strconv.Itoa(max(o.queues, 1)), "-rate", strconv.FormatInt(o.rate, 10))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			d.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			d.close()
			return nil, err
		}
		d.children = append(d.children, cmd)
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			d.close()
			return nil, fmt.Errorf("ndpd child in %s did not start (%q)", side.ns.Name, line)
		}
	}
	return d, nil
}

func (d *ndpdPair) sock(side int) string { return d.socks[side] }

// close stops both children (SIGTERM: they drain; SIGKILL after 10 s) and
// removes the directory.
func (d *ndpdPair) close() {
	for _, c := range d.children {
		c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(d.dir)
}

// daemonRPC is ndpRPC with attached stacks and the two ndpd children.
type daemonRPC struct {
	*ndpRPC
	daemons *ndpdPair
	cores   string // "dedicated" or "shared"
	unprocs func() // gives back the Ps added for the applications (appProcs)
}

// appProcs is how many Ps the daemon RPC adds to GOMAXPROCS while it runs:
// one per application it hosts (client and echo server). An attached
// application's waiting thread sleeps in ppoll(2) on its ring's eventfd
// holding its P, so the two applications' threads, sleeping at once, held
// both Ps of a 2-CPU process, and the runtime's sysmon, finding no idle P,
// took one back every 20 µs instead of backing off to 10 ms: a thread
// wakeup on a CPU the daemons need, about 1,800 a second (docs/latency.md,
// "Through ndpd"). As two processes of their own, each application would
// have had an idle P.
const appProcs = 2

func newDaemonRPC(pair *testbed.Pair, o rpcOpts) (ppEnd, error) {
	v := pair.Veth
	d := &daemonRPC{ndpRPC: &ndpRPC{addr: sockapi.Addr{IP: v.B.Addr.Addr(), Port: rpcNDPPort},
		req: make([]byte, o.size), resp: make([]byte, o.size), ebuf: make([]byte, o.size)}}
	fail := func(err error) (ppEnd, error) {
		d.close()
		return nil, err
	}
	// Shared cores: each ndpd's core loop runs on its application's CPU
	// (ndpd's core_cpus), so an app and its daemon hand work over on one CPU
	// (a few µs) instead of waking a thread on the other one (25-33 µs on a
	// 2-vCPU VM; docs/decisions.md, "core_cpus pins each queue's core loop").
	// Dedicated cores: the core loops get CPUs 2 and 3 and never sleep, and
	// the applications (on CPUs 0 and 1) busy-poll their rings.
	cpuClient, cpuEcho := cpuPair()
	po := ndpdPairOpts{cpus: [2]string{strconv.Itoa(cpuClient), strconv.Itoa(cpuEcho)}, spin: "0"}
	app := sockapi.AttachConfig{}
	if o.cores == "dedicated" {
		po.cpus = [2]string{"2", "3"}
		po.spin, app = daemon.SpinForever.String(), sockapi.AttachConfig{PollMode: sockapi.PollBusy}
	}
	d.cores = o.cores
	d.unprocs = addProcs(appProcs)
	var err error
	if d.daemons, err = startNdpdPair(pair, po); err != nil {
		return fail(err)
	}
	if d.client, err = sockapi.AttachWith(d.daemons.socks[0], app); err != nil {
		return fail(err)
	}
	if d.server, err = sockapi.AttachWith(d.daemons.socks[1], app); err != nil {
		return fail(err)
	}
	if d.l, err = d.server.Listen(rpcNDPPort); err != nil {
		return fail(err)
	}
	return d, nil
}

func (d *daemonRPC) mode() string {
	if d.cores == "dedicated" {
		return "through ndpd, dedicated cores (two daemon processes, each core loop busy on its own CPU; apps attached over shared-memory rings, busy polling on their own CPUs), new connection per RPC, pinned client and server threads"
	}
	return "through ndpd, shared cores (two daemon processes, each core loop pinned to its app's CPU; apps attached over shared-memory rings), new connection per RPC, adaptive polling, pinned client and server threads"
}

// cpuElsewhere is both ndpd children's CPU time so far (/proc/PID/stat's
// utime and stime, in clock ticks: 10 ms resolution, far below a turn's
// total).
func (d *daemonRPC) cpuElsewhere() cpuTime {
	var c cpuTime
	if d.daemons == nil {
		return c
	}
	for _, ch := range d.daemons.children {
		c = c.add(procCPU(ch.Process.Pid))
	}
	return c
}

// procCPU is process pid's user and system CPU time so far (0 when it
// cannot be read).
func procCPU(pid int) cpuTime {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return cpuTime{}
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return cpuTime{}
	}
	const userHZ = 100 // sysconf(_SC_CLK_TCK) on Linux
	tick := func(s string) time.Duration {
		v, _ := strconv.ParseUint(s, 10, 64)
		return time.Duration(v) * time.Second / userHZ
	}
	return cpuTime{user: tick(f[11]), sys: tick(f[12])} // fields 14 and 15
}

func (d *daemonRPC) close() {
	if d.l != nil {
		d.l.Close()
	}
	if d.client != nil {
		d.client.Close()
	}
	if d.server != nil {
		d.server.Close()
	}
	if d.daemons != nil {
		d.daemons.close()
	}
	if d.unprocs != nil {
		d.unprocs()
		d.unprocs = nil
	}
}

// addProcs raises GOMAXPROCS by n and returns what lowers it again.
func addProcs(n int) func() {
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
	return func() { runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)-n, 1)) }
}

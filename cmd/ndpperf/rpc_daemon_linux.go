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
	register(&subcommand{
		name:    "ndpd-child",
		summary: "(internal) one ndpd core on an interface, for rpc --mode daemon; SIGTERM stops it",
		run:     runNdpdChild,
	})
}

// runNdpdChild runs one daemon core in the calling process's namespace
// until SIGTERM. It prints "ready" once the control socket accepts.
func runNdpdChild(args []string) error {
	fs := flag.NewFlagSet("ndpd-child", flag.ContinueOnError)
	ifname := fs.String("interface", "", "interface (in this namespace)")
	sock := fs.String("socket", "", "control socket path")
	spin := fs.Duration("spin", 0, "core spin before sleeping (0 = daemon default)")
	cpu := fs.Int("cpu", -1, "pin the core loop to this CPU (-1: no pinning), as ndpd's pacer_cpu does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ifname == "" || *sock == "" {
		return errors.New("-interface and -socket are required")
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
	st, tr, err := daemon.OpenXDPStack(engine.XDPConfig{Interface: *ifname},
		engine.Config{Endpoint: ndp.Config{LocalIP: addr.As4()}, LinkRate: 10e9}, daemon.EngineTransportConfig{})
	if err != nil {
		return err
	}
	defer st.Close()
	core, err := daemon.NewCore(daemon.Config{SpinFor: *spin, LocalAddr: addr, DrainTimeout: time.Second}, tr)
	if err != nil {
		return err
	}
	srv, err := daemon.Listen(daemon.ServerConfig{Path: *sock}, core)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() {
		if err := lockAndPin(*cpu); err != nil {
			runErr <- err
			return
		}
		runErr <- core.Run()
	}()
	go srv.Serve()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("ready")
	select {
	case <-sigs:
		srv.StopAccepting()
		core.Drain()
		err = <-runErr
	case err = <-runErr:
	}
	srv.Close()
	return err
}

// daemonRPC is ndpRPC with attached stacks and the two ndpd children.
type daemonRPC struct {
	*ndpRPC
	children []*exec.Cmd
	dir      string
	cores    string // "dedicated" or "shared"
}

func newDaemonRPC(pair *testbed.Pair, o rpcOpts) (ppEnd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ndpperf-ndpd")
	if err != nil {
		return nil, err
	}
	v := pair.Veth
	d := &daemonRPC{dir: dir, ndpRPC: &ndpRPC{addr: sockapi.Addr{IP: v.B.Addr.Addr(), Port: rpcNDPPort},
		req: make([]byte, o.size), resp: make([]byte, o.size), ebuf: make([]byte, o.size)}}
	fail := func(err error) (ppEnd, error) {
		d.close()
		return nil, err
	}
	socks := []string{filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")}
	// Shared cores: each ndpd's core loop runs on its application's CPU
	// (ndpd's pacer_cpu), so an app and its daemon hand work over on one CPU
	// (a few µs) instead of waking a thread on the other one (25-33 µs on a
	// 2-vCPU VM; docs/decisions.md, "pacer_cpu pins the core loop").
	// Dedicated cores: the core loops get CPUs 2 and 3 and never sleep, and
	// the applications (on CPUs 0 and 1) busy-poll their rings.
	cpuClient, cpuEcho := cpuPair()
	coreCPUs := [2]int{cpuClient, cpuEcho}
	coreSpin, app := "0", sockapi.AttachConfig{}
	if o.cores == "dedicated" {
		coreCPUs = [2]int{2, 3}
		coreSpin, app = daemon.SpinForever.String(), sockapi.AttachConfig{PollMode: sockapi.PollBusy}
	}
	d.cores = o.cores
	for i, side := range []struct {
		ns     *testbed.Namespace
		ifname string
	}{{pair.A, v.A.Name}, {pair.B, v.B.Name}} {
		cmd := side.ns.Command(exe, "ndpd-child", "-interface", side.ifname, "-socket", socks[i],
			"-cpu", fmt.Sprint(coreCPUs[i]), "-spin", coreSpin)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return fail(err)
		}
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		d.children = append(d.children, cmd)
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			return fail(fmt.Errorf("ndpd child in %s did not start (%q)", side.ns.Name, line))
		}
	}
	if d.client, err = sockapi.AttachWith(socks[0], app); err != nil {
		return fail(err)
	}
	if d.server, err = sockapi.AttachWith(socks[1], app); err != nil {
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

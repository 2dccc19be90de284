package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// checkResult is one line of `ndpd --check-config`'s report.
type checkResult struct {
	ok   bool
	what string
}

// checkEnvironment verifies what it can of c against this machine without
// opening the queue: the interface, its queue, the address, the pinned
// CPU, the control socket's directory, the metrics address and the
// capture file's directory. sysNet is /sys/class/net (a parameter for
// tests). It returns the results and what it cannot check.
func checkEnvironment(c *Config, sysNet string) (res []checkResult, unchecked []string) {
	add := func(ok bool, format string, a ...any) { res = append(res, checkResult{ok, fmt.Sprintf(format, a...)}) }

	ifi, err := net.InterfaceByName(c.Interface)
	if err != nil {
		add(false, "interface %q: %v", c.Interface, err)
	} else {
		add(true, "interface %s exists (index %d, MTU %d, %s)", ifi.Name, ifi.Index, ifi.MTU, ifi.Flags)
		if ifi.Flags&net.FlagUp == 0 {
			add(false, "interface %s is down", ifi.Name)
		}
		if c.MTU > ifi.MTU {
			add(false, "mtu %d > interface %s's MTU %d", c.MTU, ifi.Name, ifi.MTU)
		}
		for _, q := range c.Queues {
			rx := filepath.Join(sysNet, c.Interface, "queues", "rx-"+strconv.Itoa(q))
			if _, err := os.Stat(rx); err != nil {
				n := 0
				if ents, err := os.ReadDir(filepath.Join(sysNet, c.Interface, "queues")); err == nil {
					for _, e := range ents {
						if strings.HasPrefix(e.Name(), "rx-") {
							n++
						}
					}
				}
				add(false, "queue %d of %s: no %s (the interface has %d receive queues)", q, c.Interface, rx, n)
			} else {
				add(true, "queue %d of %s exists", q, c.Interface)
			}
		}
		addrs, _ := ifi.Addrs()
		var v4 []netip.Addr
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
					v4 = append(v4, ip.Unmap())
				}
			}
		}
		switch {
		case c.Address == "" && len(v4) == 0:
			add(false, "address: unset and interface %s has no IPv4 address", ifi.Name)
		case c.Address == "":
			add(true, "address: %s (the interface's first IPv4 address)", v4[0])
		default:
			want := netip.MustParseAddr(c.Address)
			found := false
			for _, a := range v4 {
				found = found || a == want
			}
			if found {
				add(true, "address %s is on %s", want, ifi.Name)
			} else {
				add(false, "address %s is not on %s (it has %v): the kernel would not answer ARP for it", want, ifi.Name, v4)
			}
		}
	}

	if len(c.Queues) > 1 && ifi != nil {
		if place, _, err := dialPlacement(c.Interface, c.Queues); err != nil {
			add(false, "%v", err)
		} else {
			add(true, "queues %v: dials placed %v (a connection stays on the queue its frames arrive on)", c.Queues, place)
		}
	}

	const setting = "core_cpus"
	for i, cpu := range c.coreCPUs() {
		if cpu < 0 {
			add(true, "%s: queue %d's core loop unpinned", setting, c.Queues[i])
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			add(false, "%s %d: reading this process's CPU set: %v", setting, cpu, err)
		} else if !set.IsSet(cpu) {
			add(false, "%s %d: not in the CPUs this process may run on (%d of them)", setting, cpu, set.Count())
		} else {
			add(true, "%s %d exists and this process may run on it", setting, cpu)
		}
	}

	dir := filepath.Dir(c.ControlSocket)
	existing := dir
	for {
		if _, err := os.Stat(existing); err == nil || existing == "/" {
			break
		}
		existing = filepath.Dir(existing)
	}
	if err := unix.Access(existing, unix.W_OK|unix.X_OK); err != nil {
		add(false, "control_socket: directory %s is not writable: %v", existing, err)
	} else if existing != dir {
		add(true, "control_socket: %s does not exist; ndpd creates it under writable %s", dir, existing)
	} else {
		add(true, "control_socket: directory %s is writable", dir)
	}
	if conn, err := net.DialTimeout("unix", c.ControlSocket, time.Second); err == nil {
		conn.Close()
		add(false, "control_socket %s: a daemon is already listening on it", c.ControlSocket)
	}

	if c.MetricsAddr != "" {
		if ln, err := net.Listen("tcp", c.MetricsAddr); err != nil {
			add(false, "metrics_addr %s: %v", c.MetricsAddr, err)
		} else {
			ln.Close()
			add(true, "metrics_addr %s binds", c.MetricsAddr)
		}
	}
	if c.PcapFile != "" {
		d := filepath.Dir(c.PcapFile)
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			add(false, "pcap_file: directory %s is not writable: %v", d, err)
		} else {
			add(true, "pcap_file: directory %s is writable", d)
		}
	}
	unchecked = []string{
		"AF_XDP socket and XDP program on the queue (needs CAP_NET_ADMIN and opening it: ndpd's start reports it)",
		"bind " + c.Bind + " and attach " + c.Attach + " modes (driver support shows only when the queue is opened)",
		"link_rate " + c.LinkRate.String() + " against the NIC's real speed",
		"that allow_uids/allow_gids name existing users and groups",
		"the peers' NDP port " + strconv.Itoa(int(c.NDPPort)) + " and MTU",
	}
	return res, unchecked
}

// errChecksFailed: --check-config found a problem with the machine.
var errChecksFailed = errors.New("environment checks failed")

// printChecks writes the report and returns errChecksFailed if any check failed.
func printChecks(w io.Writer, res []checkResult, unchecked []string) error {
	failed := 0
	for _, r := range res {
		mark := "ok  "
		if !r.ok {
			mark, failed = "FAIL", failed+1
		}
		fmt.Fprintf(w, "%s %s\n", mark, r.what)
	}
	for _, u := range unchecked {
		fmt.Fprintf(w, "not checked: %s\n", u)
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d", errChecksFailed, failed)
	}
	return nil
}

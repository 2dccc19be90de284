package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
	"golang.org/x/sys/unix"
)

// incastHost is one namespace of the incast and its addressed link.
type incastHost struct {
	ns   *testbed.Namespace
	link testbed.Link
}

// incastHosts builds the client (host 0) and the servers on a Linux bridge, or
// on ndpswitch (--fabric switch; the switch is returned, stopped by tb.Close).
func incastHosts(tb *testbed.Testbed, o incastOpts) ([]incastHost, *softswitch.Switch, error) {
	hosts := make([]incastHost, o.servers+1)
	if o.fabric == "switch" {
		cfg := softswitch.Config{Rate: o.link, HostQueue: o.hostQueue}
		if o.personality == "commodity" {
			cfg.Personality = softswitch.TrimCommodity
		}
		star, err := softswitch.NewStar(tb, softswitch.StarConfig{Hosts: len(hosts), MTU: o.mtu, Switch: cfg})
		if err != nil {
			return nil, nil, err
		}
		for i, h := range star.Hosts {
			hosts[i] = incastHost{h.NS, h.Link}
		}
		return hosts, star.Switch, nil
	}
	br, err := tb.NewNamespace()
	if err != nil {
		return nil, nil, err
	}
	if err := br.NewBridge("br0"); err != nil { // layer 2 only: no iptables on bridged frames
		return nil, nil, err
	}
	for i := range hosts {
		ns, err := tb.NewNamespace()
		if err != nil {
			return nil, nil, err
		}
		v, err := tb.NewVeth(ns, br, testbed.VethConfig{AddrA: fmt.Sprintf("10.203.0.%d/24", i+1), MTU: o.mtu})
		if err != nil {
			return nil, nil, err
		}
		if _, err := br.Run("link", "set", v.B.Name, "master", "br0"); err != nil {
			return nil, nil, err
		}
		hosts[i] = incastHost{ns, v.A}
	}
	return hosts, nil, nil
}

// incastFrameBytes is how many bytes the frames of one NDP response of size
// bytes occupy on a link of the given MTU (each frame carries at most
// ndp.MaxPayload(mtu) bytes behind ndp.HeaderOverhead bytes of headers).
func incastFrameBytes(size, mtu int) int {
	mss := ndp.MaxPayload(mtu)
	frames := (size + mss - 1) / mss
	return size + frames*ndp.HeaderOverhead
}

// switchCounters are the switch's counters over the measured rounds, summed
// over its ports, and the client's port's queue high-water marks.
type switchCounters struct {
	RxFrames   uint64 `json:"rx_frames"`
	Trimmed    uint64 `json:"trimmed"`             // NDP data frames trimmed to headers
	Bounced    uint64 `json:"bounced"`             // trimmed headers returned to sender
	NDPDropped uint64 `json:"ndp_dropped"`         // NDP frames dropped (header queue full)
	OtherDrops uint64 `json:"tcp_drops"`           // non-NDP frames dropped by the drop-tail queues
	OtherMarks uint64 `json:"ecn_marks"`           // non-NDP frames marked CE
	TxDropped  uint64 `json:"tx_dropped"`          // departures a veth refused
	NICDrops   uint64 `json:"nic_drops,omitempty"` // frames the hosts' NIC queues dropped (--host-queue)
	NoBuffer   uint64 `json:"no_buffer"`
	// The switch thread's CPU time and sleeps over the measured rounds.
	CPUSeconds float64 `json:"cpu_seconds"`
	Sleeps     uint64  `json:"sleeps"`
	// The client's port: the most NDP data frames, NDP header bytes and other
	// frames queued at once (over the whole run).
	ClientMaxData        int `json:"client_port_max_data_frames"`
	ClientMaxHeaderBytes int `json:"client_port_max_header_bytes"`
	ClientMaxOther       int `json:"client_port_max_other_frames"`
}

func newSwitchCounters(d softswitch.Stats) *switchCounters {
	c := &switchCounters{RxFrames: d.RxFrames, Trimmed: d.Trimmed, Bounced: d.Bounced, NDPDropped: d.NDPDropped, NoBuffer: d.NoBuffer,
		CPUSeconds: d.CPUSeconds, Sleeps: d.Sleeps}
	for _, p := range d.Ports {
		if p.NIC {
			c.NICDrops += p.OtherDrops
			continue
		}
		c.OtherDrops += p.OtherDrops
		c.OtherMarks += p.OtherMarks
		c.TxDropped += p.TxDropped
	}
	if len(d.Ports) > 0 {
		c.ClientMaxData, c.ClientMaxHeaderBytes, c.ClientMaxOther = d.Ports[0].NDP.MaxDataDepth, d.Ports[0].NDP.MaxHeaderBytes, d.Ports[0].OtherMaxDepth
	}
	return c
}

// tcpCounters are the kernel's TCP counters of a namespace (/proc/net/snmp
// and /proc/net/netstat).
type tcpCounters struct {
	RetransSegs uint64 `json:"retrans_segs"` // Tcp: RetransSegs
	Timeouts    uint64 `json:"timeouts"`     // TcpExt: TCPTimeouts (RTO fired)
	FastRetrans uint64 `json:"fast_retrans"` // TcpExt: TCPFastRetrans
}

func (c tcpCounters) add(o tcpCounters) tcpCounters {
	return tcpCounters{c.RetransSegs + o.RetransSegs, c.Timeouts + o.Timeouts, c.FastRetrans + o.FastRetrans}
}

func (c tcpCounters) sub(o tcpCounters) tcpCounters {
	return tcpCounters{c.RetransSegs - o.RetransSegs, c.Timeouts - o.Timeouts, c.FastRetrans - o.FastRetrans}
}

// readTCPCounters reads ns's TCP counters from a thread inside it.
func readTCPCounters(ns *testbed.Namespace) (tcpCounters, error) {
	var c tcpCounters
	err := ns.Do(func() error {
		snmp, err := procNetTable("/proc/thread-self/net/snmp", "Tcp")
		if err != nil {
			return err
		}
		ext, err := procNetTable("/proc/thread-self/net/netstat", "TcpExt")
		if err != nil {
			return err
		}
		c = tcpCounters{RetransSegs: snmp["RetransSegs"], Timeouts: ext["TCPTimeouts"], FastRetrans: ext["TCPFastRetrans"]}
		return nil
	})
	return c, err
}

// procNetTable parses the header and value lines of one table ("Tcp:") of a
// /proc/net/snmp-style file.
func procNetTable(path, table string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var names []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != table+":" {
			continue
		}
		if names == nil {
			names = fields[1:]
			continue
		}
		m := make(map[string]uint64, len(names))
		for i, v := range fields[1:] {
			if i < len(names) {
				n, _ := strconv.ParseInt(v, 10, 64) // Tcp MaxConn is -1
				m[names[i]] = uint64(n)
			}
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s: no %s table", path, table)
}

// commodityTrim is the stacks' setting for --personality commodity: the
// commodity switch's default DSCP values (softswitch.CommodityConfig), so the
// stacks mark their frames for it and take its trimmed frames as headers.
func (o incastOpts) commodityTrim() sockapi.CommodityTrim {
	if o.fabric != "switch" || o.personality != "commodity" {
		return sockapi.CommodityTrim{}
	}
	d := softswitch.DefaultCommodity()
	return sockapi.CommodityTrim{DataDSCP: d.DataDSCP, ControlDSCP: d.ControlDSCP, TrimDSCPs: []uint8{d.TrimDSCP}}
}

// processCPU is the CPU time (user + system) this process's threads have
// used so far; zero if getrusage fails.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

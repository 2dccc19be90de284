package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
)

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
	BusyPasses uint64  `json:"busy_passes"`
	TxKicks    uint64  `json:"tx_kicks"`
	Ticks      uint64  `json:"ticks"`
	// The client's port: the most NDP data frames, NDP header bytes and other
	// frames queued at once (over the whole run).
	ClientMaxData        int `json:"client_port_max_data_frames"`
	ClientMaxHeaderBytes int `json:"client_port_max_header_bytes"`
	ClientMaxOther       int `json:"client_port_max_other_frames"`
}

// newSwitchCounters sums d over the ports; the Client fields are port's, the
// receiving host's (the incast's client, port 0).
func newSwitchCounters(d softswitch.Stats, port int) *switchCounters {
	c := &switchCounters{RxFrames: d.RxFrames, Trimmed: d.Trimmed, Bounced: d.Bounced, NDPDropped: d.NDPDropped, NoBuffer: d.NoBuffer,
		CPUSeconds: d.CPUSeconds, Sleeps: d.Sleeps, BusyPasses: d.BusyPasses, TxKicks: d.TxKicks, Ticks: d.Ticks}
	for _, p := range d.Ports {
		if p.NIC {
			c.NICDrops += p.OtherDrops
			continue
		}
		c.OtherDrops += p.OtherDrops
		c.OtherMarks += p.OtherMarks
		c.TxDropped += p.TxDropped
	}
	if port < len(d.Ports) {
		p := d.Ports[port]
		c.ClientMaxData, c.ClientMaxHeaderBytes, c.ClientMaxOther = p.NDP.MaxDataDepth, p.NDP.MaxHeaderBytes, p.OtherMaxDepth
	}
	return c
}

// add adds o's counters to c's (queue high-water marks: the larger).
func (c *switchCounters) add(o *switchCounters) {
	c.RxFrames += o.RxFrames
	c.Trimmed += o.Trimmed
	c.Bounced += o.Bounced
	c.NDPDropped += o.NDPDropped
	c.OtherDrops += o.OtherDrops
	c.OtherMarks += o.OtherMarks
	c.TxDropped += o.TxDropped
	c.NICDrops += o.NICDrops
	c.NoBuffer += o.NoBuffer
	c.CPUSeconds += o.CPUSeconds
	c.Sleeps += o.Sleeps
	c.BusyPasses += o.BusyPasses
	c.TxKicks += o.TxKicks
	c.Ticks += o.Ticks
	c.ClientMaxData = max(c.ClientMaxData, o.ClientMaxData)
	c.ClientMaxHeaderBytes = max(c.ClientMaxHeaderBytes, o.ClientMaxHeaderBytes)
	c.ClientMaxOther = max(c.ClientMaxOther, o.ClientMaxOther)
}

// print writes the counters as one line.
func (c *switchCounters) print(w io.Writer) {
	fmt.Fprintf(w, "through the switch: trimmed %d, bounced %d, ndp dropped %d, tcp drops %d, ecn marks %d, tx dropped %d; receiver's port max %d data frames, %d header bytes, %d other frames; switch thread %.2f CPU s, %d sleeps, %d busy passes, %d ticks, %d kicks\n",
		c.Trimmed, c.Bounced, c.NDPDropped, c.OtherDrops, c.OtherMarks, c.TxDropped, c.ClientMaxData, c.ClientMaxHeaderBytes, c.ClientMaxOther, c.CPUSeconds, c.Sleeps, c.BusyPasses, c.Ticks, c.TxKicks)
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

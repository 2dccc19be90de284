package main

import (
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

// xdp-tx: transmit rate from one sending core through afxdp, counted on the
// receiving side by a second afxdp socket (busy-polling on the other core)
// and by its kernel XDP_STATISTICS, over a two-namespace veth testbed.
//
// Every UMEM frame of the sender is written once with a 1500-byte IPv4/UDP
// packet (1514-byte frame) before the clock starts; the timed loop is
// Alloc -> Transmit (which reaps completions) in batches, i.e. the cost of the
// AF_XDP TX path, not of building packets.

func init() {
	register(&subcommand{
		name:    "xdp-tx",
		summary: "AF_XDP transmit rate from one core, counted by an AF_XDP receiver (root)",
		run:     runXDPTx,
	})
}

type xdpTxResult struct {
	PacketBytes     int     `json:"packet_bytes"`
	DurationS       float64 `json:"duration_s"`
	Batch           int     `json:"batch"`
	SentFrames      uint64  `json:"sent_frames"`
	SentFPS         float64 `json:"sent_fps"`
	SentGbps        float64 `json:"sent_gbps"`
	ReceivedFrames  uint64  `json:"received_frames"`
	ReceivedFPS     float64 `json:"received_fps"`
	ReceivedGbps    float64 `json:"received_gbps"`
	ReceiverDropped uint64  `json:"receiver_kernel_dropped"`
	TxKicks         uint64  `json:"tx_kicks"`
	Mode            string  `json:"mode"`
}

func runXDPTx(args []string) error {
	fs := flag.NewFlagSet("xdp-tx", flag.ContinueOnError)
	duration := fs.Duration("duration", 3*time.Second, "measured duration")
	batch := fs.Int("batch", 64, "frames per Transmit call")
	attach := fs.String("attach", "auto", "XDP attach mode: auto, native or generic")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := parseAttach(*attach)
	if err != nil {
		return err
	}
	if *batch < 1 || *batch > 1024 {
		return fmt.Errorf("--batch %d: want 1..1024", *batch)
	}
	if err := requireRoot(); err != nil {
		return err
	}
	tb, pair, err := newPair()
	if err != nil {
		return err
	}
	defer tb.Close()
	res, err := xdpTx(pair, *duration, *batch, txPacketBytes, mode)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(res)
	}
	fmt.Printf("sent     %12d frames  %10.0f frames/s  %6.2f Gbit/s\n", res.SentFrames, res.SentFPS, res.SentGbps)
	fmt.Printf("received %12d frames  %10.0f frames/s  %6.2f Gbit/s  (kernel dropped %d)\n", res.ReceivedFrames, res.ReceivedFPS, res.ReceivedGbps, res.ReceiverDropped)
	fmt.Printf("%d-byte IP packets, %.1fs, batch %d, %s\n", res.PacketBytes, res.DurationS, res.Batch, res.Mode)
	return nil
}

const txPacketBytes = 1500

// maxXDPTxPacket is the largest IP packet one 4 KB UMEM frame holds behind
// the kernel's 256 bytes of XDP headroom and the Ethernet header.
const maxXDPTxPacket = 4096 - 256 - 14

// xdpTx sends packetBytes-byte IP packets (at most maxXDPTxPacket) from
// pair's A end for duration and counts what pair's B end receives.
func xdpTx(pair *testbed.Pair, duration time.Duration, batch, packetBytes int, attach afxdp.AttachMode) (xdpTxResult, error) {
	if packetBytes < 64 || packetBytes > maxXDPTxPacket {
		return xdpTxResult{}, fmt.Errorf("xdp-tx: %d-byte packets: want 64..%d (one UMEM frame)", packetBytes, maxXDPTxPacket)
	}
	cfg := afxdp.Config{UDPPort: ppXDPPort, NumFrames: 8192, RingSize: 2048, Attach: attach}
	if 14+packetBytes > afxdp.DefaultFrameSize-256 {
		cfg.FrameSize = 4096
	}
	var pa, pb *afxdp.Port
	cfg.Interface = pair.Veth.A.Name
	if err := pair.A.Do(func() (err error) { pa, err = afxdp.Open(cfg); return err }); err != nil {
		return xdpTxResult{}, err
	}
	defer pa.Close()
	cfg.Interface = pair.Veth.B.Name
	if err := pair.B.Do(func() (err error) { pb, err = afxdp.Open(cfg); return err }); err != nil {
		return xdpTxResult{}, err
	}
	defer pb.Close()

	// Write the packet into every frame the sender can allocate.
	u := pa.UMEM()
	all := make([]afxdp.Desc, u.NumFrames())
	n := u.Alloc(all)
	f := ppFrame(pair, ppXDPPort)
	payload := make([]byte, packetBytes-28)
	for i := range all[:n] {
		f.Build(u.Buffer(all[i]), payload)
	}
	if _, err := u.Release(all[:n]); err != nil {
		return xdpTxResult{}, err
	}
	frameLen := uint32(14 + packetBytes)

	cpuTx, cpuRx := cpuPair()
	var stop atomic.Bool
	var rxCount atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // receiver: owns pb
		defer wg.Done()
		if err := lockAndPin(cpuRx); err != nil {
			errs <- err
			return
		}
		ub, q := pb.UMEM(), pb.Queues()[0]
		rx := make([]afxdp.Desc, 256)
		for !stop.Load() {
			n := q.Receive(rx)
			if n == 0 {
				continue
			}
			rxCount.Add(uint64(n))
			if _, err := ub.Release(rx[:n]); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // sender: owns pa
		defer wg.Done()
		if err := lockAndPin(cpuTx); err != nil {
			errs <- err
			return
		}
		q := pa.Queues()[0]
		tx := make([]afxdp.Desc, batch)
		for !stop.Load() {
			k := u.Alloc(tx)
			for i := range tx[:k] {
				tx[i].Len = frameLen
			}
			for off := 0; off < k; {
				m, err := q.Transmit(tx[off:k])
				if err != nil {
					errs <- err
					return
				}
				off += m
			}
			if k == 0 {
				q.Transmit(nil) // reap completions, kick what a partial sendto left
			}
		}
	}()
	// Sent = frames the kernel completed (the queue's counter, readable from
	// any goroutine); received = frames our receiver took off its RX ring.
	snapshot := func() (tx, rx, dropped, kicks uint64) {
		sa, _ := pa.Queues()[0].Stats()
		sb, _ := pb.Queues()[0].Stats()
		return sa.TxCompleted, rxCount.Load(), sb.KernelRxDropped + sb.KernelRxRingFull, sa.TxKicks
	}
	time.Sleep(300 * time.Millisecond) // warm-up, unmeasured
	tx0, rx0, d0, k0 := snapshot()
	t0 := time.Now()
	time.Sleep(duration)
	tx1, rx1, d1, k1 := snapshot()
	el := time.Since(t0).Seconds()
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return xdpTxResult{}, err
		}
	}
	in := pa.Info()
	bits := float64(packetBytes * 8)
	res := xdpTxResult{
		PacketBytes: packetBytes, DurationS: round2(el), Batch: batch,
		SentFrames: tx1 - tx0, ReceivedFrames: rx1 - rx0, ReceiverDropped: d1 - d0, TxKicks: k1 - k0,
		Mode: fmt.Sprintf("zerocopy=%v attach=%v need_wakeup=%v", in.ZeroCopy, in.Attach, in.NeedWakeup),
	}
	res.SentFPS = float64(int64(float64(res.SentFrames) / el))
	res.ReceivedFPS = float64(int64(float64(res.ReceivedFrames) / el))
	res.SentGbps = round2(res.SentFPS * bits / 1e9)
	res.ReceivedGbps = round2(res.ReceivedFPS * bits / 1e9)
	return res, nil
}

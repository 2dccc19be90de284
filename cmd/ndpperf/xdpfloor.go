package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

// xdpFloor is the raw AF_XDP floor for N concurrent exchanges (rpc --conn
// persistent --compare xdp, N = --clients): the best case the kernel's
// copy-mode path allows N exchanges in flight at once, with no stack, no
// goroutines and batched kicks. It is xdpPingpong's two sockets and echo
// (one pinned thread a side; the echo swaps headers and sends back whatever
// one Receive returned with one kick) driven by a client that keeps N
// requests in flight on its one pinned thread: each request carries its slot
// and a sequence number in its first 8 payload bytes, and the answers taken
// by one Receive send their slots' next requests in one kick.
//
// A slot's round trip runs from just before its request's frame is built
// (the copy of --size bytes and the UDP checksum included, as ndp's Write
// starts its clock before its copy) to the Receive that returns its answer.
type xdpFloor struct {
	*xdpPingpong
	slots int

	t0       []time.Time // per slot: when its outstanding request's build began
	tag      []uint64    // per slot: its outstanding request's tag (0: none)
	measured []bool      // per slot: whether its outstanding request is measured
	answered []int       // per slot: answers taken over the run
	lastTag  uint64      // request number, shifted left by slotBits
	txb      []afxdp.Desc
	ready    []int // slots answered in the current batch
}

// slotBits is the low bits of a request's tag that name its slot (--clients
// is at most 64).
const slotBits = 8

func newXDPFloor(pair *testbed.Pair, size, slots int) (*xdpFloor, error) {
	if slots < 1 || slots >= 1<<slotBits {
		return nil, fmt.Errorf("xdp floor: %d slots, want 1..%d", slots, 1<<slotBits-1)
	}
	x, err := newXDPPingpong(pair, pingpongOpts{size: size})
	if err != nil {
		return nil, err
	}
	x.rx = make([]afxdp.Desc, max(64, slots)) // every answer in flight fits one Receive
	x.erx = make([]afxdp.Desc, max(64, slots))
	return &xdpFloor{xdpPingpong: x, slots: slots,
		t0: make([]time.Time, slots), tag: make([]uint64, slots), measured: make([]bool, slots),
		answered: make([]int, slots), txb: make([]afxdp.Desc, 0, slots), ready: make([]int, 0, slots)}, nil
}

func (f *xdpFloor) mode() string {
	in := f.pa.Info()
	return fmt.Sprintf("raw AF_XDP floor for %d concurrent exchanges, no stack: one pinned thread a side keeps them in flight, batched kicks (the best case copy mode allows); afxdp zerocopy=%v attach=%v need_wakeup=%v",
		f.slots, in.ZeroCopy, in.Attach, in.NeedWakeup)
}

// turn makes warm+per exchanges over the slots (the first warm issued are
// not measured) and returns the measured round trips. A request unanswered
// after timeout is counted lost and its slot goes on with its next.
func (f *xdpFloor) turn(warm, per int, timeout time.Duration) ([]time.Duration, int, error) {
	u, q := f.pa.UMEM(), f.pa.Queues()[0]
	rtts := make([]time.Duration, 0, per)
	total, issued, inFlight, lost := warm+per, 0, 0, 0
	for i := range f.tag {
		f.tag[i] = 0
	}
	// issue builds the next request of each slot in slots and sends them
	// in one kick.
	issue := func(slots []int) error {
		k := min(len(slots), total-issued)
		if k == 0 {
			return nil
		}
		f.txb = f.txb[:k]
		deadline := time.Now().Add(timeout)
		for got := 0; got < k; {
			got += u.Alloc(f.txb[got:k])
			if got < k {
				q.Transmit(nil) // reap completions
				if time.Now().After(deadline) {
					return errors.New("xdp floor: no free UMEM frame")
				}
			}
		}
		for j, s := range slots[:k] {
			f.t0[s] = time.Now()
			buf := u.Buffer(f.txb[j])
			f.txb[j].Len = uint32(copy(buf, f.tmpl))
			f.lastTag += 1 << slotBits
			f.tag[s] = f.lastTag | uint64(s)
			setSeq(buf[testbed.UDPHeaderLen:], f.tag[s])
			fixUDPChecksum(buf[:f.txb[j].Len])
			f.measured[s] = issued >= warm
			issued++
		}
		inFlight += k
		for sent := 0; sent < k; {
			n, err := q.Transmit(f.txb[sent:k])
			if err != nil {
				return err
			}
			sent += n
		}
		return nil
	}
	f.ready = f.ready[:0]
	for s := 0; s < f.slots; s++ {
		f.ready = append(f.ready, s)
	}
	if err := issue(f.ready); err != nil {
		return rtts, lost, err
	}
	for idle := 0; inFlight > 0; {
		got := q.Receive(f.rx)
		if got == 0 {
			// Look for requests past their timeout now and then (a clock
			// read is not free); re-kick if a transient sendto error left
			// frames on the TX ring (no syscall when the kernel took them).
			if idle++; idle&1023 == 0 {
				now := time.Now()
				f.ready = f.ready[:0]
				for s, tag := range f.tag {
					if tag != 0 && now.Sub(f.t0[s]) > timeout {
						f.tag[s] = 0
						inFlight--
						lost++
						f.ready = append(f.ready, s)
					}
				}
				if err := issue(f.ready); err != nil {
					return rtts, lost, err
				}
			}
			if _, err := q.Transmit(nil); err != nil {
				return rtts, lost, err
			}
			continue
		}
		idle = 0
		now := time.Now()
		f.ready = f.ready[:0]
		for _, d := range f.rx[:got] {
			tag := getSeq(u.Bytes(d)[testbed.UDPHeaderLen:])
			s := int(tag & (1<<slotBits - 1))
			if s >= f.slots || tag == 0 || f.tag[s] != tag {
				continue // a late answer to a request counted lost
			}
			if f.measured[s] {
				rtts = append(rtts, now.Sub(f.t0[s]))
			}
			f.tag[s] = 0
			f.answered[s]++
			inFlight--
			f.ready = append(f.ready, s)
		}
		if _, err := u.Release(f.rx[:got]); err != nil {
			return rtts, lost, err
		}
		if err := issue(f.ready); err != nil {
			return rtts, lost, err
		}
	}
	return rtts, lost, nil
}

// xdpFloorCounters are the floor's two sockets' frames and kicks over the
// whole run (warmup included): how many frames each kick carried.
type xdpFloorCounters struct {
	ClientTxFrames uint64 `json:"client_tx_frames"`
	ClientTxKicks  uint64 `json:"client_tx_kicks"`
	ClientRxBatch  uint64 `json:"client_rx_batches"`
	ServerTxFrames uint64 `json:"server_tx_frames"`
	ServerTxKicks  uint64 `json:"server_tx_kicks"`
	ServerRxBatch  uint64 `json:"server_rx_batches"`
}

func (f *xdpFloor) counters() *xdpFloorCounters {
	cs, err1 := f.pa.Stats()
	ss, err2 := f.pb.Stats()
	if err1 != nil || err2 != nil || len(cs) == 0 || len(ss) == 0 {
		return nil
	}
	return &xdpFloorCounters{ClientTxFrames: cs[0].TxFrames, ClientTxKicks: cs[0].TxKicks, ClientRxBatch: cs[0].RxBatches,
		ServerTxFrames: ss[0].TxFrames, ServerTxKicks: ss[0].TxKicks, ServerRxBatch: ss[0].RxBatches}
}

func (c *xdpFloorCounters) print(w io.Writer) {
	per := func(a, b uint64) float64 { return float64(a) / float64(max(b, 1)) }
	fmt.Fprintf(w, "  xdp floor: client %d frames in %d kicks (%.2f frames/kick), %d receive batches; server %d frames in %d kicks (%.2f frames/kick), %d receive batches\n",
		c.ClientTxFrames, c.ClientTxKicks, per(c.ClientTxFrames, c.ClientTxKicks), c.ClientRxBatch,
		c.ServerTxFrames, c.ServerTxKicks, per(c.ServerTxFrames, c.ServerTxKicks), c.ServerRxBatch)
}

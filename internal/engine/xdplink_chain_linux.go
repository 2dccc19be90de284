package engine

import (
	"golang.org/x/sys/unix"
)

// A multi-buffer XDPLink (interface MTU above what one 4 KB UMEM frame
// holds) moves each frame as a chain of UMEM frames, linked by
// XDP_PKT_CONTD (afxdp.Config.MultiBuffer):
//
//	receive:  RX ring ── chain of rxChain descriptors at most ──▶ joined
//	          into rxBuf[k] (one copy; a lone descriptor is handed out
//	          in place, as without multi-buffer)
//	transmit: AllocTx hands out txBuf[i], contiguous, backed by txChain
//	          UMEM frames (l.tx[i*txChain:]); Transmit copies each frame
//	          into as many of them as it fills and puts the chain on the
//	          TX ring; the unused ones go back to spare.
//
// The fragments of a received chain are not contiguous (each UMEM frame
// has its own XDP headroom), and the endpoint parses and builds frames
// contiguously, so each jumbo frame is copied once more on each side
// (9 KB, against the kernel's copies and the endpoint's own). Nothing
// here allocates once rxBuf and txBuf have grown to the batch size.

// receiveChains is Receive for a multi-buffer link: whole packets, up to
// len(frames); whole packets beyond that stay held for the next call.
func (l *XDPLink) receiveChains(frames [][]byte) int {
	n := l.nheld
	if n < len(frames) {
		want := min(max(len(frames), l.rxChain), len(l.rx)-n)
		n += l.q.Receive(l.rx[n : n+want])
	}
	i, k := 0, 0
	for i < n && k < len(frames) {
		j := i
		for j < n-1 && l.rx[j].Options&unix.XDP_PKT_CONTD != 0 {
			j++
		}
		if j == i {
			frames[k] = l.umem.Bytes(l.rx[i])
		} else {
			// rxBuf[k] is the k-th frame's join buffer; single-descriptor
			// frames before it took none, so it may be several short.
			for len(l.rxBuf) <= k {
				l.rxBuf = append(l.rxBuf, make([]byte, 0, l.frameCap))
			}
			b := l.rxBuf[k][:0]
			for _, d := range l.rx[i : j+1] {
				b = append(b, l.umem.Bytes(d)...) // within cap: the kernel delivers at most the MTU
			}
			l.rxBuf[k] = b
			frames[k] = b
		}
		k++
		i = j + 1
	}
	l.nrx, l.nheld = i, n-i
	return k
}

// releaseChains is ReleaseReceived for a multi-buffer link: it gives back
// the descriptors of the frames handed out and keeps the held packets,
// moved to the front.
func (l *XDPLink) releaseChains() {
	if l.nrx > 0 {
		l.umem.Release(l.rx[:l.nrx])
		copy(l.rx, l.rx[l.nrx:l.nrx+l.nheld])
		l.nrx = 0
	}
}

// allocChains is AllocTx for a multi-buffer link: a buffer counts txChain
// frames against the TX ring's room and holds txChain UMEM frames.
func (l *XDPLink) allocChains(bufs [][]byte) int {
	c := l.txChain
	base := l.ntxAlloc
	want := min(len(bufs), len(l.tx)/c-base, (l.ringSize-l.q.TxOutstanding())/c-base)
	if want <= 0 {
		return 0
	}
	from, to := base*c, (base+want)*c
	got := from
	for got < to && len(l.spare) > 0 {
		l.tx[got] = l.spare[len(l.spare)-1]
		l.spare = l.spare[:len(l.spare)-1]
		got++
	}
	if got < to {
		got += l.umem.Alloc(l.tx[got:to])
	}
	k := (got - from) / c
	for i := from + k*c; i < got; i++ { // a partial buffer's frames wait in spare
		l.spare = append(l.spare, l.tx[i])
	}
	for i := 0; i < k; i++ {
		if base+i == len(l.txBuf) {
			l.txBuf = append(l.txBuf, make([]byte, 0, l.frameCap))
		}
		bufs[i] = l.txBuf[base+i][:0]
	}
	l.ntxAlloc += k
	return k
}

// swapChains is SwapTx for a multi-buffer link.
func (l *XDPLink) swapChains(i, j int) {
	l.txBuf[i], l.txBuf[j] = l.txBuf[j], l.txBuf[i]
	c := l.txChain
	for p := 0; p < c; p++ {
		l.tx[i*c+p], l.tx[j*c+p] = l.tx[j*c+p], l.tx[i*c+p]
	}
}

// transmitChains is Transmit for a multi-buffer link: each frame is copied
// into its buffer's UMEM frames and goes out as one chain.
func (l *XDPLink) transmitChains(frames [][]byte) error {
	c := l.txChain
	out := l.txOut[:0]
	for i, f := range frames {
		for p := 0; p < c; p++ {
			d := l.tx[i*c+p]
			buf := l.umem.Buffer(d)
			if len(f) == 0 {
				l.spare = append(l.spare, d)
				continue
			}
			d.Len = uint32(copy(buf, f))
			f = f[d.Len:]
			d.Options = 0
			if len(f) > 0 {
				d.Options = unix.XDP_PKT_CONTD
			}
			out = append(out, d)
		}
	}
	for i := len(frames) * c; i < l.ntxAlloc*c; i++ {
		l.spare = append(l.spare, l.tx[i])
	}
	l.ntxAlloc = 0
	l.txOut = out
	return l.put(out)
}

package afxdp

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Queue is one AF_XDP socket bound to one queue of the Port's interface,
// with its own fill, completion, RX and TX rings over the Port's UMEM.
//
// A Queue is driven by the single goroutine that owns the Port: Receive,
// Put, Transmit, Complete and Wait must not be called concurrently with each other
// or with UMEM.Alloc/Release. Stats, RxPending and Kick may be called from
// anywhere.
type Queue struct {
	id     int
	iface  string
	fd     int
	umem   *UMEM
	shift  uint // log2(frame size)
	fill   addrRing
	comp   addrRing
	rx     descRing
	tx     descRing
	mmaps  [4][]byte
	wakeup bool // bound with XDP_USE_NEED_WAKEUP
	zc     bool // bound in zero-copy mode
	sg     bool // bound with XDP_USE_SG: packets are descriptor chains

	txBudget      int // XDP_MAX_TX_SKB_BUDGET the kernel accepted (0: kernel default)
	waiter        *waiter
	pollFDs       [2]unix.PollFd // socket, port wake eventfd
	txOutstanding int            // frames submitted on TX and not yet completed
	refillBatch   uint32
	ctr           queueCounters
}

type queueSetup struct {
	iface        string
	ifindex      int
	queue        int
	ringSize     uint32
	bind         BindMode
	needWakeup   bool
	txBudget     int
	sg           bool // XDP_USE_SG (Config.MultiBuffer)
	sharedFD     int  // -1: this socket registers the UMEM
	bindDeadline time.Time
}

func newQueue(u *UMEM, s queueSetup) (*Queue, error) {
	q := &Queue{id: s.queue, iface: s.iface, fd: -1, umem: u}
	for fs := u.frameSize; fs > 1; fs >>= 1 {
		q.shift++
	}
	q.refillBatch = min(s.ringSize/4, 64)
	fail := func(op string, err error) (*Queue, error) {
		q.close()
		se := &SyscallError{Op: op, Iface: s.iface, Queue: s.queue, Err: err}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			se.Sentinel = ErrPermission
			se.Hint = "AF_XDP sockets need CAP_NET_ADMIN and CAP_NET_RAW (or root)"
		}
		return nil, se
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EAFNOSUPPORT) {
			return nil, &SyscallError{Op: "socket(AF_XDP)", Iface: s.iface, Queue: s.queue, Err: err, Hint: "kernel built without CONFIG_XDP_SOCKETS"}
		}
		return fail("socket(AF_XDP)", err)
	}
	q.fd = fd
	if s.sharedFD < 0 {
		if err := registerUMEM(fd, u.mem, uint32(u.frameSize), uint32(u.headroom)); err != nil {
			return fail("setsockopt XDP_UMEM_REG", err)
		}
	}
	// Every socket has its own fill and completion ring, also when it shares
	// the UMEM (required when the sharing sockets are on different queues).
	for _, o := range []struct {
		name string
		opt  int
	}{
		{"XDP_UMEM_FILL_RING", unix.XDP_UMEM_FILL_RING},
		{"XDP_UMEM_COMPLETION_RING", unix.XDP_UMEM_COMPLETION_RING},
		{"XDP_RX_RING", unix.XDP_RX_RING},
		{"XDP_TX_RING", unix.XDP_TX_RING},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, int(s.ringSize)); err != nil {
			return fail("setsockopt "+o.name, err)
		}
	}
	if s.txBudget > 0 {
		// Kernels before 6.16 do not know the option: keep their default (32).
		err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, s.txBudget)
		switch {
		case err == nil:
			q.txBudget = s.txBudget
		case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOPROTOOPT):
			return fail("setsockopt XDP_MAX_TX_SKB_BUDGET", err)
		}
	}
	off, err := getsockoptMmapOffsets(fd)
	if err != nil {
		return fail("getsockopt XDP_MMAP_OFFSETS", err)
	}
	rings := []struct {
		name  string
		pgoff int64
		off   unix.XDPRingOffset
		slot  uintptr
	}{
		{"fill", unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, 8},
		{"completion", unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, 8},
		{"rx", unix.XDP_PGOFF_RX_RING, off.Rx, descSize},
		{"tx", unix.XDP_PGOFF_TX_RING, off.Tx, descSize},
	}
	for i, r := range rings {
		m, err := mapRing(fd, r.pgoff, r.off, s.ringSize, r.slot)
		if err != nil {
			return fail("mmap "+r.name+" ring", err)
		}
		q.mmaps[i] = m
	}
	q.fill.init(q.mmaps[0], off.Fr, s.ringSize, true)
	q.comp.init(q.mmaps[1], off.Cr, s.ringSize, false)
	q.rx.init(q.mmaps[2], off.Rx, s.ringSize, false)
	q.tx.init(q.mmaps[3], off.Tx, s.ringSize, true)

	// Fill the fill ring before bind so the first frames find buffers.
	q.refill(true)

	sa := &unix.SockaddrXDP{Ifindex: uint32(s.ifindex), QueueID: uint32(s.queue)}
	if s.sharedFD >= 0 {
		// Shared sockets inherit copy/zero-copy and need_wakeup from the
		// socket that registered the UMEM; the kernel rejects flags here.
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(s.sharedFD)
	} else {
		switch s.bind {
		case BindZeroCopy:
			sa.Flags = unix.XDP_ZEROCOPY
		case BindCopy:
			sa.Flags = unix.XDP_COPY
		}
		if s.needWakeup {
			sa.Flags |= unix.XDP_USE_NEED_WAKEUP
		}
		if s.sg {
			sa.Flags |= unix.XDP_USE_SG
		}
	}
	for {
		err = unix.Bind(fd, sa)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(s.bindDeadline) {
			break
		}
		// A socket closed a moment ago on this queue is still being torn
		// down (the kernel releases it from an RCU callback, ~50 ms).
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		q.close()
		se := &SyscallError{Op: "bind AF_XDP socket", Iface: s.iface, Queue: s.queue, Err: err}
		switch {
		case errors.Is(err, unix.EBUSY):
			se.Sentinel = ErrQueueBusy
			se.Hint = "another AF_XDP socket holds this queue; stop it or pick another queue"
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT):
			if s.bind == BindZeroCopy {
				se.Sentinel = ErrZeroCopyUnsupported
				se.Hint = "the driver has no AF_XDP zero-copy support; use BindAuto or BindCopy"
			}
		case errors.Is(err, unix.EINVAL):
			se.Hint = "queue id beyond the interface's queues, or a bind flag this kernel lacks (XDP_USE_SG: Linux 6.6+)"
		case errors.Is(err, unix.EPERM):
			se.Sentinel = ErrPermission
		}
		return nil, se
	}
	// Shared sockets inherit need_wakeup from the first socket's bind;
	// Open passes the inherited value in s.needWakeup.
	q.wakeup = s.needWakeup
	q.sg = s.sg
	var opts int
	if v, err := unix.GetsockoptInt(fd, unix.SOL_XDP, unix.XDP_OPTIONS); err == nil {
		opts = v
	}
	q.zc = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	return q, nil
}

func (q *Queue) close() error {
	for i, m := range q.mmaps {
		if m != nil {
			_ = unix.Munmap(m)
			q.mmaps[i] = nil
		}
	}
	if q.fd >= 0 {
		err := unix.Close(q.fd)
		q.fd = -1
		return err
	}
	return nil
}

// ID is the queue id this socket is bound to.
func (q *Queue) ID() int { return q.id }

// FD is the AF_XDP socket. Poll it for POLLIN (frames on the RX ring) to
// sleep instead of spinning; see Wait.
func (q *Queue) FD() int { return q.fd }

// ZeroCopy reports whether the kernel bound this socket in zero-copy mode.
func (q *Queue) ZeroCopy() bool { return q.zc }

// refill moves free frames onto the fill ring. Unless force is set it waits
// until a batch's worth of slots is free, to touch the shared indices less.
func (q *Queue) refill(force bool) {
	free := q.fill.prodFree(q.fill.size)
	if free == 0 || (!force && free < q.refillBatch) {
		return
	}
	led := q.umem.ledger
	var i uint32
	for ; i < free; i++ {
		idx, ok := led.pop(OwnerFill)
		if !ok {
			q.ctr.fillStarved.Add(1)
			break
		}
		q.fill.slots[(q.fill.cachedProd+i)&q.fill.mask] = uint64(idx) << q.shift
	}
	if i > 0 {
		q.fill.prodSubmit(i)
	}
}

// Receive takes up to len(descs) received frames off the RX ring into descs
// and returns how many. The frames now belong to the caller: each must be
// given back with UMEM.Release or handed to Transmit. Receive first tops up
// the fill ring from the free list, and when nothing arrived and the kernel
// asked for a wakeup on the fill ring (need_wakeup), makes one recvfrom.
// It never blocks; use Wait to sleep. After Close it returns 0.
func (q *Queue) Receive(descs []Desc) int {
	if q.waiter.closed.Load() {
		return 0
	}
	q.refill(false)
	n := q.rx.consAvail(uint32(len(descs)))
	if n == 0 {
		if q.wakeup && q.fill.needWakeup() {
			wakeRx(q.fd)
			q.ctr.rxWakeups.Add(1)
		}
		return 0
	}
	led := q.umem.ledger
	cons := q.rx.cachedCons
	if q.sg {
		// Whole packets only: leave a chain's head on the ring until its
		// last descriptor fits in descs too.
		for n > 0 && q.rx.slots[(cons+n-1)&q.rx.mask].Options&unix.XDP_PKT_CONTD != 0 {
			n--
		}
		if n == 0 {
			return 0
		}
	}
	for i := uint32(0); i < n; i++ {
		d := q.rx.slots[(cons+i)&q.rx.mask]
		descs[i] = d
		// A violation here (the kernel returned a frame that was not on a
		// fill ring) is counted in the ledger; the frame is still handed out.
		_ = led.move("receive", uint32(d.Addr>>q.shift), OwnerFill, OwnerApp)
	}
	q.rx.consRelease(n)
	q.ctr.rxFrames.Add(uint64(n))
	q.ctr.rxBatches.Add(1)
	return int(n)
}

// Transmit puts descs on the TX ring, in order, and tells the kernel (one
// sendto per call, only when the kernel needs it: always in copy mode, only
// when the TX ring's need_wakeup flag is set in zero-copy mode). Each
// descriptor must lie inside one frame the application owns (from Receive or
// Alloc). It returns how many it accepted: fewer than len(descs) with a nil
// error means the ring is full (backpressure; retry the rest later), with a
// non-nil error descs[n] was refused (ErrBadDescriptor or a *FrameError).
//
// Transmit first reaps the completion ring, so transmitted frames return to
// the free list without a separate call. Transmit(nil) only reaps and
// re-kicks frames a previous sendto left on the ring (copy mode sends at
// most TxSkbBudget frames per sendto).
func (q *Queue) Transmit(descs []Desc) (int, error) {
	n, err := q.Put(descs)
	if err == ErrClosed {
		return 0, err
	}
	if kerr := q.kick(); kerr != nil && err == nil {
		err = kerr
	}
	return n, err
}

// Put is Transmit without the kick: it reaps the completion ring and puts
// descs on the TX ring, published to the kernel, which sends them at the
// next Kick (or Transmit). It lets an owner that drives the Queue under a
// lock make the syscall after releasing it (Kick). Put(nil) only reaps.
func (q *Queue) Put(descs []Desc) (int, error) {
	if q.waiter.closed.Load() {
		return 0, ErrClosed
	}
	q.complete()
	n := q.tx.prodFree(uint32(len(descs)))
	if q.sg {
		// Whole chains only: a packet the ring cannot take entirely waits.
		for n > 0 && descs[n-1].Options&unix.XDP_PKT_CONTD != 0 {
			n--
		}
	}
	led := q.umem.ledger
	prod := q.tx.cachedProd
	var err error
	var i, head uint32 // head: first descriptor of the packet being put
	for ; i < n; i++ {
		d := descs[i]
		if !q.umem.validTx(d) || (d.Options&unix.XDP_PKT_CONTD != 0 && (!q.sg || i-head+1 >= MaxFragments)) {
			err = fmt.Errorf("%w: transmit addr %#x len %d options %#x (frame size %d, UMEM %d bytes, multi-buffer %v)", ErrBadDescriptor, d.Addr, d.Len, d.Options, q.umem.frameSize, len(q.umem.mem), q.sg)
			q.ctr.txInvalid.Add(1)
			break
		}
		if fe := led.move("transmit", uint32(d.Addr>>q.shift), OwnerApp, OwnerTx); fe != nil {
			err = fe
			q.ctr.txInvalid.Add(1)
			break
		}
		q.tx.slots[(prod+i)&q.tx.mask] = d
		if d.Options&unix.XDP_PKT_CONTD == 0 {
			head = i + 1
		}
	}
	if err != nil && head < i {
		// descs[i] was refused inside a chain: the chain's first
		// descriptors go back to the caller, unsent.
		for j := head; j < i; j++ {
			_ = led.move("transmit undo", uint32(descs[j].Addr>>q.shift), OwnerTx, OwnerApp)
		}
		i = head
	}
	if i > 0 {
		q.tx.prodSubmit(i)
		q.txOutstanding += int(i)
		q.ctr.txFrames.Add(uint64(i))
		q.ctr.txBatches.Add(1)
	}
	if err == nil && int(i) < len(descs) {
		q.ctr.txRingFull.Add(1)
	}
	return int(i), err
}

// Kick tells the kernel to send what Put published on the TX ring: one
// sendto, made only when frames wait on the ring and the kernel wants a
// wakeup (always in copy mode). Unlike the other methods it may be called
// from any goroutine, concurrently with the owner's calls and with other
// Kicks: it reads only the ring's shared indices and flags (atomics), and
// the kernel serialises sendto on the socket (xsk_generic_xmit holds the
// socket's mutex), so concurrent kicks each send what the ring holds when
// they enter, and a frame published before a Kick starts is sent by it or
// by one already in progress. Close waits for Kicks in progress (as for
// Wait); after it Kick returns ErrClosed. Transient errors (the kernel
// takes the frames on the next kick) are counted, not returned.
func (q *Queue) Kick() error {
	if !q.waiter.enter() {
		return ErrClosed
	}
	defer q.waiter.exit()
	return q.kick()
}

// kick is Kick without the Close handshake (the owner's own calls).
func (q *Queue) kick() error {
	if q.wakeup && !q.tx.needWakeup() {
		return nil
	}
	if !q.tx.published() {
		return nil
	}
	q.ctr.txKicks.Add(1)
	switch e := kick(q.fd); e {
	case 0:
		return nil
	case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.ENETDOWN, unix.EINTR:
		q.ctr.txKickErrors.Add(1)
		return nil
	default:
		return &SyscallError{Op: "sendto (TX kick)", Iface: q.iface, Queue: q.id, Err: e}
	}
}

// Complete reaps the completion ring: frames the kernel finished sending go
// back to the free list. It returns how many. Transmit calls it; call it
// directly only when not transmitting for a while.
func (q *Queue) Complete() int {
	if q.waiter.closed.Load() {
		return 0
	}
	return q.complete()
}

func (q *Queue) complete() int {
	n := q.comp.consAvail(q.comp.size)
	if n == 0 {
		return 0
	}
	led := q.umem.ledger
	cons := q.comp.cachedCons
	for i := uint32(0); i < n; i++ {
		addr := q.comp.slots[(cons+i)&q.comp.mask]
		_ = led.push("complete", uint32(addr>>q.shift), OwnerTx)
	}
	q.comp.consRelease(n)
	q.txOutstanding -= int(n)
	q.ctr.txCompleted.Add(uint64(n))
	return int(n)
}

// TxOutstanding is the number of frames transmitted on this queue and not yet
// returned by the completion ring.
func (q *Queue) TxOutstanding() int { return q.txOutstanding }

// Wait blocks until the RX ring has frames, Port.Wake is called or timeout
// passes (negative: forever), using poll(2) on the socket and the port's
// eventfd: the adaptive-mode alternative to spinning on Receive. It returns
// true when frames are ready, false on timeout, wake-up or EINTR, and
// ErrClosed when the Port is closed (Close may be called from another
// goroutine while the owner sleeps here).
func (q *Queue) Wait(timeout time.Duration) (bool, error) {
	if !q.waiter.enter() {
		return false, ErrClosed
	}
	defer q.waiter.exit()
	if q.rx.consAvail(1) > 0 {
		return true, nil
	}
	q.pollFDs[0] = unix.PollFd{Fd: int32(q.fd), Events: unix.POLLIN}
	q.pollFDs[1] = unix.PollFd{Fd: int32(q.waiter.fd), Events: unix.POLLIN}
	return q.waiter.poll(q.pollFDs[:], timeout, q.iface, q.id)
}

// RxPending reports whether the RX ring holds descriptors not yet
// released by Receive. Unlike the other methods it is safe to call from
// any goroutine (it reads the ring's shared indices only): a sleeper
// checks it before parking.
func (q *Queue) RxPending() bool { return q.rx.published() }

// Stats returns the queue's kernel and own counters.
func (q *Queue) Stats() (QueueStats, error) {
	s := QueueStats{Queue: q.id}
	q.ctr.fill(&s)
	ks, err := getsockoptStatistics(q.fd)
	if err != nil {
		return s, &SyscallError{Op: "getsockopt XDP_STATISTICS", Iface: q.iface, Queue: q.id, Err: err}
	}
	s.KernelRxDropped = ks.Rx_dropped
	s.KernelRxInvalidDescs = ks.Rx_invalid_descs
	s.KernelTxInvalidDescs = ks.Tx_invalid_descs
	s.KernelRxRingFull = ks.Rx_ring_full
	s.KernelRxFillRingEmpty = ks.Rx_fill_ring_empty_descs
	s.KernelTxRingEmptyDescs = ks.Tx_ring_empty_descs
	return s, nil
}

package afxdp

import "sync/atomic"

// QueueStats are one queue's counters: the kernel's XDP_STATISTICS and our
// own. Our counters are updated once per batch by the owning goroutine
// (atomic adds, so Stats may be read from any goroutine).
type QueueStats struct {
	Queue int

	// Kernel counters (getsockopt XDP_STATISTICS).
	KernelRxDropped        uint64 // dropped for reasons other than a full RX ring or empty fill ring
	KernelRxInvalidDescs   uint64 // invalid fill ring descriptors
	KernelTxInvalidDescs   uint64 // invalid TX descriptors (bad addr/len)
	KernelRxRingFull       uint64 // dropped because the RX ring was full
	KernelRxFillRingEmpty  uint64 // times the fill ring was empty when a frame arrived
	KernelTxRingEmptyDescs uint64 // times the kernel found the TX ring empty

	// Our counters.
	RxFrames     uint64 // descriptors handed out by Receive
	RxBatches    uint64 // Receive calls that returned > 0
	RxWakeups    uint64 // recvfrom calls made because the fill ring needed a wakeup
	FillStarved  uint64 // refills that found the free list empty
	TxFrames     uint64 // descriptors accepted by Transmit
	TxBatches    uint64 // Transmit calls that accepted > 0
	TxRingFull   uint64 // Transmit calls that accepted fewer than offered (backpressure)
	TxKicks      uint64 // sendto calls
	TxKickErrors uint64 // sendto calls that failed with a transient error (EAGAIN, EBUSY, ENOBUFS, ENETDOWN)
	TxCompleted  uint64 // frames reaped from the completion ring
	TxInvalid    uint64 // descriptors Transmit refused (outside a frame or not owned by the app)
}

type queueCounters struct {
	rxFrames, rxBatches, rxWakeups, fillStarved atomic.Uint64
	txFrames, txBatches, txRingFull, txKicks    atomic.Uint64
	txKickErrors, txCompleted, txInvalid        atomic.Uint64
}

func (c *queueCounters) fill(s *QueueStats) {
	s.RxFrames = c.rxFrames.Load()
	s.RxBatches = c.rxBatches.Load()
	s.RxWakeups = c.rxWakeups.Load()
	s.FillStarved = c.fillStarved.Load()
	s.TxFrames = c.txFrames.Load()
	s.TxBatches = c.txBatches.Load()
	s.TxRingFull = c.txRingFull.Load()
	s.TxKicks = c.txKicks.Load()
	s.TxKickErrors = c.txKickErrors.Load()
	s.TxCompleted = c.txCompleted.Load()
	s.TxInvalid = c.txInvalid.Load()
}

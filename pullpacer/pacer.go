package pullpacer

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ndpstack/ndpstack/ndp"
)

// Op is the kind of a Request to the pacer.
type Op uint8

// Request operations; each maps to one PullQueue method.
const (
	OpAdd      Op = iota + 1 // Add(Handle, N)
	OpSetFlow                // SetFlow(Handle, Flow{Priority, Size, Deadline}, pacer's now)
	OpProgress               // Progress(Handle, N bytes received so far)
	OpDrop                   // Drop(Handle): the receiver saw LAST
	OpRemove                 // Remove(Handle): connection closed
	OpRefund                 // Refund(pacer's now, N wire bytes pulled packets came back short)
)

// Request is one instruction from the core loop to the pacing thread.
type Request struct {
	Op       Op
	Priority uint8
	Handle   ndp.Handle
	N        int64    // OpAdd: pulls owed; OpProgress: bytes received so far; OpRefund: bytes
	Size     int64    // OpSetFlow
	Deadline ndp.Time // OpSetFlow, on the pacer's clock (PacerConfig.Clock)
}

// ReleaseKind tells a Release apart.
type ReleaseKind uint8

const (
	// ReleasePull: send one PULL for Handle now (ndp.Endpoint.PullReleased).
	ReleasePull ReleaseKind = iota + 1
	// ReleaseQuench: Handle cannot make its deadline; fail it (ndp.Endpoint.Quench).
	ReleaseQuench
)

// Release is one decision from the pacing thread to the transmit side.
type Release struct {
	Kind   ReleaseKind
	Handle ndp.Handle
	At     ndp.Time // the pacer's clock when it released this pull
}

// ParkMode selects how an idle pacing thread sleeps.
type ParkMode uint8

const (
	// ParkFutex (the zero value) sleeps in futex(2) on a word the producer flips, and
	// is woken with one futex wake syscall. Linux only; elsewhere it means ParkChannel.
	ParkFutex ParkMode = iota
	// ParkChannel blocks the locked goroutine on a channel receive (the Go runtime
	// parks the thread and hands its P back), woken by a non-blocking send.
	ParkChannel
)

// PacerConfig configures the pacing thread.
type PacerConfig struct {
	// Queue configures the pull queue the thread owns.
	Queue QueueConfig
	// Pin pins the thread to CPU with sched_setaffinity (Linux). Without Pin the thread
	// is still locked to one OS thread but may migrate.
	Pin bool
	// CPU is the CPU to pin to when Pin is set.
	CPU int
	// Nice, when not 0, sets the pacing thread's nice value (-20..19) with
	// setpriority(2) on Linux; lowering it needs CAP_SYS_NICE. On a shared CPU a
	// nice -20 thread keeps ~99% of the CPU against one nice-0 competitor under the
	// fair scheduler, without SCHED_FIFO's RT throttling stalls.
	Nice int
	// RequestRing is the number of Request slots between the core loop and the thread.
	// Zero means 8192; rounded up to a power of two.
	RequestRing int
	// ReleaseRing is the number of Release slots between the thread and the transmit
	// side. Zero means 8192; rounded up to a power of two.
	ReleaseRing int
	// SpinBeforePark is how long the thread keeps spinning after its queue empties
	// before it parks, so a pull that arrives right away is not delayed by a wakeup.
	// Zero means 20µs; negative means park at once.
	SpinBeforePark time.Duration
	// SleepThreshold: when the next release is further away than this (slow links,
	// e.g. 1 Gb/s with jumbo frames), the thread sleeps until SleepThreshold/2 before
	// it and spins the rest. Zero means 200µs; negative means always spin.
	SleepThreshold time.Duration
	// Park selects the idle sleep mechanism. Zero is ParkFutex.
	Park ParkMode
	// Clock is the monotonic clock, in ns, that pacing, Release.At and deadlines use;
	// the core loop must use the same one for Request.Deadline. Nil means MonotonicNow.
	Clock func() ndp.Time
	// Logger receives start/stop messages only. Nil means no logs.
	Logger *zap.Logger
}

const (
	defaultRingSize       = 8192
	defaultSpinBeforePark = 20 * time.Microsecond
	defaultSleepThreshold = 200 * time.Microsecond
	maxRequestsPerRound   = 256
	statsEvery            = 1024
	maxSpinChunk          = ndp.Time(20 * time.Microsecond)
)

var epoch = time.Now()

// MonotonicNow is the default pacer clock: nanoseconds on Go's monotonic clock since
// this package was initialized. It costs one vDSO clock_gettime (~25ns here).
func MonotonicNow() ndp.Time { return ndp.Time(time.Since(epoch)) }

// PacerStats are the pacing thread's counters. Queue is published by the thread
// every ~1k loop rounds and when it parks; it is exact after Close.
type PacerStats struct {
	Requests      uint64 // requests applied
	BadRequests   uint64 // requests with an unknown Op
	Parks         uint64 // times the thread parked with an empty queue
	TimedSleeps   uint64 // times it slept before a far-away release
	Wakes         uint64 // wakeups issued by Enqueue to a parked thread
	ReleaseStalls uint64 // times the release ring was found full (due pulls wait; counted once per episode)
	RequestsFull  uint64 // requests refused by Enqueue because the request ring was full
	Queue         QueueStats
}

const (
	stateRunning uint32 = 0
	stateParked  uint32 = 1
)

// Pacer is the pull pacing clock: one goroutine locked to its OS thread (optionally
// pinned to a CPU) that owns a PullQueue, spins on the monotonic clock while pulls
// are queued and releases each one when it is due. See doc.go for the flow.
//
// Rings and owners:
//   - request ring: producer is the core loop (Enqueue; one goroutine only), consumer
//     is the pacing thread. Requests are applied in the order they were enqueued.
//   - release ring: producer is the pacing thread, consumer is the transmit side (Poll;
//     one goroutine only). Releases come out in release order.
//
// A Release for a handle may still be in the release ring after the core loop
// enqueued its Remove; the consumer must ignore pulls for closed connections.
type Pacer struct {
	cfg   PacerConfig
	clock func() ndp.Time
	log   *zap.Logger
	q     *PullQueue // owned by the pacing thread

	req *spscRing[Request]
	out *spscRing[Release]

	park   uint32 // stateRunning / stateParked; futex word; atomic access only
	wakeCh chan struct{}
	timer  *time.Timer // ParkChannel timed sleeps; pacing thread only

	stop      atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
	tid       atomic.Int32

	requests, badRequests, parks, sleeps, wakes, stalls, reqFull atomic.Uint64
	qs                                                           queueStatsMirror
}

// queueStatsMirror holds copies of the queue counters that other goroutines may read.
type queueStatsMirror struct {
	added, released, dropped, rejected, quenched, late, reallocs, refunded atomic.Uint64
	conns, pending                                                         atomic.Int64
}

// NewPacer validates cfg, creates the queue and the rings, and starts the pacing
// thread. It returns once the thread runs (and is pinned, if asked).
func NewPacer(cfg PacerConfig) (*Pacer, error) {
	q, err := NewPullQueue(cfg.Queue)
	if err != nil {
		return nil, err
	}
	cfg.Queue = q.Config()
	if cfg.RequestRing == 0 {
		cfg.RequestRing = defaultRingSize
	}
	if cfg.ReleaseRing == 0 {
		cfg.ReleaseRing = defaultRingSize
	}
	if cfg.RequestRing < 0 || cfg.RequestRing > 1<<24 {
		return nil, &ConfigError{Field: "RequestRing", Reason: "must be in [1, 16M]"}
	}
	if cfg.ReleaseRing < 0 || cfg.ReleaseRing > 1<<24 {
		return nil, &ConfigError{Field: "ReleaseRing", Reason: "must be in [1, 16M]"}
	}
	if cfg.SpinBeforePark == 0 {
		cfg.SpinBeforePark = defaultSpinBeforePark
	}
	if cfg.SleepThreshold == 0 {
		cfg.SleepThreshold = defaultSleepThreshold
	}
	if cfg.Park > ParkChannel {
		return nil, &ConfigError{Field: "Park", Reason: "unknown park mode"}
	}
	if cfg.Pin && (cfg.CPU < 0 || cfg.CPU >= maxCPU) {
		return nil, &ConfigError{Field: "CPU", Reason: fmt.Sprintf("must be in [0, %d)", maxCPU)}
	}
	if cfg.Nice < -20 || cfg.Nice > 19 {
		return nil, &ConfigError{Field: "Nice", Reason: "must be in [-20, 19]"}
	}
	if !futexSupported {
		cfg.Park = ParkChannel
	}
	p := &Pacer{
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Logger,
		q:      q,
		req:    newSPSC[Request](cfg.RequestRing),
		out:    newSPSC[Release](cfg.ReleaseRing),
		wakeCh: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	if p.clock == nil {
		p.clock = MonotonicNow
	}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	if cfg.Park == ParkChannel {
		p.timer = time.NewTimer(time.Hour)
		p.timer.Stop()
	}
	p.publishQueueStats()
	ready := make(chan error, 1)
	go p.run(ready)
	if err := <-ready; err != nil {
		<-p.done
		return nil, err
	}
	p.log.Info("pull pacer started",
		zap.Duration("interval", cfg.Queue.Interval()),
		zap.Stringer("policy", cfg.Queue.Policy),
		zap.Bool("pinned", cfg.Pin), zap.Int("cpu", cfg.CPU), zap.Int("nice", cfg.Nice),
		zap.Int("tid", int(p.tid.Load())))
	return p, nil
}

// Enqueue hands requests to the pacing thread and returns how many it took; fewer
// than len(reqs) means the request ring is full (backpressure: retry the rest later).
// One goroutine only (the core loop). It never blocks and never locks; it makes one
// futex wake syscall only when the thread is parked.
func (p *Pacer) Enqueue(reqs []Request) (int, error) {
	if p.stop.Load() {
		return 0, ErrClosed
	}
	n := 0
	for n < len(reqs) && p.req.push(reqs[n]) {
		n++
	}
	if n < len(reqs) {
		p.reqFull.Add(uint64(len(reqs) - n))
	}
	if n > 0 {
		p.req.publish()
		// Dekker pairing with park(): we store tail then load the park word; the
		// thread stores the park word then loads tail. Both are seq-cst, so at least
		// one side sees the other and no wakeup is lost.
		if atomic.LoadUint32(&p.park) == stateParked &&
			atomic.CompareAndSwapUint32(&p.park, stateParked, stateRunning) {
			p.wakes.Add(1)
			p.wake()
		}
	}
	return n, nil
}

// Poll moves up to len(out) releases into out and returns how many. One goroutine
// only (the transmit side). Non-blocking.
func (p *Pacer) Poll(out []Release) int {
	n := 0
	for n < len(out) {
		r, ok := p.out.pop()
		if !ok {
			break
		}
		out[n] = r
		n++
	}
	if n > 0 {
		p.out.release()
	}
	return n
}

// Now reads the pacer's clock.
func (p *Pacer) Now() ndp.Time { return p.clock() }

// Interval returns the PULL spacing.
func (p *Pacer) Interval() time.Duration { return p.cfg.Queue.Interval() }

// ThreadID returns the Linux thread id of the pacing thread (0 elsewhere).
func (p *Pacer) ThreadID() int { return int(p.tid.Load()) }

// Parked reports whether the pacing thread is parked (idle, burning no CPU).
func (p *Pacer) Parked() bool { return atomic.LoadUint32(&p.park) == stateParked }

// Stats returns the counters (the queue part may lag while the thread runs).
func (p *Pacer) Stats() PacerStats {
	return PacerStats{
		Requests:      p.requests.Load(),
		BadRequests:   p.badRequests.Load(),
		Parks:         p.parks.Load(),
		TimedSleeps:   p.sleeps.Load(),
		Wakes:         p.wakes.Load(),
		ReleaseStalls: p.stalls.Load(),
		RequestsFull:  p.reqFull.Load(),
		Queue: QueueStats{
			Added:         p.qs.added.Load(),
			Released:      p.qs.released.Load(),
			Dropped:       p.qs.dropped.Load(),
			Rejected:      p.qs.rejected.Load(),
			Quenched:      p.qs.quenched.Load(),
			LateSlots:     p.qs.late.Load(),
			Reallocations: p.qs.reallocs.Load(),
			RefundedBytes: p.qs.refunded.Load(),
			Conns:         int(p.qs.conns.Load()),
			Pending:       p.qs.pending.Load(),
		},
	}
}

// Close stops the pacing thread and waits for it to exit. Requests still in the ring
// and pulls still queued are discarded; releases already in the ring stay readable
// with Poll. Safe to call more than once and from any goroutine.
func (p *Pacer) Close() error {
	p.closeOnce.Do(func() {
		p.stop.Store(true)
		atomic.StoreUint32(&p.park, stateRunning)
		p.wake()
		<-p.done
		p.log.Info("pull pacer stopped")
	})
	return nil
}

func (p *Pacer) wake() {
	if p.cfg.Park == ParkChannel {
		select {
		case p.wakeCh <- struct{}{}:
		default:
		}
		return
	}
	futexWake(&p.park)
}

// run is the pacing thread.
func (p *Pacer) run(ready chan<- error) {
	defer close(p.done)
	// Locked for life: when run returns without unlocking, the runtime terminates the
	// thread, so a pinned affinity mask never leaks to other goroutines.
	runtime.LockOSThread()
	p.tid.Store(int32(gettid()))
	if p.cfg.Pin {
		if err := pinToCPU(p.cfg.CPU); err != nil {
			ready <- fmt.Errorf("pullpacer: pin to cpu %d: %w", p.cfg.CPU, err)
			return
		}
	}
	if p.cfg.Nice != 0 {
		if err := setThreadNice(p.cfg.Nice); err != nil {
			ready <- fmt.Errorf("pullpacer: nice %d: %w", p.cfg.Nice, err)
			return
		}
	}
	ready <- nil
	defer p.publishQueueStats()

	q := p.q
	spin := ndp.Time(p.cfg.SpinBeforePark)
	sleepAbove := ndp.Time(p.cfg.SleepThreshold)
	emptySince := ndp.Time(-1)
	outRoom := 0
	ringFull := false
	rounds := 0
	for !p.stop.Load() {
		now := p.clock()
		p.applyRequests(now)

		// Releases: quench notices first, then due pulls, never more than the ring holds.
		for {
			if outRoom == 0 {
				if outRoom = p.out.free(); outRoom == 0 {
					if !ringFull {
						ringFull = true // count each full episode once
						p.stalls.Add(1)
					}
					break
				}
				ringFull = false
			}
			if h, ok := q.PollQuenched(); ok {
				p.out.push(Release{Kind: ReleaseQuench, Handle: h, At: now})
				outRoom--
				continue
			}
			h, ok := q.Next(now)
			if !ok {
				break
			}
			p.out.push(Release{Kind: ReleasePull, Handle: h, At: now})
			outRoom--
		}
		p.out.publish()

		if rounds++; rounds == statsEvery {
			rounds = 0
			p.publishQueueStats()
		}
		at, ok := q.NextAt()
		switch {
		case !ok:
			if emptySince < 0 {
				emptySince = now
			}
			if now-emptySince >= spin {
				p.publishQueueStats()
				p.sleep(0)
				emptySince = -1
			}
		case sleepAbove > 0 && at-now > sleepAbove:
			emptySince = -1
			p.sleep(time.Duration(at - now - sleepAbove/2))
		default:
			emptySince = -1
			// Spin on the clock alone until the release is due, so it leaves within
			// one clock read (~25ns) of its slot. Only a Refund can make it due
			// earlier, and that may wait until this spin ends (at most one interval or
			// maxSpinChunk); requests and Close are seen at least every maxSpinChunk.
			until := min(at, now+maxSpinChunk)
			for p.clock() < until {
			}
		}
	}
}

// applyRequests applies up to maxRequestsPerRound queued requests to the queue.
func (p *Pacer) applyRequests(now ndp.Time) {
	q := p.q
	n, bad := 0, 0
	for n < maxRequestsPerRound {
		r, ok := p.req.pop()
		if !ok {
			break
		}
		n++
		switch r.Op {
		case OpAdd:
			if r.N > 0 && r.N <= 1<<31 {
				q.Add(r.Handle, int(r.N))
			} else {
				q.stats.Rejected++
			}
		case OpSetFlow:
			q.SetFlow(r.Handle, Flow{Priority: r.Priority, Size: r.Size, Deadline: r.Deadline}, now)
		case OpProgress:
			q.Progress(r.Handle, r.N)
		case OpDrop:
			q.Drop(r.Handle)
		case OpRemove:
			q.Remove(r.Handle)
		case OpRefund:
			if r.N > 0 && r.N <= 1<<31 {
				q.Refund(now, int(r.N))
			} else {
				q.stats.Rejected++
			}
		default:
			bad++
		}
	}
	if n > 0 {
		p.req.release()
		p.requests.Add(uint64(n))
		if bad > 0 {
			p.badRequests.Add(uint64(bad))
		}
	}
}

// sleep parks the thread until Enqueue or Close wakes it, or until timeout (> 0) passes.
func (p *Pacer) sleep(timeout time.Duration) {
	atomic.StoreUint32(&p.park, stateParked)
	if p.req.hasMore() || p.stop.Load() {
		atomic.StoreUint32(&p.park, stateRunning)
		return
	}
	if timeout > 0 {
		p.sleeps.Add(1)
	} else {
		p.parks.Add(1)
	}
	if p.cfg.Park == ParkChannel {
		if timeout > 0 {
			p.timer.Reset(timeout)
			select {
			case <-p.wakeCh:
			case <-p.timer.C:
			}
			p.timer.Stop()
		} else {
			<-p.wakeCh
		}
	} else {
		// Spurious wakeups (EINTR) just end the sleep early; the loop re-checks.
		futexWait(&p.park, stateParked, timeout)
	}
	atomic.StoreUint32(&p.park, stateRunning)
}

// publishQueueStats copies the queue counters into atomics for Stats. Pacing thread
// only (or before it starts).
func (p *Pacer) publishQueueStats() {
	s := p.q.Stats()
	p.qs.added.Store(s.Added)
	p.qs.released.Store(s.Released)
	p.qs.dropped.Store(s.Dropped)
	p.qs.rejected.Store(s.Rejected)
	p.qs.quenched.Store(s.Quenched)
	p.qs.late.Store(s.LateSlots)
	p.qs.reallocs.Store(s.Reallocations)
	p.qs.refunded.Store(s.RefundedBytes)
	p.qs.conns.Store(int64(s.Conns))
	p.qs.pending.Store(s.Pending)
}

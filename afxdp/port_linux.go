package afxdp

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Port is the NIC side of one interface: the UMEM, one AF_XDP socket (Queue)
// per configured queue, and the steering program that sends the NDP UDP port
// to those sockets.
//
// Open must run on a thread inside the interface's network namespace (the
// interface is looked up, and the program attached, in the calling thread's
// namespace); afterwards the Port may be used from any goroutine, one at a
// time (single owner).
type Port struct {
	cfg      Config
	ifindex  int
	driver   string
	rxQueues int // RX queues of the interface, 0 if unknown
	umem     *UMEM
	queues   []*Queue
	steer    *steering
	waiter   *waiter
	pollFDs  []unix.PollFd
	log      *zap.Logger

	closeOnce sync.Once
	closeErr  error
}

// Info describes what Open actually set up.
type Info struct {
	Interface   string
	Ifindex     int
	Driver      string // from ETHTOOL_GDRVINFO; empty when the driver does not say
	Queues      []int
	RxQueues    int        // RX queues the interface has (ETHTOOL_GCHANNELS); 0 when the driver does not say
	ZeroCopy    bool       // sockets bound in zero-copy mode
	Attach      AttachMode // AttachNative or AttachGeneric
	NeedWakeup  bool
	TxSkbBudget int  // XDP_MAX_TX_SKB_BUDGET the kernel accepted (0: kernel default, or option unknown)
	MultiBuffer bool // sockets bound with XDP_USE_SG (Config.MultiBuffer)
	UDPPort     uint16
}

// Open creates the UMEM, binds one socket per queue (the first registers
// the UMEM, the others share it with XDP_SHARED_UMEM), loads the steering
// program with its XSKMAP, registers the sockets and attaches the program
// through a bpf_link. On any error everything created so far is released.
func Open(cfg Config) (*Port, error) {
	cfg.Queues = append([]int(nil), cfg.Queues...)
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p, err := openSockets(cfg)
	if err != nil {
		return nil, err
	}
	if err := steerPorts([]*Port{p}, cfg); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// OpenEach opens one Port per queue of cfg.Queues, each with its own UMEM
// of cfg.NumFrames frames and its own socket, so that each can have its own
// owner goroutine (one core loop per queue, nothing shared between them);
// one steering program, whose XSKMAP holds every port's socket, sends each
// queue's NDP frames to that queue's port. The program stays attached until
// the last of the ports closes. On any error everything is released.
func OpenEach(cfg Config) ([]*Port, error) {
	cfg.Queues = append([]int(nil), cfg.Queues...)
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ports := make([]*Port, 0, len(cfg.Queues))
	closeAll := func() {
		for _, p := range ports {
			p.Close()
		}
	}
	for _, q := range cfg.Queues {
		c := cfg
		c.Queues = []int{q}
		p, err := openSockets(c)
		if err != nil {
			closeAll()
			return nil, err
		}
		ports = append(ports, p)
	}
	if err := steerPorts(ports, cfg); err != nil {
		closeAll()
		return nil, err
	}
	return ports, nil
}

// openSockets is Open up to the steering: the interface, the UMEM and one
// socket per queue of cfg (populated and valid).
func openSockets(cfg Config) (*Port, error) {
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("%w: %q in this network namespace: %v", ErrNoInterface, cfg.Interface, err)
	}
	maxQ := slices.Max(cfg.Queues)
	rxQueues, ok := rxQueueCount(cfg.Interface)
	if ok && maxQ >= rxQueues {
		return nil, fmt.Errorf("%w: queue %d on %s, which has %d RX queues (ethtool -l %s)", ErrQueueRange, maxQ, cfg.Interface, rxQueues, cfg.Interface)
	}
	p := &Port{cfg: cfg, ifindex: ifc.Index, log: cfg.Logger, rxQueues: rxQueues}
	p.waiter, err = newWaiter()
	if err != nil {
		return nil, err
	}
	p.umem, err = newUMEM(cfg.NumFrames, cfg.FrameSize, cfg.Headroom)
	if err != nil {
		p.waiter.close()
		return nil, err
	}
	deadline := time.Now().Add(cfg.BindRetry)
	setup := queueSetup{
		iface:        cfg.Interface,
		ifindex:      ifc.Index,
		ringSize:     uint32(cfg.RingSize),
		bind:         cfg.Bind,
		needWakeup:   !cfg.DisableNeedWakeup,
		txBudget:     cfg.TxSkbBudget,
		sg:           cfg.MultiBuffer,
		sharedFD:     -1,
		bindDeadline: deadline,
	}
	for i, qid := range cfg.Queues {
		setup.queue = qid
		q, err := p.openQueue(setup)
		if err != nil {
			p.Close()
			return nil, err
		}
		q.waiter = p.waiter
		p.queues = append(p.queues, q)
		if i == 0 {
			setup.sharedFD = q.fd
			setup.needWakeup = q.wakeup // what the first bind settled on
		}
	}
	p.driver = driverName(cfg.Interface)
	return p, nil
}

// steerPorts loads the steering program for every queue of cfg, registers
// every socket of ports in its XSKMAP and attaches it; the ports share it.
func steerPorts(ports []*Port, cfg Config) error {
	p0 := ports[0]
	maxQ := slices.Max(cfg.Queues)
	attach := cfg.Attach
	if attach == AttachAuto && p0.driver == "veth" && maxQ == 0 {
		// veth's native XDP runs the program from a NAPI poll scheduled by
		// the sender, one more hop than the generic hook; for AF_XDP (always
		// copy mode on veth) generic is faster (docs/decisions.md, afxdp).
		// But veth's generic path delivers every frame on RX queue 0, so
		// with other queues bound only native mode spreads them.
		attach = AttachGeneric
	}
	steer, err := loadSteering(cfg.Interface, p0.ifindex, maxQ, cfg.UDPPort, cfg.SteerAll, cfg.MultiBuffer, attach)
	if err != nil {
		return err
	}
	steer.users.Store(int32(len(ports)))
	for _, p := range ports {
		p.steer = steer // before any failure: closing every port closes it
	}
	for _, p := range ports {
		for _, q := range p.queues {
			if err := steer.register(q.id, q.fd); err != nil {
				return fmt.Errorf("afxdp: register queue %d socket in XSKMAP: %w", q.id, err)
			}
		}
	}
	p0.log.Info("afxdp port open",
		zap.String("iface", cfg.Interface), zap.Ints("queues", cfg.Queues), zap.Int("umems", len(ports)),
		zap.Bool("zerocopy", p0.queues[0].zc), zap.Stringer("attach", steer.mode),
		zap.Uint16("udp_port", cfg.UDPPort), zap.Int("frames", cfg.NumFrames), zap.Int("frame_size", cfg.FrameSize))
	if p0.rxQueues > len(cfg.Queues) {
		// The NIC's RSS spreads the port's traffic over every queue; frames
		// hashed to a queue without a socket go to the kernel (XDP_PASS),
		// which answers port unreachable.
		p0.log.Warn("afxdp: the interface has more RX queues than this port serves: steer the UDP port to the served queue(s)",
			zap.String("iface", cfg.Interface), zap.Int("rx_queues", p0.rxQueues), zap.Ints("served", cfg.Queues),
			zap.String("hint", fmt.Sprintf("ethtool -N %s flow-type udp4 dst-port %d action %d (or ethtool -L %s combined 1)", cfg.Interface, cfg.UDPPort, cfg.Queues[0], cfg.Interface)))
	}
	return nil
}

// openQueue binds one socket, trying zero-copy first in BindAuto mode: a
// failed zero-copy bind leaves the socket unusable, so the copy-mode attempt
// starts from a fresh socket (the UMEM memory is registered again).
func (p *Port) openQueue(s queueSetup) (*Queue, error) {
	if s.sharedFD >= 0 || s.bind != BindAuto {
		return p.openQueueNeedWakeupFallback(s)
	}
	s.bind = BindZeroCopy
	q, err := p.openQueueNeedWakeupFallback(s)
	if err == nil || !errors.Is(err, ErrZeroCopyUnsupported) {
		return q, err
	}
	p.log.Debug("zero-copy unsupported, binding in copy mode", zap.String("iface", s.iface), zap.Int("queue", s.queue))
	s.bind = BindCopy
	return p.openQueueNeedWakeupFallback(s)
}

// openQueueNeedWakeupFallback retries without XDP_USE_NEED_WAKEUP on kernels
// older than 5.4, which reject the flag with EINVAL.
func (p *Port) openQueueNeedWakeupFallback(s queueSetup) (*Queue, error) {
	q, err := newQueue(p.umem, s)
	var se *SyscallError
	if err != nil && s.needWakeup && s.sharedFD < 0 && errors.As(err, &se) && se.Op == "bind AF_XDP socket" && se.Sentinel == nil {
		s.needWakeup = false
		if q2, err2 := newQueue(p.umem, s); err2 == nil {
			p.log.Info("kernel rejected need_wakeup; every transmit will make a sendto", zap.String("iface", s.iface))
			return q2, nil
		}
	}
	if err != nil {
		// The failed socket's fill ring took frames from the free list;
		// its rings are gone, so return them.
		p.reclaimFill()
	}
	return q, err
}

// reclaimFill returns to the free list every frame marked as on a fill
// ring that belongs to no open queue. Used after a failed bind attempt,
// before any frame moved on.
func (p *Port) reclaimFill() {
	if len(p.queues) > 0 {
		// Frames on the live queues' fill rings cannot be told apart from
		// the failed socket's; only the first socket can fail before any
		// queue is open (later ones share and do not retry).
		return
	}
	led := p.umem.ledger
	for i, o := range led.owner {
		if o == OwnerFill {
			_ = led.push("reclaim", uint32(i), OwnerFill)
		}
	}
}

// driverName asks ETHTOOL_GDRVINFO for ifname's driver ("" if unknown).
func driverName(ifname string) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}

// UMEM is the shared frame area.
func (p *Port) UMEM() *UMEM { return p.umem }

// Queues are the bound sockets, in Config.Queues order.
func (p *Port) Queues() []*Queue { return p.queues }

// Queue returns the socket bound to queue id, or nil.
func (p *Port) Queue(id int) *Queue {
	for _, q := range p.queues {
		if q.id == id {
			return q
		}
	}
	return nil
}

// Info reports the modes Open settled on.
func (p *Port) Info() Info {
	in := Info{
		Interface:   p.cfg.Interface,
		Ifindex:     p.ifindex,
		Driver:      p.driver,
		Queues:      append([]int(nil), p.cfg.Queues...),
		RxQueues:    p.rxQueues,
		ZeroCopy:    len(p.queues) > 0 && p.queues[0].zc,
		NeedWakeup:  len(p.queues) > 0 && p.queues[0].wakeup,
		MultiBuffer: len(p.queues) > 0 && p.queues[0].sg,
		UDPPort:     p.cfg.UDPPort,
	}
	if len(p.queues) > 0 {
		in.TxSkbBudget = p.queues[0].txBudget
	}
	if p.steer != nil {
		in.Attach = p.steer.mode
	}
	return in
}

// Wake makes a Wait in progress (or the next one) return at once: for an
// adaptive engine loop sleeping in Wait when another goroutine or process
// has work for it. Safe from any goroutine.
func (p *Port) Wake() error { return p.waiter.wake() }

// Wait blocks until any queue's RX ring has frames, Wake is called or
// timeout passes (negative: forever). Same results as Queue.Wait.
func (p *Port) Wait(timeout time.Duration) (bool, error) {
	if !p.waiter.enter() {
		return false, ErrClosed
	}
	defer p.waiter.exit()
	for _, q := range p.queues {
		if q.rx.consAvail(1) > 0 {
			return true, nil
		}
	}
	if p.pollFDs == nil {
		p.pollFDs = make([]unix.PollFd, len(p.queues)+1)
	}
	for i, q := range p.queues {
		p.pollFDs[i] = unix.PollFd{Fd: int32(q.fd), Events: unix.POLLIN}
	}
	p.pollFDs[len(p.queues)] = unix.PollFd{Fd: int32(p.waiter.fd), Events: unix.POLLIN}
	return p.waiter.poll(p.pollFDs, timeout, p.cfg.Interface, -1)
}

// Stats returns every queue's counters.
func (p *Port) Stats() ([]QueueStats, error) {
	out := make([]QueueStats, 0, len(p.queues))
	for _, q := range p.queues {
		s, err := q.Stats()
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Close detaches the program (closing the bpf_link), closes the sockets and
// unmaps the UMEM. Frames and slices obtained from the Port are invalid
// afterwards. Call it from the owner goroutine, or from another one while
// the owner sleeps in Wait (which then returns ErrClosed) or no longer uses
// the Port; afterwards Receive returns 0 and Transmit ErrClosed. Idempotent.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		var errs []error
		if p.waiter != nil {
			// Wake any Wait and wait for it to leave before unmapping rings.
			p.waiter.shutdown()
			defer p.waiter.close()
		}
		if p.steer != nil && p.steer.users.Add(-1) == 0 {
			errs = append(errs, p.steer.close()) // the last port sharing it
		}
		for _, q := range p.queues {
			errs = append(errs, q.close())
		}
		if p.umem != nil {
			errs = append(errs, p.umem.close())
		}
		p.closeErr = errors.Join(errs...)
		p.log.Info("afxdp port closed", zap.String("iface", p.cfg.Interface))
	})
	return p.closeErr
}

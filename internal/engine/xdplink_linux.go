package engine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/eventfd"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// XDPConfig configures an AF_XDP link on one interface queue.
type XDPConfig struct {
	// Interface is the interface name in the calling thread's network
	// namespace. Required.
	Interface string
	// Queue is the RX/TX queue id. Zero is queue 0.
	Queue int
	// UDPPort is the NDP service port the XDP program steers to the socket.
	// Zero means ndp.DefaultPort.
	UDPPort uint16
	// Bind and Attach choose zero-copy/copy and native/generic XDP; zero
	// values try the fast mode and fall back (veth: copy, native).
	Bind   afxdp.BindMode
	Attach afxdp.AttachMode
	// RingSize is the size of each AF_XDP ring. Zero means 2048.
	RingSize int
	// MTU is the largest IPv4 packet the link carries: the stack's MTU
	// (engine.Config's Endpoint.MTU, when zero, takes it from the link).
	// Zero means the interface MTU; more than the interface MTU is an
	// error. The frames follow it (FrameSize). Above 3826 the link is
	// multi-buffer, and in AF_XDP copy mode that costs every packet, a
	// one-frame one too, about 1 µs more per crossing (docs/datapath.md,
	// "Jumbo frames"): a stack whose packets fit one frame sets MTU 3826
	// or less on a jumbo interface. Where the kernel refuses multi-buffer
	// (before Linux 6.6) the link keeps one frame per packet, its MTU
	// capped at 3826, and logs why.
	MTU int
	// FrameSize is the UMEM frame size, 2048 or 4096. Zero chooses from
	// the MTU: 2048 while a full-MTU frame fits (MTU up to 1778), else
	// 4096, which carries frames up to 3840 bytes (MTU 3826; the kernel's
	// AF_XDP frames are at most a page, and the XDP headroom takes 256
	// bytes). Above that the link is multi-buffer (AF_XDP XDP_USE_SG,
	// afxdp.Config.MultiBuffer): a frame crosses as a chain of UMEM frames
	// (up to MTU 9000, the interface's limit on veth).
	FrameSize int
	// RuntimeWait makes Wait park the goroutine in the Go runtime's
	// netpoller (as a kernel socket's Read does) instead of blocking its
	// thread in ppoll. A thread blocked in ppoll keeps its P until the
	// runtime's sysmon notices (up to 10 ms when the process looks idle),
	// so with several stacks in one process and few CPUs a sleeping stack
	// holds goroutines that have work off a CPU; a parked goroutine holds
	// nothing. But the netpoller is consulted by Ps that find no other
	// work, so beside spinning waiters (which always leave work queued) a
	// parked goroutine is woken late: use it with Config.Spin < 0. A
	// timed sleep then ends within the runtime timer's resolution (about
	// 1 ms while every P is idle); arrivals and Wake end it at once. False:
	// ppoll, microsecond-precise, right for a stack whose waiters spin.
	RuntimeWait bool
	// Logger for setup and teardown. Nil means none.
	Logger *zap.Logger
}

// xdpHeadroom is what the kernel keeps in front of a received frame in a
// UMEM frame (XDP_PACKET_HEADROOM).
const xdpHeadroom = 256

// XDPLink is a Link over one AF_XDP socket (package afxdp). Received frames
// are UMEM frames handed to the endpoint in place and given back after the
// batch; transmit buffers are UMEM frames the endpoint builds into directly
// (no copy). Unused transmit frames are kept for the next batch instead of
// going back through the free list. Wait polls the XSK fd and an eventfd
// (Wake) with ppoll, or with XDPConfig.RuntimeWait parks the goroutine in
// the Go runtime's netpoller on the XSK fd.
type XDPLink struct {
	port     *afxdp.Port
	q        *afxdp.Queue
	umem     *afxdp.UMEM
	mac      [6]byte
	ifindex  int
	name     string
	frameCap int
	ringSize int

	rx       []afxdp.Desc
	nrx      int
	tx       []afxdp.Desc // descriptors of the last AllocTx
	ntxAlloc int
	spare    []afxdp.Desc // allocated, unused transmit frames
	// Multi-buffer (xdplink_chain_linux.go): txChain > 0. A received
	// packet spans up to rxChain descriptors; a transmit buffer is a
	// build buffer backed by txChain UMEM frames (l.tx, txChain per
	// buffer) that Transmit copies it into.
	rxChain, txChain int
	nheld            int      // whole packets received beyond the last Receive's frames, at l.rx[nrx:]
	rxBuf            [][]byte // where chains are joined, one per frame of a Receive
	txBuf            [][]byte // build buffers, one per handed-out transmit buffer
	txOut            []afxdp.Desc
	efd              int // ppoll: the eventfd Wake writes
	pfd              [2]unix.PollFd
	// RuntimeWait: xsk is a duplicate of the XSK fd registered with the Go
	// runtime's netpoller (edge-triggered epoll); Wait parks on it. woken
	// is Wake's flag; Wake also moves xsk's read deadline to the past,
	// which ends a parked Wait.
	xsk    *os.File
	xskRaw syscall.RawConn
	woken  atomic.Bool
	ready  func(fd uintptr) bool
	// kickWanted: Transmit queued frames on the TX ring (or left some a
	// partial sendto did not take); Kick, from any goroutine, clears it
	// and makes the sendto. Set after the frames are published (Put), so a
	// Kick that clears it sends them.
	kickWanted atomic.Bool
}

// OpenXDP opens an AF_XDP socket on cfg.Interface's queue and attaches the
// steering program (only NDP's UDP port reaches the socket; ARP and the rest
// go to the kernel). Call it in the network namespace of the interface.
func OpenXDP(cfg XDPConfig) (*XDPLink, error) {
	ls, err := OpenXDPEach(cfg, []int{cfg.Queue})
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// OpenXDPEach opens one link per queue of queues (cfg.Queue is ignored):
// each its own AF_XDP socket and UMEM (afxdp.OpenEach), so each link can
// have its own owner goroutine, all steered by one program. Call it in the
// network namespace of the interface.
func OpenXDPEach(cfg XDPConfig, queues []int) ([]*XDPLink, error) {
	if cfg.UDPPort == 0 {
		cfg.UDPPort = 6420
	}
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, fmt.Errorf("engine: interface %q: %w", cfg.Interface, err)
	}
	if len(ifc.HardwareAddr) != 6 {
		return nil, fmt.Errorf("engine: interface %q has no Ethernet address", cfg.Interface)
	}
	switch {
	case cfg.MTU == 0:
		cfg.MTU = ifc.MTU
	case cfg.MTU < 0 || cfg.MTU > ifc.MTU:
		return nil, fmt.Errorf("%w: MTU %d: want at most %s's MTU %d", ErrInvalidConfig, cfg.MTU, cfg.Interface, ifc.MTU)
	}
	frameSize := cfg.FrameSize
	if frameSize == 0 {
		frameSize = 2048
		if cfg.MTU+14 > 2048-xdpHeadroom {
			frameSize = 4096
		}
	}
	ac := afxdp.Config{
		Interface: cfg.Interface, Queues: queues, UDPPort: cfg.UDPPort,
		Bind: cfg.Bind, Attach: cfg.Attach, RingSize: cfg.RingSize, Logger: cfg.Logger,
		FrameSize:   frameSize,
		MultiBuffer: cfg.MTU+14 > frameSize-xdpHeadroom,
	}
	ports, err := afxdp.OpenEach(ac)
	if err != nil && ac.MultiBuffer {
		if cfg.Logger != nil {
			cfg.Logger.Warn("engine: AF_XDP multi-buffer refused; one frame per packet, MTU capped",
				zap.String("iface", cfg.Interface), zap.Int("mtu", cfg.MTU), zap.Error(err))
		}
		ac.MultiBuffer = false
		ports, err = afxdp.OpenEach(ac)
	}
	if err != nil {
		return nil, err
	}
	links := make([]*XDPLink, 0, len(ports))
	for i, p := range ports {
		l, err := newXDPLink(p, ifc, cfg)
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			for _, p := range ports[i+1:] {
				p.Close()
			}
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

// newXDPLink wraps p, a port of one queue; the link owns it (closed on
// error too).
func newXDPLink(p *afxdp.Port, ifc *net.Interface, cfg XDPConfig) (*XDPLink, error) {
	ringSize := cfg.RingSize
	if ringSize == 0 {
		ringSize = afxdp.DefaultRingSize
	}
	u := p.UMEM()
	l := &XDPLink{
		port: p, q: p.Queues()[0], umem: u,
		mac: [6]byte(ifc.HardwareAddr), ifindex: ifc.Index, name: ifc.Name,
		frameCap: min(cfg.MTU+14, u.FrameSize()-xdpHeadroom-u.Headroom()),
		ringSize: ringSize,
		efd:      -1,
		rx:       make([]afxdp.Desc, 1024),
		tx:       make([]afxdp.Desc, 1024),
		spare:    make([]afxdp.Desc, 0, 1024),
	}
	if p.Info().MultiBuffer {
		l.frameCap = cfg.MTU + 14
		l.rxChain = (l.frameCap + u.FrameSize() - xdpHeadroom - u.Headroom() - 1) / (u.FrameSize() - xdpHeadroom - u.Headroom())
		l.txChain = (l.frameCap + u.FrameSize() - u.Headroom() - 1) / (u.FrameSize() - u.Headroom())
		l.txOut = make([]afxdp.Desc, 0, len(l.tx))
	}
	var err error
	if cfg.RuntimeWait {
		err = l.openRuntimeWaiter()
	} else {
		l.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		l.pfd = [2]unix.PollFd{{Fd: int32(l.q.FD()), Events: unix.POLLIN}, {Fd: int32(l.efd), Events: unix.POLLIN}}
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("engine: waiter: %w", err)
	}
	return l, nil
}

// MAC implements Link.
func (l *XDPLink) MAC() [6]byte { return l.mac }

// FrameCap implements Link.
func (l *XDPLink) FrameCap() int { return l.frameCap }

// Ifindex is the interface index (for KernelResolver).
func (l *XDPLink) Ifindex() int { return l.ifindex }

// Name is the interface name.
func (l *XDPLink) Name() string { return l.name }

// Port is the underlying afxdp port (statistics).
func (l *XDPLink) Port() *afxdp.Port { return l.port }

// Receive implements Link.
func (l *XDPLink) Receive(frames [][]byte) int {
	if l.txChain > 0 {
		return l.receiveChains(frames)
	}
	n := l.q.Receive(l.rx[:min(len(frames), len(l.rx))])
	for i := 0; i < n; i++ {
		frames[i] = l.umem.Bytes(l.rx[i])
	}
	l.nrx = n
	return n
}

// ReleaseReceived implements Link.
func (l *XDPLink) ReleaseReceived() {
	if l.txChain > 0 {
		l.releaseChains()
		return
	}
	if l.nrx > 0 {
		l.umem.Release(l.rx[:l.nrx])
		l.nrx = 0
	}
}

// AllocTx implements Link. It hands out at most as many frames as the TX
// ring has room for (RingSize minus frames not yet completed), so Transmit
// never has to refuse one.
func (l *XDPLink) AllocTx(bufs [][]byte) int {
	if l.ntxAlloc == 0 && l.q.TxOutstanding() > 0 {
		l.q.Complete()
	}
	if l.txChain > 0 {
		return l.allocChains(bufs)
	}
	base := l.ntxAlloc
	want := min(len(bufs), len(l.tx)-base, l.ringSize-l.q.TxOutstanding()-base)
	if want <= 0 {
		return 0
	}
	k := 0
	for k < want && len(l.spare) > 0 {
		l.tx[base+k] = l.spare[len(l.spare)-1]
		l.spare = l.spare[:len(l.spare)-1]
		k++
	}
	if k < want {
		k += l.umem.Alloc(l.tx[base+k : base+want])
	}
	for i := 0; i < k; i++ {
		bufs[i] = l.umem.Buffer(l.tx[base+i])[:0]
	}
	l.ntxAlloc += k
	return k
}

// SwapTx implements Link.
func (l *XDPLink) SwapTx(i, j int) {
	if l.txChain > 0 {
		l.swapChains(i, j)
		return
	}
	l.tx[i], l.tx[j] = l.tx[j], l.tx[i]
}

// Transmit implements Link.
func (l *XDPLink) Transmit(frames [][]byte) error {
	if l.txChain > 0 {
		return l.transmitChains(frames)
	}
	m := len(frames)
	for i := 0; i < m; i++ {
		l.tx[i].Len = uint32(len(frames[i]))
	}
	for i := m; i < l.ntxAlloc; i++ {
		l.tx[i].Len = 0
		l.spare = append(l.spare, l.tx[i])
	}
	l.ntxAlloc = 0
	return l.put(l.tx[:m])
}

// put puts descs on the TX ring for the next Kick; with none it reaps
// completions and has Kick re-kick frames a partial sendto left.
func (l *XDPLink) put(descs []afxdp.Desc) error {
	if len(descs) == 0 {
		if l.q.TxOutstanding() == 0 {
			return nil
		}
		_, err := l.q.Put(nil)
		if l.q.TxOutstanding() > 0 {
			l.kickWanted.Store(true)
		}
		return err
	}
	n, err := l.q.Put(descs)
	if n > 0 {
		l.kickWanted.Store(true)
	}
	if n < len(descs) {
		// Not expected (AllocTx bounded the batch): give the frames back.
		l.umem.Release(descs[n:])
		if err == nil {
			err = errors.New("engine: AF_XDP TX ring refused frames")
		}
	}
	return err
}

// Kick implements Link: one sendto when Transmit queued frames since the
// last Kick (afxdp.Queue.Kick; safe without the stack's lock).
func (l *XDPLink) Kick() error {
	if !l.kickWanted.Load() || !l.kickWanted.Swap(false) {
		return nil
	}
	if err := l.q.Kick(); err != nil && !errors.Is(err, afxdp.ErrClosed) {
		return err
	}
	return nil
}

// openRuntimeWaiter registers a duplicate of the XSK fd with the Go runtime's
// netpoller (os.NewFile on a non-blocking fd does; the O_NONBLOCK flag is
// the socket's, which changes nothing else: every send and receive on it
// passes MSG_DONTWAIT already).
func (l *XDPLink) openRuntimeWaiter() error {
	fd, err := unix.Dup(l.q.FD())
	if err != nil {
		return fmt.Errorf("dup XSK fd: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("XSK fd non-blocking: %w", err)
	}
	l.xsk = os.NewFile(uintptr(fd), "xsk")
	if l.xskRaw, err = l.xsk.SyscallConn(); err != nil {
		return fmt.Errorf("XSK fd: %w", err)
	}
	// A file the netpoller cannot watch refuses deadlines: fail here, not
	// with a Wait that never ends.
	if err := l.xsk.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("XSK fd in the netpoller: %w", err)
	}
	l.ready = func(uintptr) bool { return l.q.RxPending() || l.woken.Load() }
	return nil
}

// Wait implements Link: ppoll on the XSK fd and the wake eventfd, or with
// RuntimeWait a park in the runtime's netpoller (waitRuntime).
func (l *XDPLink) Wait(timeout time.Duration) error {
	if l.xsk != nil {
		return l.waitRuntime(timeout)
	}
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	l.pfd[0].Revents, l.pfd[1].Revents = 0, 0
	_, err := unix.Ppoll(l.pfd[:], ts, nil)
	if l.pfd[1].Revents&unix.POLLIN != 0 {
		eventfd.Drain(l.efd)
	}
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("engine: ppoll: %w", err)
	}
	return nil
}

// waitRuntime parks the calling goroutine in the netpoller until the XSK
// fd turns readable (the kernel queued RX descriptors), Wake, or timeout.
func (l *XDPLink) waitRuntime(timeout time.Duration) error {
	if l.woken.Swap(false) {
		return nil
	}
	var dl time.Time
	if timeout >= 0 {
		dl = time.Now().Add(timeout)
	}
	if err := l.xsk.SetReadDeadline(dl); err != nil {
		return fmt.Errorf("engine: XSK fd deadline: %w", err)
	}
	// Wake stores woken before it moves the deadline: a Wake that moved
	// it before the SetReadDeadline above is seen here, one after it ends
	// the Read below.
	if l.woken.Swap(false) {
		return nil
	}
	err := l.xskRaw.Read(l.ready)
	l.woken.Store(false)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("engine: XSK fd wait: %w", err)
	}
	return nil
}

// Wake implements Link.
func (l *XDPLink) Wake() {
	if l.xsk != nil {
		l.woken.Store(true)
		l.xsk.SetReadDeadline(aLongTimeAgo)
		return
	}
	eventfd.Signal(l.efd)
}

// aLongTimeAgo is a deadline in the past: it ends a parked Read at once.
var aLongTimeAgo = time.Unix(1, 0)

// Close implements Link: detaches the program, closes the socket.
func (l *XDPLink) Close() error {
	if l.xsk != nil {
		l.xsk.Close()
	}
	if l.efd >= 0 {
		unix.Close(l.efd)
	}
	return l.port.Close()
}

// LinkStats reports the AF_XDP socket's counters (ours and the kernel's).
func (l *XDPLink) LinkStats() LinkStats {
	qs, _ := l.port.Stats() // kernel counters read as zero if the getsockopt failed
	var s LinkStats
	for _, q := range qs {
		s.RxFrames += q.RxFrames
		s.RxBatches += q.RxBatches
		s.TxFrames += q.TxFrames
		s.TxBatches += q.TxBatches
		s.TxKicks += q.TxKicks
		s.TxRingFull += q.TxRingFull
		s.RxDropped += q.KernelRxDropped + q.KernelRxRingFull
		s.RxFillEmpty += q.KernelRxFillRingEmpty
		s.InvalidDescriptors += q.KernelRxInvalidDescs + q.KernelTxInvalidDescs + q.TxInvalid
	}
	return s
}

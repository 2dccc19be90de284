package ring

import (
	"fmt"
	"net"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Region is one application's shared region: a sealed memfd holding the
// header (layout.go) and the rings, plus the two eventfds of the wakeup
// protocol. The daemon creates it (CreateRegion) and hands it to the
// application over its control socket (SendAttachment); the application
// maps it (OpenRegion), which validates the header first.
//
// Each side takes its end once (DaemonEnd or AppEnd); the end's rings each
// have one owner goroutine. Close unmaps: it must not run while a ring of
// this region is in use (call Shutdown first to stop a waiter, join the
// owner, then Close).
type Region struct {
	mem        []byte
	fd         int
	wakeDaemon int // eventfd: the app writes, the daemon waits
	wakeApp    int // eventfd: the daemon writes, the app waits
	layout     Layout
	side       Side
	taken      atomic.Bool
	waiter     *Waiter
	closed     atomic.Bool
}

// CreateRegion (daemon side) builds a region for application app whose TX
// partition and buffer area are described by geo: a memfd sized by the
// layout and sealed against shrinking and growing (so the application cannot
// truncate it under the daemon and fault it with SIGBUS), mapped, with the
// header written, plus the two eventfds.
func CreateRegion(cfg RegionConfig, app AppID, geo BufferGeometry) (*Region, error) {
	l, err := NewLayout(cfg, app, geo)
	if err != nil {
		return nil, err
	}
	fd, err := newSealedMemfd("ndp-region", l.Size)
	if err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(l.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ring: mmap region: %w", err)
	}
	encodeHeader(mem, &l)
	r := &Region{mem: mem, fd: fd, layout: l, side: SideDaemon, wakeDaemon: -1, wakeApp: -1}
	if r.wakeDaemon, err = newEventfd(); err == nil {
		r.wakeApp, err = newEventfd()
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("ring: eventfd: %w", err)
	}
	return r, nil
}

// OpenRegion (application side) maps the region of an attachment received
// from the daemon and validates it: sealed memfd, size, header (magic,
// version, checksum, ring table). A wrong version or a corrupted header is an
// error matching ErrBadHeader / ErrVersion, never a crash. It takes
// ownership of a.Region, a.WakeDaemon and a.WakeApp (closed on error and by
// Close); a.Buffer stays the caller's (see MapBufferArea).
func OpenRegion(a Attachment) (*Region, error) {
	r := &Region{fd: a.Region, wakeDaemon: a.WakeDaemon, wakeApp: a.WakeApp, side: SideApp}
	fail := func(err error) (*Region, error) {
		r.Close()
		return nil, err
	}
	size, err := sealedSize(a.Region)
	if err != nil {
		return fail(err)
	}
	if size < hdrRingTable || size > 1<<32 {
		return fail(headerErr("size", "region memfd of %d bytes", size))
	}
	mem, err := unix.Mmap(a.Region, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("ring: mmap region: %w", err))
	}
	r.mem = mem
	if r.layout, err = ParseHeader(mem); err != nil {
		return fail(err)
	}
	return r, nil
}

// Layout returns the region's validated layout (a private copy).
func (r *Region) Layout() Layout { return r.layout }

// FD returns the region memfd.
func (r *Region) FD() int { return r.fd }

// Attachment returns the descriptors to pass to the application with
// SendAttachment: this region's memfd and eventfds, and bufferFD, the
// buffer area (UMEM) memfd. The region keeps its descriptors; the kernel
// duplicates them into the receiver.
func (r *Region) Attachment(bufferFD int) Attachment {
	return Attachment{Region: r.fd, WakeDaemon: r.wakeDaemon, WakeApp: r.wakeApp, Buffer: bufferFD}
}

// DaemonSocket is the daemon's view of one socket's rings.
type DaemonSocket struct {
	RX *Producer // received data, daemon → app (lent daemon frames)
	TX *Consumer // data to send, app → daemon (app partition frames)
}

// DaemonEnd is the daemon's end of a region. The core loop goroutine owns
// every ring in it and the Waiter and Notifier.
type DaemonEnd struct {
	Cmd         *Consumer // commands app → daemon
	Events      *Producer // replies and notifications daemon → app
	Completions *Producer // TX frames handed back daemon → app
	Releases    *Consumer // RX frames handed back app → daemon
	Sockets     []DaemonSocket
	Waiter      *Waiter   // sleep until the app produces or releases
	Notifier    *Notifier // wake the app after producing or releasing
}

// AppSocket is the application's view of one socket's rings.
type AppSocket struct {
	RX *Consumer
	TX *Producer
}

// AppEnd is the application's end of a region. One goroutine owns each ring
// (the library may give the cmd/event pair and each socket's rings to
// different goroutines, one owner per ring).
type AppEnd struct {
	Cmd         *Producer
	Events      *Consumer
	Completions *Consumer
	Releases    *Producer
	Sockets     []AppSocket
	Waiter      *Waiter
	Notifier    *Notifier
}

// DaemonEnd returns the daemon's end. Only on a region from CreateRegion,
// only once.
func (r *Region) DaemonEnd() (*DaemonEnd, error) {
	if r.side != SideDaemon || !r.taken.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: daemon end of a %v region, or taken twice", ErrBadConfig, r.side)
	}
	rings, err := r.rings()
	if err != nil {
		return nil, err
	}
	e := &DaemonEnd{
		Cmd:         rings[0].(*Consumer),
		Events:      rings[1].(*Producer),
		Completions: rings[2].(*Producer),
		Releases:    rings[3].(*Consumer),
		Sockets:     make([]DaemonSocket, r.layout.Sockets),
	}
	for s := range e.Sockets {
		e.Sockets[s] = DaemonSocket{
			RX: rings[ringIndex(KindRX, s)].(*Producer),
			TX: rings[ringIndex(KindTX, s)].(*Consumer),
		}
	}
	e.Waiter, e.Notifier, err = r.doorbells(hdrDaemonSleeping, r.wakeDaemon, hdrAppSleeping, r.wakeApp)
	return e, err
}

// AppEnd returns the application's end. Only on a region from OpenRegion,
// only once.
func (r *Region) AppEnd() (*AppEnd, error) {
	if r.side != SideApp || !r.taken.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: app end of a %v region, or taken twice", ErrBadConfig, r.side)
	}
	rings, err := r.rings()
	if err != nil {
		return nil, err
	}
	e := &AppEnd{
		Cmd:         rings[0].(*Producer),
		Events:      rings[1].(*Consumer),
		Completions: rings[2].(*Consumer),
		Releases:    rings[3].(*Producer),
		Sockets:     make([]AppSocket, r.layout.Sockets),
	}
	for s := range e.Sockets {
		e.Sockets[s] = AppSocket{
			RX: rings[ringIndex(KindRX, s)].(*Consumer),
			TX: rings[ringIndex(KindTX, s)].(*Producer),
		}
	}
	e.Waiter, e.Notifier, err = r.doorbells(hdrAppSleeping, r.wakeApp, hdrDaemonSleeping, r.wakeDaemon)
	return e, err
}

// rings builds every ring of the layout as a *Producer or *Consumer of this side.
func (r *Region) rings() ([]any, error) {
	out := make([]any, len(r.layout.Rings))
	for i, spec := range r.layout.Rings {
		rg, err := newRing(r.mem, spec)
		if err != nil {
			return nil, err
		}
		if spec.Producer == r.side {
			out[i] = &Producer{ring: rg}
		} else {
			out[i] = &Consumer{ring: rg}
		}
	}
	return out, nil
}

func (r *Region) doorbells(ownFlag uint64, ownFD int, peerFlag uint64, peerFD int) (*Waiter, *Notifier, error) {
	own, ok1 := word32(r.mem, ownFlag)
	peer, ok2 := word32(r.mem, peerFlag)
	if !ok1 || !ok2 || ownFD < 0 || peerFD < 0 {
		return nil, nil, fmt.Errorf("%w: region without usable wakeup words or eventfds", ErrBadAttachment)
	}
	r.waiter = &Waiter{flag: own, efd: ownFD}
	return r.waiter, &Notifier{flag: peer, efd: peerFD}, nil
}

// Shutdown makes this side's Waiter return net.ErrClosed (now and on every
// later Wait), without unmapping anything. Safe from any goroutine.
func (r *Region) Shutdown() {
	if r.waiter != nil && !r.waiter.closed.Swap(true) {
		_ = r.waiter.Interrupt()
	}
}

// Close shuts down, unmaps the region and closes its memfd and eventfds. The
// ring owners must have stopped. Idempotent.
func (r *Region) Close() error {
	if r.closed.Swap(true) {
		return net.ErrClosed
	}
	r.Shutdown()
	var first error
	if r.mem != nil {
		first = unix.Munmap(r.mem)
		r.mem = nil
	}
	for _, fd := range []*int{&r.fd, &r.wakeDaemon, &r.wakeApp} {
		if *fd >= 0 {
			if err := unix.Close(*fd); err != nil && first == nil {
				first = err
			}
			*fd = -1
		}
	}
	return first
}

// newSealedMemfd creates a memfd of size bytes and seals its size.
func newSealedMemfd(name string, size uint64) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("ring: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("ring: ftruncate memfd: %w", err)
	}
	if err := SealSize(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// SealSize seals a memfd (created with MFD_ALLOW_SEALING) against shrinking,
// growing and further sealing. The daemon must do this to every memfd it
// shares with an application (the region, and the UMEM memfd the afxdp
// package creates): an application that could ftruncate a shared memfd
// could make the daemon's next access to a frame fault with SIGBUS.
func SealSize(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("ring: seal memfd: %w", err)
	}
	return nil
}

// CheckSealed reports whether fd is a memfd sealed against shrinking (see
// SealSize). The daemon should check the UMEM memfd with it before sharing it.
func CheckSealed(fd int) error {
	_, err := sealedSize(fd)
	return err
}

// sealedSize returns the size of a memfd that is sealed against shrinking.
func sealedSize(fd int) (int64, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return 0, fmt.Errorf("%w: fd %d is not a sealable memfd: %v", ErrBadAttachment, fd, err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return 0, fmt.Errorf("%w: memfd is not sealed against shrinking", ErrBadAttachment)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("ring: fstat memfd: %w", err)
	}
	return st.Size, nil
}

package afxdp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// UMEM is the packet buffer area shared by all sockets of a Port: NumFrames
// frames of FrameSize bytes in one memfd-backed MAP_SHARED mapping, so
// another process can map the same pages (DupFD, then mmap the fd with
// MAP_SHARED) and read or write frames without a copy.
//
// Frame i occupies bytes [i*FrameSize, (i+1)*FrameSize). A Desc's Addr is a
// byte offset into this area; its frame is Addr / FrameSize.
//
// The UMEM's free list and frame ledger belong to the goroutine that drives
// the Port; Alloc and Release must only be called from it.
type UMEM struct {
	fd        int
	mem       []byte
	frameSize uint64
	numFrames int
	headroom  uint64
	ledger    *frameLedger
}

func newUMEM(numFrames, frameSize, headroom int) (*UMEM, error) {
	fd, err := unix.MemfdCreate("ndpstack-umem", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, &SyscallError{Op: "memfd_create", Queue: -1, Err: err}
	}
	size := numFrames * frameSize
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, &SyscallError{Op: "ftruncate UMEM memfd", Queue: -1, Err: err}
	}
	// Seal the size: a process the memfd is shared with can then neither shrink it
	// (which would SIGBUS this one on its next access) nor grow it. Applications
	// refuse to map an unsealed buffer memfd (package ring, CheckSealed).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, &SyscallError{Op: "seal UMEM memfd", Queue: -1, Err: err}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(fd)
		return nil, &SyscallError{Op: "mmap UMEM", Queue: -1, Err: err, Hint: "raise RLIMIT_MEMLOCK or lower NumFrames"}
	}
	return &UMEM{
		fd:        fd,
		mem:       mem,
		frameSize: uint64(frameSize),
		numFrames: numFrames,
		headroom:  uint64(headroom),
		ledger:    newFrameLedger(numFrames),
	}, nil
}

func (u *UMEM) close() error {
	var first error
	if u.mem != nil {
		if err := unix.Munmap(u.mem); err != nil {
			first = err
		}
		u.mem = nil
	}
	if u.fd >= 0 {
		if err := unix.Close(u.fd); err != nil && first == nil {
			first = err
		}
		u.fd = -1
	}
	return first
}

// FD is the memfd backing the UMEM. It stays owned by the UMEM (closed by
// Port.Close); use DupFD to hand a descriptor to another process.
func (u *UMEM) FD() int { return u.fd }

// DupFD returns a new close-on-exec descriptor for the UMEM memfd, owned by
// the caller: pass it to another process (SCM_RIGHTS, or ExtraFiles) which
// maps it with mmap(fd, 0, Size(), PROT_READ|PROT_WRITE, MAP_SHARED).
func (u *UMEM) DupFD() (int, error) {
	return unix.FcntlInt(uintptr(u.fd), unix.F_DUPFD_CLOEXEC, 0)
}

// Size is the UMEM length in bytes (NumFrames * FrameSize).
func (u *UMEM) Size() int { return len(u.mem) }

// FrameSize is the size of one frame.
func (u *UMEM) FrameSize() int { return int(u.frameSize) }

// NumFrames is the number of frames.
func (u *UMEM) NumFrames() int { return u.numFrames }

// Headroom is the offset of packet data inside a frame returned by Alloc.
func (u *UMEM) Headroom() int { return int(u.headroom) }

// Mem is the whole UMEM mapping (for a zero-copy buffer pool laid over it).
func (u *UMEM) Mem() []byte { return u.mem }

// FrameIndex is the index of the frame holding addr.
func (u *UMEM) FrameIndex(addr uint64) uint32 { return uint32(addr / u.frameSize) }

// FrameAddr is the UMEM offset of frame idx's first byte.
func (u *UMEM) FrameAddr(idx uint32) uint64 { return uint64(idx) * u.frameSize }

// Bytes returns the packet bytes d describes. The slice aliases the UMEM: it
// is valid only while the caller owns the frame (until Release or Transmit).
func (u *UMEM) Bytes(d Desc) []byte {
	end := d.Addr + uint64(d.Len)
	return u.mem[d.Addr:end:end]
}

// Buffer returns the writable room of d's frame from d.Addr to the frame's
// end (length 0 .. cap), for building a packet in a frame from Alloc. Same
// validity rule as Bytes.
func (u *UMEM) Buffer(d Desc) []byte {
	end := (d.Addr/u.frameSize + 1) * u.frameSize
	return u.mem[d.Addr:end:end]
}

// Alloc takes up to len(descs) frames from the free list for the
// application and fills descs with Addr = frame start + Headroom, Len 0.
// It returns how many it took; fewer than asked means the pool is empty
// (backpressure: transmit completions or released frames refill it).
func (u *UMEM) Alloc(descs []Desc) int {
	for i := range descs {
		idx, ok := u.ledger.pop(OwnerApp)
		if !ok {
			return i
		}
		descs[i] = Desc{Addr: uint64(idx)*u.frameSize + u.headroom}
	}
	return len(descs)
}

// Release gives frames held by the application back to the free list (frames
// from Receive or Alloc that will not be transmitted). Any Addr inside the
// frame will do. It stops at the first descriptor whose frame the
// application does not own (double release, foreign address) and returns
// how many it released and a *FrameError; the violation is counted.
func (u *UMEM) Release(descs []Desc) (int, error) {
	for i := range descs {
		if descs[i].Addr >= uint64(len(u.mem)) {
			u.ledger.violations++
			return i, fmt.Errorf("%w: release of addr %#x beyond UMEM size %#x", ErrBadDescriptor, descs[i].Addr, len(u.mem))
		}
		if err := u.ledger.push("release", uint32(descs[i].Addr/u.frameSize), OwnerApp); err != nil {
			return i, err
		}
	}
	return len(descs), nil
}

// Accounting returns the frame ledger's counts (single owner: call it from
// the goroutine driving the Port).
func (u *UMEM) Accounting() Accounting { return u.ledger.accounting() }

// validTx checks that d lies inside one frame.
func (u *UMEM) validTx(d Desc) bool {
	if d.Addr >= uint64(len(u.mem)) || d.Len == 0 {
		return false
	}
	frameEnd := (d.Addr/u.frameSize + 1) * u.frameSize
	return d.Addr+uint64(d.Len) <= frameEnd
}

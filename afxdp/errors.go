package afxdp

import (
	"errors"
	"fmt"
	"net"
)

// Sentinel errors. Every error returned by this package that has one of these
// causes wraps it, so callers test with errors.Is; the message of the wrapping
// error says what to do about it.
var (
	// ErrPermission: the process may not create AF_XDP sockets, BPF maps or
	// programs. Run as root, or grant CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF
	// (CAP_SYS_ADMIN on kernels before 5.8).
	ErrPermission = errors.New("afxdp: permission denied (run as root or grant CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)")
	// ErrNoInterface: the named interface does not exist in the calling
	// thread's network namespace.
	ErrNoInterface = errors.New("afxdp: no such interface")
	// ErrQueueRange: a configured queue id is not below the interface's
	// number of RX queues (ethtool -l shows them; raise with ethtool -L).
	ErrQueueRange = errors.New("afxdp: queue id out of range")
	// ErrZeroCopyUnsupported: BindZeroCopy was requested but the driver has
	// no AF_XDP zero-copy support (veth never has). Use BindAuto or BindCopy.
	ErrZeroCopyUnsupported = errors.New("afxdp: driver does not support zero-copy AF_XDP")
	// ErrProgramAttached: another XDP program is already attached to the
	// interface (by another process or by `ip link set dev X xdp ...`).
	ErrProgramAttached = errors.New("afxdp: another XDP program is attached to the interface")
	// ErrQueueBusy: another AF_XDP socket is bound to the queue and did not
	// go away within Config.BindRetry.
	ErrQueueBusy = errors.New("afxdp: queue is busy (another AF_XDP socket is bound to it)")
	// ErrAttachMode: the requested XDP attach mode is not supported by the
	// driver (AttachNative on a driver without native XDP).
	ErrAttachMode = errors.New("afxdp: XDP attach mode not supported by the driver")
	// ErrFrameOwnership: a frame was handed to an operation by a party that
	// does not own it (double release, transmit of a free frame, a kernel
	// descriptor for a frame that was never on the fill ring). See FrameError.
	ErrFrameOwnership = errors.New("afxdp: frame ownership violation")
	// ErrBadDescriptor: a descriptor points outside the UMEM or its length
	// runs past the end of its frame.
	ErrBadDescriptor = errors.New("afxdp: descriptor outside its frame")
	// ErrInvalidConfig: Config failed validation; the wrapping error names the field.
	ErrInvalidConfig = errors.New("afxdp: invalid config")
	// ErrClosed is returned by operations on a closed Port; it wraps
	// net.ErrClosed, so errors.Is(err, net.ErrClosed) holds too.
	ErrClosed = fmt.Errorf("afxdp: port closed: %w", net.ErrClosed)
)

// FrameError describes one ownership violation: frame Frame was expected to
// be owned by Want but the ledger says Have. It matches ErrFrameOwnership
// with errors.Is.
type FrameError struct {
	Op    string // "release", "transmit", "receive", "complete"
	Frame uint32 // frame index in the UMEM
	Have  Owner  // owner recorded in the ledger
	Want  Owner  // owner the operation requires
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("afxdp: %s of frame %d owned by %s, want %s", e.Op, e.Frame, e.Have, e.Want)
}

// Is makes errors.Is(err, ErrFrameOwnership) true.
func (e *FrameError) Is(target error) bool { return target == ErrFrameOwnership }

// SyscallError is a failed system call during setup, with the object it
// concerned. It unwraps to the errno and, when one applies, to a sentinel
// above (so both errors.Is(err, unix.EPERM) and errors.Is(err, ErrPermission)
// hold).
type SyscallError struct {
	Op       string // e.g. "bind", "setsockopt XDP_UMEM_REG"
	Iface    string
	Queue    int // -1 when not queue specific
	Err      error
	Sentinel error // may be nil
	Hint     string
}

func (e *SyscallError) Error() string {
	s := "afxdp: " + e.Op
	if e.Iface != "" {
		s += " " + e.Iface
		if e.Queue >= 0 {
			s += fmt.Sprintf(" queue %d", e.Queue)
		}
	}
	s += ": " + e.Err.Error()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns the errno and the sentinel.
func (e *SyscallError) Unwrap() []error {
	if e.Sentinel != nil {
		return []error{e.Err, e.Sentinel}
	}
	return []error{e.Err}
}

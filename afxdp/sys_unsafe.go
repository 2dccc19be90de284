//go:build linux

package afxdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thin wrappers for the AF_XDP socket options whose values are structs, and
// the one ethtool ioctl we need. Every use of unsafe in the setup path is here.

// registerUMEM is setsockopt(XDP_UMEM_REG) for mem (aligned chunks).
func registerUMEM(fd int, mem []byte, frameSize, headroom uint32) error {
	reg := unix.XDPUmemReg{
		Addr:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))),
		Len:      uint64(len(mem)),
		Size:     frameSize,
		Headroom: headroom,
	}
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockoptMmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return off, e
	}
	return off, nil
}

func getsockoptStatistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return st, e
	}
	return st, nil
}

// kick is sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0): it asks the kernel to
// process the TX ring. No allocation (unix.Sendto would build a sockaddr).
func kick(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// wakeRx is recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL): it wakes the
// driver to process the fill ring when XDP_RING_NEED_WAKEUP is set on it.
func wakeRx(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// ethtoolChannels is struct ethtool_channels.
type ethtoolChannels struct {
	cmd           uint32
	maxRx         uint32
	maxTx         uint32
	maxOther      uint32
	maxCombined   uint32
	rxCount       uint32
	txCount       uint32
	otherCount    uint32
	combinedCount uint32
}

const ethtoolGChannels = 0x3c // ETHTOOL_GCHANNELS

// rxQueueCount asks the driver (ETHTOOL_GCHANNELS) how many RX queues ifname
// has. ok is false when the driver does not say.
func rxQueueCount(ifname string) (n int, ok bool) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: ethtoolGChannels}
	// A typed pointer field (not a uintptr) so the GC and stack copying see it.
	ifr := ifreqData{data: unsafe.Pointer(&ch)}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return 0, false
	}
	n = int(max(ch.rxCount, ch.combinedCount))
	return n, n > 0
}

// ifreqData is struct ifreq with its union holding a pointer (ifr_data).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

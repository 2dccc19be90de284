//go:build linux

package testbed

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	ethtoolSRxCsum = 0x15 // ETHTOOL_SRXCSUM
	ethtoolSTxCsum = 0x17 // ETHTOOL_STXCSUM
)

// setRxChecksum turns rx-checksumming on or off (ETHTOOL_SRXCSUM) for
// ifname in the calling thread's namespace.
func setRxChecksum(ifname string, on bool) error { return setEthtoolValue(ifname, ethtoolSRxCsum, on) }

// setTxChecksum turns tx-checksumming on or off (ETHTOOL_STXCSUM) for ifname
// in the calling thread's namespace; off also turns TSO off.
func setTxChecksum(ifname string, on bool) error { return setEthtoolValue(ifname, ethtoolSTxCsum, on) }

// setEthtoolValue issues one struct ethtool_value SIOCETHTOOL command.
func setEthtoolValue(ifname string, cmd uint32, on bool) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	val := struct{ cmd, data uint32 }{cmd: cmd}
	if on {
		val.data = 1
	}
	// A typed pointer field (not a uintptr) so the GC and stack copying see it.
	ifr := ifreqData{data: unsafe.Pointer(&val)}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return e
	}
	return nil
}

// ifreqData is struct ifreq with its union holding a pointer (ifr_data).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

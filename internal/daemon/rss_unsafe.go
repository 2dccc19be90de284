//go:build linux

package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrRSSUnsuitable: the NIC's RSS cannot place dials: it is not a Toeplitz
// hash, or it hashes UDP/IPv4 on more than the addresses (so one NDP
// connection's frames, sprayed over UDP source ports, land on several
// queues).
var ErrRSSUnsuitable = errors.New("ndpd: RSS unsuitable for NDP over several queues")

const (
	ethtoolRxfhHeader = 24   // struct ethtool_rxfh up to rss_config[]
	ethHashTop        = 1    // ETH_RSS_HASH_TOP in ethtool_rxfh.hfunc
	udpV4Flow         = 0x02 // UDP_V4_FLOW
	rxhIPSrc          = 1 << 4
	rxhIPDst          = 1 << 5
)

// ReadRSS reads ifname's RSS (ETHTOOL_GRXFH for UDP/IPv4, ETHTOOL_GRSSH for
// the key and indirection table) in the calling thread's namespace; served
// are the NIC queues the daemon serves, in order. Errors: the ioctl's (veth
// and other drivers without RSS: EOPNOTSUPP), or ErrRSSUnsuitable.
func ReadRSS(ifname string, served []int) (RSS, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return RSS{}, err
	}
	defer unix.Close(fd)
	// struct ethtool_rxnfc up to and including data: all ETHTOOL_GRXFH uses.
	var nfc [16]byte
	binary.NativeEndian.PutUint32(nfc[0:], unix.ETHTOOL_GRXFH)
	binary.NativeEndian.PutUint32(nfc[4:], udpV4Flow)
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&nfc[0])); err != nil {
		return RSS{}, fmt.Errorf("ETHTOOL_GRXFH %s: %w", ifname, err)
	}
	if fields := binary.NativeEndian.Uint64(nfc[8:]); fields != rxhIPSrc|rxhIPDst {
		return RSS{}, fmt.Errorf("%w: %s hashes udp4 on %#x, want addresses only (ethtool -N %s rx-flow-hash udp4 sd)", ErrRSSUnsuitable, ifname, fields, ifname)
	}
	hdr := make([]byte, ethtoolRxfhHeader)
	binary.NativeEndian.PutUint32(hdr, unix.ETHTOOL_GRSSH)
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&hdr[0])); err != nil {
		return RSS{}, fmt.Errorf("ETHTOOL_GRSSH %s: %w", ifname, err)
	}
	indirSize, keySize := binary.NativeEndian.Uint32(hdr[8:]), binary.NativeEndian.Uint32(hdr[12:])
	if indirSize == 0 || indirSize > 1<<16 || keySize < 12 || keySize > 256 {
		return RSS{}, fmt.Errorf("%w: %s: indirection table of %d, key of %d bytes", ErrRSSUnsuitable, ifname, indirSize, keySize)
	}
	buf := make([]byte, ethtoolRxfhHeader+4*int(indirSize)+int(keySize))
	binary.NativeEndian.PutUint32(buf, unix.ETHTOOL_GRSSH)
	binary.NativeEndian.PutUint32(buf[8:], indirSize)
	binary.NativeEndian.PutUint32(buf[12:], keySize)
	if err := ethtoolIoctl(fd, ifname, unsafe.Pointer(&buf[0])); err != nil {
		return RSS{}, fmt.Errorf("ETHTOOL_GRSSH %s: %w", ifname, err)
	}
	if hfunc := buf[16]; hfunc != ethHashTop {
		return RSS{}, fmt.Errorf("%w: %s's hash function %#x is not Toeplitz (ethtool -X %s hfunc toeplitz)", ErrRSSUnsuitable, ifname, hfunc, ifname)
	}
	r := RSS{Indir: make([]uint32, indirSize), Served: append([]int(nil), served...)}
	for i := range r.Indir {
		r.Indir[i] = binary.NativeEndian.Uint32(buf[ethtoolRxfhHeader+4*i:])
	}
	r.Key = append([]byte(nil), buf[ethtoolRxfhHeader+4*int(indirSize):]...)
	return r, nil
}

// ethtoolIoctl issues SIOCETHTOOL on ifname with data as ifr_data.
func ethtoolIoctl(fd int, ifname string, data unsafe.Pointer) error {
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer // typed, so the GC sees the buffer
		_    [16]byte
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = data
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return e
	}
	return nil
}
